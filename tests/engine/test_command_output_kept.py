"""A command's output is kept up to a bound: its beginning and end, the command runs on.

`KeptOutput` (engine/kept_output.py) holds what `run_process` keeps of a stream;
command steps and hooks keep `limits.output_bytes_kept` (4 MiB by default) of each of
stdout and stderr, and a step says when something was not kept.
"""

from __future__ import annotations

import pytest

from awf_nb.engine.events import RunWarning, StepOutput
from awf_nb.engine.kept_output import KeptOutput
from awf_nb.secrets import Masker
from awf_nb.workflow.model import DEFAULT_OUTPUT_BYTES_KEPT
from tests.support.events import Collect

MARK = "bytes of output not kept"


def test_output_under_the_bound_is_kept_whole() -> None:
    kept = KeptOutput(16)
    for chunk in (b"hello ", b"", b"world"):
        kept.add(chunk)
    assert kept.finish() == ("hello world", 0)


def test_past_the_bound_the_first_and_last_halves_are_kept_and_the_rest_counted() -> None:
    kept = KeptOutput(10)
    data = bytes(range(65, 91))  # A..Z, 26 bytes, in chunks of every size
    for start, size in ((0, 1), (1, 7), (8, 3), (11, 15)):
        kept.add(data[start : start + size])
    assert kept.finish() == ("ABCDE\n[… 16 bytes of output not kept …]\nVWXYZ", 16)


def test_many_small_chunks_keep_the_tail_exact() -> None:
    kept = KeptOutput(8)
    for n in range(1000):
        kept.add(f"{n % 10}".encode())
    text, cut = kept.finish()
    assert cut == 992
    assert text.startswith("0123\n") and text.endswith("\n6789")


def test_a_character_split_by_the_cut_is_left_out_not_mangled() -> None:
    kept = KeptOutput(8)
    kept.add("abcé".encode())  # 'é' is 2 bytes: the head (4 bytes) ends inside it
    kept.add(b"x" * 20)
    kept.add("€yz".encode())  # '€' is 3 bytes: the tail (4 bytes) starts inside it
    text, cut = kept.finish()
    assert text == "abc\n[… 25 bytes of output not kept …]\nyz"  # 30 bytes, 5 shown
    assert cut == 25


def test_no_part_of_a_secret_the_cut_split_is_kept() -> None:
    """Masking finds whole secrets: the halves of one split by the cut would each pass."""
    masker = Masker(["sk-live-0123456789"])
    kept = KeptOutput(24)  # 12 bytes on each side of the cut
    kept.add(b"log:  sk-liv" + b"." * 50 + b"3456789 end!")
    assert kept.finish() == ("log:  sk-liv\n[… 50 bytes of output not kept …]\n3456789 end!", 50)
    text, cut = kept.finish(masker.around_cut)
    assert text == "log:  \n[… 63 bytes of output not kept …]\n end!"
    assert cut == 63  # 74 bytes, 6 + 5 shown
    plain = KeptOutput(24)
    plain.add(b"no secret here: just a long log" + b"." * 100 + b" and the end")
    assert plain.finish(masker.around_cut) == plain.finish()  # nothing else is trimmed


@pytest.mark.asyncio
async def test_a_command_step_keeps_the_beginning_and_end_and_says_so(run_yaml) -> None:
    sink = Collect()
    result = await run_yaml(
        """
        name: t
        limits: {output_bytes_kept: 65536}
        states:
          initial: loud
          loud:
            type: step
            command: seq 1 400000
            on_success: done
          done: {type: terminal}
        """,
        sink=sink,
    )
    assert result.ok, result.error
    output = result.outputs["loud"]
    assert output.startswith("1\n2\n3\n") and output.endswith("\n399999\n400000")
    assert MARK in output and len(output.encode()) < 65536 + 100
    shown = "".join(e.text for e in sink.of(StepOutput) if e.stream == "stdout")
    assert shown.split() == [str(n) for n in range(1, 400001)]  # shown live, all of it
    warnings = [e.message for e in sink.of(RunWarning)]
    assert len(warnings) == 1
    assert "its stdout was longer than 65,536 bytes" in warnings[0]
    assert "(limits.output_bytes_kept)" in warnings[0]


@pytest.mark.asyncio
async def test_by_default_a_runaway_command_keeps_at_most_the_default(run_yaml) -> None:
    result = await run_yaml(
        """
        name: t
        states:
          initial: flood
          flood:
            type: step
            command: head -c 25000000 /dev/zero | tr '\\0' x; echo; echo the end
            on_success: done
          done: {type: terminal}
        """
    )
    assert result.ok, result.error
    output = result.outputs["flood"]
    assert len(output) <= DEFAULT_OUTPUT_BYTES_KEPT + 100
    assert output.startswith("xxxx") and output.endswith("\nthe end") and MARK in output


@pytest.mark.asyncio
async def test_the_last_line_of_a_long_stderr_still_explains_the_failure(run_yaml) -> None:
    result = await run_yaml(
        """
        name: t
        limits: {output_bytes_kept: 4096}
        states:
          initial: build
          build:
            type: step
            command: |
              seq 1 100000 >&2; echo "error: the real cause" >&2; exit 3
            on_success: done
            on_failure: done
          done: {type: terminal}
        """
    )
    state = result.steps["build"]
    assert state.exit_code == 3
    assert state.error == "exit code 3: error: the real cause"
    assert state.stderr.startswith("1\n2\n") and MARK in state.stderr


def test_an_eval_s_limits_may_keep_less_never_more() -> None:
    from awf_nb.engine.limits import stricter
    from awf_nb.workflow.model import Limits

    workflow = Limits(output_bytes_kept=1 << 20)
    assert stricter(workflow, Limits(output_bytes_kept=4096)).output_bytes_kept == 4096
    assert stricter(workflow, Limits(output_bytes_kept=1 << 30)).output_bytes_kept == 1 << 20
    assert stricter(workflow, Limits(max_tokens=5)).output_bytes_kept == 1 << 20  # not set


def test_a_bound_below_1_kib_is_a_located_error() -> None:
    from tests.support.problems import only, problems_of

    problem = only(
        problems_of(
            """
            name: t
            limits: {output_bytes_kept: 10}
            states:
              initial: a
              a: {type: step, command: 'true', on_success: done}
              done: {type: terminal}
            """
        ),
        "greater than or equal to 1024, got 10",
    )
    assert (problem.severity, problem.path, problem.line) == (
        "error",
        "limits.output_bytes_kept",
        2,
    )


@pytest.mark.asyncio
async def test_a_command_step_keeps_no_part_of_a_secret_its_cut_split(run_yaml) -> None:
    secret = "sk-live-" + "0123456789abcdef" * 2  # 40 characters
    result = await run_yaml(
        """
        name: t
        inputs: [{name: api_key}]
        limits: {output_bytes_kept: 1024}
        states:
          initial: leak
          leak:
            type: step
            command: |
              head -c 500 /dev/zero | tr '\\0' a; printf %s "$api_key"
              head -c 5000 /dev/zero | tr '\\0' b; printf %s "$api_key"
              head -c 500 /dev/zero | tr '\\0' c
            on_success: done
          done: {type: terminal}
        """,
        {"api_key": secret},
    )
    output = result.outputs["leak"]
    assert output.startswith("a" * 500) and output.endswith("c" * 500) and MARK in output
    assert all(secret[i : i + 4] not in output for i in range(len(secret) - 3))
