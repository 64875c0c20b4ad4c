"""`%%awf` in an IPython shell: flags, inputs, handles, dry runs, headless conversations,
errors shown as one clean paragraph.

These use a plain `InteractiveShell` (no kernel), where a run prints like `awf run`; the
widget panel is tested in test_panel*.py and test_magic_modes.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from awf_nb.api import RunResult
from awf_nb.frontends.notebook.handle import AwfCellError, RunHandle
from awf_nb.frontends.notebook.parsers import expand_braces
from tests.support.notebook import cell

ROOT = Path(__file__).resolve().parents[3]

HELLO = """\
name: hello
inputs:
  - name: who
    type: string
    default: World
states:
  initial: greet
  greet:
    type: command
    command: echo "Hello {{.inputs.who}}"
    on_success: answer
  answer:
    type: agent
    provider: scripted
    prompt: "Greet {{.inputs.who}}"
    options:
      replies: ["Hi, {{.inputs.who}}!"]
    on_success: done
  done:
    type: terminal
    message: "{{.states.answer.Output}}"
"""

CHAT = """\
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let's talk."
    options:
      replies: ["First answer.", "Second answer.", "Third answer."]
    on_success: done
  done:
    type: terminal
    message: "{{.states.talk.Conversation.TotalTurns}} replies"
"""

FAILING = """\
name: broken
states:
  initial: build
  build:
    type: command
    command: "echo compiling; echo 'missing header' >&2; exit 3"
    on_success: done
  done: {type: terminal}
"""


def test_a_cell_runs_its_workflow_and_binds_the_handle(ip: InteractiveShell, capsys) -> None:
    outcome = cell(ip, "%%awf\n" + HELLO)

    assert outcome.success, outcome.error_in_exec
    handle = ip.user_ns["_awf"]
    assert isinstance(handle, RunHandle) and handle.done()
    result = handle.result()
    assert isinstance(result, RunResult)
    assert result.outputs["greet"] == "Hello World"
    assert result.state.message == "Hi, World!"
    out = capsys.readouterr().out
    assert "Hello World" in out and "Hi, World!" in out


def test_inputs_on_the_line_are_split_like_a_shell(ip: InteractiveShell) -> None:
    outcome = cell(ip, '%%awf -i who="Go channels" --out h\n' + HELLO)

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["h"].result().outputs["greet"] == "Hello Go channels"
    assert "_awf" not in ip.user_ns


def test_braces_name_python_variables_only_when_written_so(ip: InteractiveShell) -> None:
    ip.user_ns["person"] = "Ada"
    outcome = cell(ip, '%%awf -i who="{person} and {nobody} {{.x}} $HOME" --out h\n' + HELLO)

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["h"].result().state.inputs["who"] == "Ada and {nobody} {{.x}} $HOME"


def test_yaml_braces_on_the_line_are_left_alone(ip: InteractiveShell) -> None:
    text = """\
name: echo-data
inputs:
  - {name: data, type: string}
states:
  initial: show
  show: {type: command, command: "printf '%s' \\"$AWF_INPUT_DATA\\"", on_success: done}
  done: {type: terminal, message: "{{.inputs.data}}"}
"""
    outcome = cell(ip, "%%awf -i 'data={\"a\": [1, 2]}' --out h\n" + text)

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["h"].result().state.message == '{"a": [1, 2]}'


def test_expand_braces_resolves_attributes_and_leaves_the_rest() -> None:
    class Config:
        topic = "channels"

    namespace = {"cfg": Config(), "n": 3}
    assert expand_braces("{cfg.topic} x{n} {cfg.missing} {{n}} {n + 1}", namespace) == (
        "channels x3 {cfg.missing} {{n}} {n + 1}"
    )


def test_reply_flags_run_a_conversation_headless(ip: InteractiveShell, capsys) -> None:
    outcome = cell(ip, '%%awf --reply "Tell me more" --reply "" --out chat\n' + CHAT)

    assert outcome.success, outcome.error_in_exec
    result = ip.user_ns["chat"].result()
    turns = result.steps["talk"].conversation.turns
    assert [t.content for t in turns] == [
        "Let's talk.",
        "First answer.",
        "Tell me more",
        "Second answer.",
    ]
    assert result.state.message == "2 replies"
    assert "> Tell me more" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["flag", "env"])
def test_headless_conversations_end_after_the_first_reply(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    line = "%%awf --out chat"
    if how == "flag":
        line += " --no-interactive"
    else:
        monkeypatch.setenv("AWF_NO_INTERACTIVE", "1")
    outcome = cell(ip, line + "\n" + CHAT)

    assert outcome.success, outcome.error_in_exec
    conversation = ip.user_ns["chat"].result().steps["talk"].conversation
    assert conversation.total_turns == 1
    assert conversation.stopped_by == "user_exit"


def test_dry_run_shows_the_plan_and_runs_nothing(ip: InteractiveShell, capsys) -> None:
    outcome = cell(ip, "%%awf --dry-run -i who=Ada\n" + HELLO)

    assert outcome.success, outcome.error_in_exec
    out = capsys.readouterr().out
    assert "dry run" in out and 'echo "Hello Ada"' in out
    assert "_awf" not in ip.user_ns
    assert not (Path(os.environ["AWF_STORAGE"]) / "runs").exists()


def test_await_on_the_handle_gives_the_result(ip: InteractiveShell) -> None:
    assert cell(ip, "%%awf --out h\n" + HELLO).success
    outcome = cell(ip, "result = await h")

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["result"].outputs["answer"] == "Hi, World!"


def test_the_handle_renders_as_a_summary(ip: InteractiveShell) -> None:
    assert cell(ip, "%%awf --out h\n" + HELLO).success
    bundle = ip.user_ns["h"]._repr_mimebundle_()

    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"].startswith("hello: completed in")
    assert "greet" in bundle["text/plain"] and "answer" in bundle["text/plain"]
    assert "<table" in bundle["text/html"] and "completed" in bundle["text/html"]


def test_a_workflow_name_on_the_line_names_an_unnamed_workflow(ip: InteractiveShell) -> None:
    body = HELLO.replace("name: hello\n", "")
    outcome = cell(ip, "%%awf greeter --out h\n" + body)

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["h"].workflow == "greeter"


def test_two_different_names_are_a_usage_error(ip: InteractiveShell, capsys) -> None:
    outcome = cell(ip, "%%awf other\n" + HELLO)

    assert isinstance(outcome.error_in_exec, UsageError)
    assert 'names the workflow "hello"' in capsys.readouterr().err


def test_a_name_with_an_empty_body_runs_that_workflow(ip: InteractiveShell, tmp_path) -> None:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "hello.yaml").write_text(HELLO)
    outcome = cell(ip, "%%awf hello -i who=Bob --out h\n")

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["h"].result().outputs["greet"] == "Hello Bob"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%%awf --bogus", "unrecognized arguments: --bogus"),
        ('%%awf -i "unclosed', "No closing quotation"),
        ("%%awf --out 1bad", "--out 1bad: not a Python variable name"),
        ("%%awf --wait --reply", "expected one argument"),
        ("%%awf -i novalue", 'invalid input "novalue"'),
    ],
)
def test_bad_flags_are_usage_errors_without_a_traceback(
    ip: InteractiveShell, capsys, line: str, message: str
) -> None:
    outcome = cell(ip, f"{line}\n{HELLO}")

    assert not outcome.success
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert message in shown
    assert "Traceback" not in shown


def test_an_empty_cell_without_a_name_is_a_usage_error(ip: InteractiveShell, capsys) -> None:
    outcome = cell(ip, "%%awf\n\n")

    assert isinstance(outcome.error_in_exec, UsageError)
    assert "needs a workflow" in capsys.readouterr().err


def test_an_invalid_workflow_fails_the_cell_with_one_paragraph(
    ip: InteractiveShell, capsys
) -> None:
    outcome = cell(ip, "%%awf\nname: x\nstates:\n  initial: nowhere\n")

    assert isinstance(outcome.error_in_exec, AwfCellError)
    shown = capsys.readouterr().out
    # Line numbers are the cell's own: line 1 is the %%awf line.
    assert "<cell>:4:" in shown and "nowhere" in shown
    assert "Traceback" not in shown


def test_a_failed_run_fails_the_cell_and_says_how_to_resume(ip: InteractiveShell, capsys) -> None:
    outcome = cell(ip, "%%awf --out h\n" + FAILING)

    error = outcome.error_in_exec
    assert isinstance(error, AwfCellError)
    handle = ip.user_ns["h"]
    assert error.result is not None and error.result.status == "failed"
    assert f"%awf resume {handle.run_id}" in str(error)
    assert str(error).startswith("workflow broken failed: step build")
    lines = error._render_traceback_()
    assert lines[0].startswith("\x1b[0;31mworkflow broken failed")
    shown = capsys.readouterr().out
    assert "Traceback" not in shown and "missing header" in shown
    with pytest.raises(AwfCellError, match="failed"):
        handle.result()


def test_result_while_running_is_a_clear_error(ip: InteractiveShell) -> None:
    slow = HELLO.replace("command: echo", "command: sleep 5; echo")
    outcome = cell(ip, "%%awf --no-wait --out h\n" + slow)

    assert outcome.success, outcome.error_in_exec
    handle = ip.user_ns["h"]
    with pytest.raises(AwfCellError, match=r"still running; `await h` waits for it"):
        handle.result()
    assert handle.cancel()
    outcome = cell(ip, "await h")
    assert isinstance(outcome.error_in_exec, AwfCellError)
    assert "was cancelled" in str(outcome.error_in_exec)


def test_awf_cell_error_renders_short_lines() -> None:
    error = AwfCellError("first line\nsecond line")

    assert error._render_traceback_() == ["\x1b[0;31mfirst line\x1b[0m", "second line"]


def test_import_awf_nb_imports_neither_ipython_nor_ipywidgets() -> None:
    code = (
        "import sys, awf_nb\n"
        "awf_nb.run('" + HELLO.replace("\n", "\\n").replace("'", "\\'") + "', storage=False)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets'))\n"
        "print(heavy)\n"
        "assert callable(awf_nb.load_ipython_extension)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[]"
