"""A condition that reads a name its scope cannot hold is a validation error, located, with a
did-you-mean: `until`, `when`, `while`, `break_when`, and an eval's condition scorers. Such
a name is nil at run time, so the condition could never hold (an exchange would silently
run to `max_turns`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from awf_nb.errors import DefinitionError
from awf_nb.evals.loader import load_eval
from awf_nb.workflow import expr
from tests.support.problems import problems_of

EXCHANGE = """
name: duo
states:
  initial: write
  write:
    type: agent
    provider: scripted
    mode: conversation
    prompt: Write a haiku
    conversation:
      with: {{replies: [more, APPROVED]}}
      until: '{until}'
      max_turns: 4
    on_success: done
  done:
    type: terminal
"""


def errors(text: str) -> list[tuple[str, int, int, str | None]]:
    return [
        (p.message, p.line, p.column, p.hint) for p in problems_of(text) if p.severity == "error"
    ]


@pytest.mark.parametrize(
    ("until", "name", "column", "hint"),
    [
        ("turn_count >= 2", "turn_count", 1, 'did you mean "turn"?'),
        ('responze contains "x"', "responze", 1, 'did you mean "reply"?'),
        ('message == "ok" or tokns > 900', "tokns", 20, 'did you mean "tokens"?'),
        ('response contains "x"', "response", 1, 'did you mean "reply"?'),
    ],
)
def test_an_until_that_reads_an_unknown_name_is_an_error(
    until: str, name: str, column: int, hint: str
) -> None:
    [(message, line, col, given)] = errors(EXCHANGE.format(until=until))
    assert message.startswith(
        f'condition {until!r}: unknown name "{name}" at column {column}; '
        "here a condition can read reply, message, turn, tokens, inputs, states"
    )
    assert (line, col) == (11, 7)  # the until
    assert given is not None and given.startswith(hint)


@pytest.mark.parametrize(
    "until",
    [
        "turn >= 2",
        'reply contains "ok" and message != "" and tokens < 900',
        'inputs.x == nil or states.write.Output != "" or env.HOME != ""',
        'workflow.Name == "duo" and context.User != "" and len(reply) > 0',
    ],
)
def test_every_name_an_until_can_read_is_valid(until: str) -> None:
    assert errors(EXCHANGE.format(until=until)) == []


ROUTED = """
name: routed
states:
  initial: count
  count:
    type: for_each
    items: '["a", "b"]'
    body: [say]
    break_when: 'loop.Index >= 1'
    on_complete: check
  say:
    type: step
    command: echo {{{{.loop.Item}}}}
    transitions:
      - when: 'loop.First'
        goto: say_done
      - goto: say_done
  say_done:
    type: terminal
  check:
    type: step
    command: 'true'
    transitions:
      - when: '{when}'
        goto: done
      - goto: done
  done:
    type: terminal
"""


def test_a_transition_that_reads_an_unknown_name_is_an_error() -> None:
    [(message, line, column, hint)] = errors(ROUTED.format(when='sates.count.Output != ""'))
    assert message.startswith('condition \'sates.count.Output != ""\': unknown name "sates"')
    assert (line, column, hint) == (23, 9, 'did you mean "states"?')


def test_loop_is_read_inside_a_loop_only() -> None:
    assert errors(ROUTED.format(when='states.count.Output != ""')) == []
    [(message, *_)] = errors(ROUTED.format(when="loop.Index == 0"))
    assert 'unknown name "loop"' in message


def test_a_name_is_reported_once_with_its_first_column() -> None:
    assert expr.parse("a.b or a.c or b[a]").names() == [("a", 1), ("a", 8), ("b", 15), ("a", 17)]
    [(message, *_)] = errors(EXCHANGE.format(until="nope > 1 or nope < 0"))
    assert 'unknown name "nope" at column 1' in message


def test_an_eval_condition_that_reads_an_unknown_name_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(
        "name: w\nstates:\n  initial: a\n  a: {type: step, command: 'true', on_success: b}\n"
        "  b: {type: terminal}\n"
    )
    (tmp_path / "cases.jsonl").write_text('{"id": "x"}\n')
    (tmp_path / "t.eval.yaml").write_text(
        textwrap.dedent(
            """\
            workflow: wf.yaml
            dataset: cases.jsonl
            scorers:
              - name: ok
                condition: 'status == "completed" and transcript contains case.id'
              - name: typo
                condition: 'stoped_by == "user_exit"'
              - name: workflow_name
                condition: 'reply contains "x"'
            """
        )
    )
    with pytest.raises(DefinitionError) as caught:
        load_eval(tmp_path / "t.eval.yaml")
    found = [(p.path, p.line, p.column, p.hint) for p in caught.value.problems]
    assert found == [
        ("scorers[1].condition", 7, 5, 'did you mean "stopped_by"?'),
        ("scorers[2].condition", 9, 5, found[1][3]),
    ]
    first, second = (p.message for p in caught.value.problems)
    assert 'unknown name "stoped_by" at column 1' in first
    assert 'unknown name "reply" at column 1' in second
    assert "here a condition can read case, epoch, run_id, status" in second
