"""`%awf run|resume|validate|list|history|status`: the CLI's commands as a line magic."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from awf_nb.frontends.notebook.handle import AwfCellError
from tests.support.notebook import cell as line

GOOD = """\
name: good
description: A workflow that works.
states:
  initial: hi
  hi: {type: command, command: "echo hi from good", on_success: done}
  done: {type: terminal, message: "{{.states.hi.Output}}"}
"""

FLAKY = """\
name: flaky
states:
  initial: check
  check:
    type: command
    command: "test -f ready || { echo 'not ready' >&2; exit 1; }"
    on_success: done
  done: {type: terminal, message: ready now}
"""


@pytest.fixture
def ip(ip: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InteractiveShell:
    """The notebook `ip` (conftest.py) with a workflow folder of its own: `good` and `flaky`
    found by name, `bad.yaml` invalid, no user configuration."""
    monkeypatch.delenv("AWF_WORKFLOWS_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "good.yaml").write_text(GOOD)
    (tmp_path / "workflows" / "flaky.yaml").write_text(FLAKY)
    (tmp_path / "bad.yaml").write_text("name: bad\nstates:\n  initial: nowhere\n")
    return ip


def test_run_a_workflow_by_name(ip: InteractiveShell, capsys) -> None:
    outcome = line(ip, "%awf run good --out h")

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["h"].result().state.message == "hi from good"
    assert "hi from good" in capsys.readouterr().out


def test_run_with_json_and_silent_output_prints_only_the_final_state(
    ip: InteractiveShell, capsys
) -> None:
    import json

    outcome = line(ip, "%awf run good --output silent --json")

    assert outcome.success, outcome.error_in_exec
    state = json.loads(capsys.readouterr().out)
    assert state["status"] == "completed"
    assert state["steps"]["hi"]["output"].strip() == "hi from good"


def test_run_a_workflow_file_inside_other_code(ip: InteractiveShell) -> None:
    # Not a cell of its own: the line magic runs it (no running loop in a plain shell).
    outcome = line(ip, "x = 1\n%awf run workflows/good.yaml\ny = 2")

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["_awf"].result().ok


def test_run_dry_run(ip: InteractiveShell, capsys) -> None:
    assert line(ip, "%awf run good --dry-run").success
    assert "1. hi [command]" in capsys.readouterr().out
    assert "_awf" not in ip.user_ns


def test_run_an_unknown_workflow(ip: InteractiveShell, capsys) -> None:
    outcome = line(ip, "%awf run nosuch")

    assert isinstance(outcome.error_in_exec, AwfCellError)
    assert "nosuch" in str(outcome.error_in_exec)
    assert "Traceback" not in capsys.readouterr().out


def test_resume_a_failed_run(ip: InteractiveShell, tmp_path: Path) -> None:
    outcome = line(ip, "%awf run flaky --out h")
    assert isinstance(outcome.error_in_exec, AwfCellError)
    run_id = ip.user_ns["h"].run_id
    assert f"%awf resume {run_id}" in str(outcome.error_in_exec)
    (tmp_path / "ready").touch()

    outcome = line(ip, f"%awf resume {run_id} --out h")

    assert outcome.success, outcome.error_in_exec
    result = ip.user_ns["h"].result()
    assert result.run_id == run_id and result.state.message == "ready now"


def test_validate(ip: InteractiveShell, capsys) -> None:
    assert line(ip, "%awf validate workflows/good.yaml").success
    assert "workflows/good.yaml: valid" in capsys.readouterr().out

    outcome = line(ip, "%awf validate workflows/good.yaml bad.yaml")
    assert isinstance(outcome.error_in_exec, AwfCellError)
    out = capsys.readouterr().out
    assert "bad.yaml: invalid" in out and "nowhere" in out


def test_list(ip: InteractiveShell, capsys) -> None:
    assert line(ip, "%awf list").success
    out = capsys.readouterr().out
    assert "good" in out and "A workflow that works." in out and "flaky" in out


def test_history_and_status(ip: InteractiveShell, capsys) -> None:
    assert line(ip, "%awf run good --out h").success
    line(ip, "%awf run flaky")
    run_id = ip.user_ns["h"].run_id
    capsys.readouterr()

    assert line(ip, "%awf history -s completed").success
    out = capsys.readouterr().out
    assert run_id in out and "flaky" not in out
    assert line(ip, "%awf history -w flaky -n 5").success
    assert "failed" in capsys.readouterr().out

    assert line(ip, f"%awf status {run_id}").success
    out = capsys.readouterr().out
    assert f"run       {run_id}" in out and "completed hi" in out


def test_status_of_an_unknown_run(ip: InteractiveShell) -> None:
    outcome = line(ip, "%awf status 19990101-000000-abcdef")
    assert isinstance(outcome.error_in_exec, AwfCellError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%awf", "choose a command"),
        ("%awf frobnicate", "invalid choice: 'frobnicate'"),
        ("%awf validate", "the following arguments are required: WORKFLOW"),
        ("%awf history -n many", "invalid int value"),
    ],
)
def test_bad_commands_are_usage_errors(
    ip: InteractiveShell, capsys, text: str, message: str
) -> None:
    outcome = line(ip, text)

    assert isinstance(outcome.error_in_exec, UsageError)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help(ip: InteractiveShell, capsys) -> None:
    assert line(ip, "%awf run --help").success
    out = capsys.readouterr().out
    assert "--no-interactive" in out and "--reply TEXT" in out
    assert "%%awf" in (ip.find_cell_magic("awf").__doc__ or "")


def test_a_run_id_can_come_from_a_python_value(
    ip: InteractiveShell, tmp_path: Path, capsys
) -> None:
    line(ip, "%awf run flaky --out h")
    (tmp_path / "ready").touch()

    assert line(ip, "%awf status {h.run_id}").success
    assert "status    failed" in capsys.readouterr().out
    outcome = line(ip, "%awf resume {h.run_id} --out again")
    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["again"].run_id == ip.user_ns["h"].run_id
