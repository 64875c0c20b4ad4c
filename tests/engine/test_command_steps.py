"""Command steps: shell, env, dir, script_file, timeouts, retries, injection safety."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest

from awf_nb.engine.events import StepOutput
from tests.support.events import Collect
from tests.support.processes import process_alive

pytestmark = pytest.mark.asyncio


async def test_command_output_exit_code_and_templates(run_yaml):
    result = await run_yaml(
        """
        name: t
        inputs:
          - {name: who, default: world}
        states:
          initial: hello
          hello:
            type: step
            command: echo "hello {{.inputs.who}}"; echo oops >&2
            on_success: second
          second:
            type: step
            command: echo "got {{.states.hello.Output}} ({{.states.hello.ExitCode}})"
            on_success: done
          done: {type: terminal, message: "said {{.states.second.Output}}"}
        """
    )
    assert result.ok, result.error
    assert result.outputs["hello"] == "hello world"
    assert result.steps["hello"].stderr == "oops"
    assert result.outputs["second"] == "got hello world (0)"
    assert result.message == "said got hello world (0)"


async def test_inputs_are_exported_as_env_vars(run_yaml):
    result = await run_yaml(
        """
        name: t
        inputs: [{name: topic}]
        states:
          initial: a
          a: {type: step, command: 'printf "%s" "$topic"', on_success: done}
          done: {type: terminal}
        """,
        {"topic": "it's $HOME"},
    )
    assert result.outputs["a"] == "it's $HOME"


@pytest.mark.parametrize("use", ["escape", "env"])
async def test_shell_injection_runs_no_extra_command(run_yaml, tmp_path, use):
    marker = tmp_path / "pwned"
    payload = f"'; touch {marker} #"
    command = "echo {{.inputs.x | escape}}" if use == "escape" else 'echo "$x"'
    result = await run_yaml(
        f"""
        name: t
        inputs: [{{name: x}}]
        states:
          initial: a
          a: {{type: step, command: {command!r}, on_success: done}}
          done: {{type: terminal}}
        """,
        {"x": payload},
    )
    assert result.ok, result.error
    assert result.outputs["a"] == payload
    assert not marker.exists()


async def test_failure_routes_to_on_failure_and_records_error(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: "echo bad >&2; exit 3", on_success: ok, on_failure: handle}
          handle: {type: step, command: "echo handled {{.states.a.ExitCode}}", on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.ok
    assert result.steps["a"].status == "failed"
    assert result.steps["a"].exit_code == 3
    assert "exit code 3: bad" in result.steps["a"].error
    assert result.outputs["handle"] == "handled 3"


async def test_failure_without_route_fails_the_run(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: "exit 7", on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.status == "failed"
    assert result.error == "step a: exit code 7"
    assert result.exit_code == 3


async def test_inline_on_failure_message_and_status(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a:
            type: step
            command: exit 2
            on_success: ok
            on_failure: {message: "build broke ({{.states.a.ExitCode}})", status: 5}
          ok: {type: terminal}
        """
    )
    assert result.status == "failed"
    assert result.error == "build broke (2)"
    assert result.exit_code == 5


async def test_continue_on_error_goes_to_on_success(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: "exit 1", continue_on_error: true, on_success: b}
          b: {type: step, command: "echo after", on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.ok
    assert result.steps["a"].status == "failed"
    assert result.outputs["b"] == "after"


async def test_transitions_first_match_and_default(run_yaml):
    result = await run_yaml(
        """
        name: t
        inputs: [{name: n, type: integer, default: 5}]
        states:
          initial: a
          a:
            type: step
            command: echo {{.inputs.n}}
            transitions:
              - {when: "inputs.n > 10", goto: big}
              - {when: "states.a.Output == '5'", goto: five}
              - {goto: other}
          big: {type: terminal, message: big}
          five: {type: terminal, message: five}
          other: {type: terminal, message: other}
        """
    )
    assert result.message == "five"


async def test_transitions_on_failure_for_command_steps(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a:
            type: step
            command: exit 4
            transitions:
              - {when: "states.a.ExitCode == 4", goto: four}
          four: {type: terminal, message: four}
        """
    )
    assert result.message == "four"


async def test_failure_terminal_fails_run_with_message(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: "true", on_success: bad}
          bad: {type: terminal, status: failure, message: "gave up after {{.states.a.ExitCode}}"}
        """
    )
    assert result.status == "failed"
    assert result.error == "gave up after 0"


async def test_dir_and_working_directory(run_yaml, workdir: Path):
    (workdir / "sub").mkdir()
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: pwd, dir: sub, on_success: b}
          b: {type: step, command: pwd, on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.outputs["a"] == str((workdir / "sub").resolve())
    assert result.outputs["b"] == str(workdir.resolve())


async def test_script_file_with_shebang_and_template(run_yaml, workdir: Path):
    script = workdir / "s.py"
    script.write_text("#!/usr/bin/env python3\nprint('py says {{.inputs.x}}')\n")
    (workdir / "s.sh").write_text("echo sh says $x\n")
    result = await run_yaml(
        """
        name: t
        inputs: [{name: x, default: hi}]
        states:
          initial: a
          a: {type: step, script_file: s.py, on_success: b}
          b: {type: step, script_file: s.sh, on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.ok, result.error
    assert result.outputs["a"] == "py says hi"
    assert result.outputs["b"] == "sh says hi"


async def test_timeout_kills_the_whole_process_group(run_yaml, tmp_path):
    pidfile = tmp_path / "child.pid"
    result = await run_yaml(
        f"""
        name: t
        states:
          initial: a
          a:
            type: step
            command: "sleep 30 & echo $! > {pidfile}; wait"
            timeout: 500ms
            on_success: ok
          ok: {{type: terminal}}
        """
    )
    assert result.status == "failed"
    assert "timed out after 0.5s" in result.error
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild sleep survived the timeout")


async def test_a_background_job_holding_the_output_does_not_hold_the_step(run_yaml, tmp_path):
    """`job & echo hi`: the shell is done at once; the job, which still holds the output
    pipe, is stopped after the grace period instead of being waited for."""
    pidfile = tmp_path / "job.pid"
    run = run_yaml(
        f"""
        name: t
        states:
          initial: a
          a: {{type: step, command: "sleep 300 & echo $! > {pidfile}; echo hi", on_success: ok}}
          ok: {{type: terminal}}
        """
    )
    result = await asyncio.wait_for(run, 120)  # a hang guard: the job sleeps 300 s
    assert result.status == "completed", result.error
    assert result.outputs["a"] == "hi"
    assert not process_alive(int(pidfile.read_text()))


async def test_a_background_job_with_its_own_output_is_left_running(run_yaml, tmp_path):
    """A job that redirected its output (a server started on purpose) holds no pipe of
    the step: the step ends with the shell and the job is not touched."""
    pidfile = tmp_path / "job.pid"
    result = await run_yaml(
        f"""
        name: t
        states:
          initial: a
          a:
            type: step
            command: "sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}; echo hi"
            on_success: ok
          ok: {{type: terminal}}
        """
    )
    pid = int(pidfile.read_text())
    try:
        assert result.status == "completed", result.error
        assert process_alive(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


@pytest.mark.parametrize(
    ("jitter", "bounds"),
    [(0, [(1.0, 1.0), (2.0, 2.0)]), (0.5, [(0.5, 1.5), (1.0, 3.0)])],
    ids=["exact", "jittered"],
)
async def test_retry_with_backoff_until_success(run_yaml, tmp_path, monkeypatch, jitter, bounds):
    # A fake clock: every sleep returns at once and is recorded. Retry delays are whole
    # seconds here, far above any pause the engine takes for itself.
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, *args, **kwargs):
        slept.append(delay)
        return await real_sleep(0, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    counter = tmp_path / "count"
    result = await run_yaml(
        f"""
        name: t
        states:
          initial: a
          a:
            type: step
            command: 'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]'
            retry: {{max_attempts: 5, initial_delay: 1s, backoff: exponential, jitter: {jitter}}}
            on_success: ok
          ok: {{type: terminal}}
        """
    )
    assert result.ok
    assert result.steps["a"].attempt == 3
    retry_delays = [delay for delay in slept if delay >= 0.5]
    assert len(retry_delays) == 2, slept
    for delay, (low, high) in zip(retry_delays, bounds, strict=True):
        assert low <= delay <= high, retry_delays


async def test_retry_only_for_retryable_exit_codes(run_yaml, tmp_path):
    counter = tmp_path / "count"
    result = await run_yaml(
        f"""
        name: t
        states:
          initial: a
          a:
            type: step
            command: 'echo x >> {counter}; exit 9'
            retry: {{max_attempts: 4, initial_delay: 0, retryable_exit_codes: [75]}}
            on_success: ok
          ok: {{type: terminal}}
        """
    )
    assert result.status == "failed"
    assert counter.read_text().count("x") == 1


async def test_output_streams_as_events(run_yaml):
    sink = Collect()
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: "echo one; echo two >&2", on_success: ok}
          ok: {type: terminal}
        """,
        sink=sink,
    )
    assert result.ok
    chunks = sink.of(StepOutput)
    assert "".join(c.text for c in chunks if c.stream == "stdout") == "one\n"
    assert "".join(c.text for c in chunks if c.stream == "stderr") == "two\n"


async def test_json_output_becomes_response(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: step, command: "echo '{\\"ok\\": true, \\"n\\": 2}'", on_success: b}
          b: {type: step, command: "echo {{.states.a.Response.n}}", on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.ok, result.error
    assert result.outputs["b"] == "2"


async def test_secret_inputs_masked_in_output_state_and_events(run_yaml, store):
    sink = Collect()
    secret = "s3cr3t-value-123"
    result = await run_yaml(
        """
        name: t
        inputs: [{name: API_KEY}]
        states:
          initial: a
          a: {type: step, command: 'echo "key=$API_KEY"', on_success: ok}
          ok: {type: terminal}
        """,
        {"API_KEY": secret},
        sink=sink,
    )
    assert result.outputs["a"] == "key=***"
    saved = store.state_path(result.run_id).read_text()
    assert secret not in saved
    assert all(secret not in repr(e) for e in sink.events)


async def test_a_nul_byte_put_into_a_command_fails_its_step_with_a_clear_error(run_yaml):
    """A reply (or a file, a cassette) can hold a NUL byte, which no command line can:
    the step fails saying so (exit code 3), instead of an internal error."""
    result = await run_yaml(
        """
        name: nul
        states:
          initial: ask
          ask: {type: agent, provider: scripted, prompt: hi, options: {replies: ["a\\0b"]}, on_success: use}
          use: {type: step, command: 'echo {{.states.ask.Output}}', on_success: done}
          done: {type: terminal}
        """
    )

    assert result.status == "failed" and result.exit_code == 3
    assert result.error == (
        "step use: cannot start command: its command line holds a NUL byte, which no command "
        "can be given (a text put into it, such as a reply or a file, had one)"
    )
