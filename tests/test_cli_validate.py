"""`awf validate`, `awf list`, `awf schema` and the command-line plumbing of `awf`
(`awf_nb.frontends.cli`, its commands in `awf_nb.frontends.commands`).

Most tests call `main([...])` in-process; one runs the real command in a subprocess to check
that a bad workflow gives its problems and exit status 2, and never a traceback.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from awf_nb import __version__
from awf_nb.errors import ExecutionError
from awf_nb.frontends import cli, commands
from tests.support.cli import run_awf

ROOT = Path(__file__).resolve().parents[1]

VALID = """\
name: demo
description: A small demo
version: "2.0"
states:
  initial: build
  build:
    type: step
    command: make
    on_success: done
  done:
    type: terminal
"""

BROKEN = """\
name: broken
states:
  initial: build
  build:
    type: step
    command: make
    on_success: dnoe
  done:
    type: terminal
"""


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with an isolated workflow search path."""
    monkeypatch.delenv("AWF_WORKFLOWS_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- awf validate --------------------------------------------------------------------------


def test_valid_workflow(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work, "demo.yaml", VALID)
    assert run(capsys, "validate", "demo.yaml") == (0, "demo.yaml: valid\n", "")


def test_invalid_workflow_prints_every_problem_and_exits_2(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(work, "broken.yaml", BROKEN.replace("name: broken", "name:"))
    code, out, err = run(capsys, "validate", "broken.yaml")
    assert code == 2
    assert out.splitlines() == [
        "broken.yaml:1:1: error: name: required field missing",
        "broken.yaml: invalid (1 error)",
    ]
    assert err == ""


MISSING_AGENT_FILES = """\
name: roles
states:
  initial: a
  a:
    type: agent
    provider: scripted
    prompt: hi
    role: no-such-role
    skills: [no-such-skill]
    on_success: done
  done: {type: terminal}
"""


def test_role_and_skill_problems_name_the_file_as_given(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "sub").mkdir()
    write(work, "sub/roles.yaml", MISSING_AGENT_FILES)
    code, out, _err = run(capsys, "validate", "sub/roles.yaml")
    assert code == 2
    lines = out.splitlines()
    assert lines[0].startswith('sub/roles.yaml:8:5: error: states.a.role: resolve role "no-such')
    assert lines[1].startswith('sub/roles.yaml:9:14: error: states.a.skills[0]: skill "no-such')
    assert lines[2] == "sub/roles.yaml: invalid (2 errors)"


def test_a_broken_reference_does_not_hide_the_role_and_skill_problems(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(work, "roles.yaml", MISSING_AGENT_FILES.replace("on_success: done", "on_success: gone"))
    code, out, _err = run(capsys, "validate", "roles.yaml")
    assert code == 2
    errors = [line.split(": error: ")[1][:20] for line in out.splitlines() if ": error: " in line]
    assert errors == ["states.a.role: resol", "states.a.skills[0]: ", "states.a.on_success:"]


def test_a_field_that_cannot_be_read_does_not_hide_the_role_and_skill_problems(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an empty skill name and a map without `path`: the step cannot be built, yet its role
    # and its other skill are still looked for, each at its own index
    (work / "sub").mkdir()
    text = MISSING_AGENT_FILES.replace(
        "skills: [no-such-skill]", 'skills: ["", no-such-skill, {name: x}]'
    )
    write(work, "sub/roles.yaml", text)
    code, out, _err = run(capsys, "validate", "sub/roles.yaml")
    assert code == 2
    lines = out.splitlines()
    assert lines[0].startswith('sub/roles.yaml:8:5: error: states.a.role: resolve role "no-such')
    assert lines[1] == (
        "sub/roles.yaml:9:5: error: states.a.skills: skill[0]: empty skill name; "
        "skill[2]: map must have 'path' key"
    )
    assert lines[2].startswith(
        'sub/roles.yaml:9:18: error: states.a.skills[1]: skill "no-such-skill" not found'
    )
    assert lines[-1] == "sub/roles.yaml: invalid (3 errors, 1 warning)"


def test_cross_step_problems_have_positions(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work, "broken.yaml", BROKEN)
    code, out, _ = run(capsys, "validate", "broken.yaml")
    assert code == 2
    assert (
        "broken.yaml:7:5: error: states.build.on_success: step 'build': on_success references "
        "unknown state 'dnoe' (did you mean \"done\"?)"
    ) in out.splitlines()


def test_warnings_are_printed_but_do_not_fail(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(work, "demo.yaml", VALID.replace("version:", "verison:"))
    code, out, _ = run(capsys, "validate", "demo.yaml")
    assert code == 0
    assert out.splitlines() == [
        'demo.yaml:3:1: warning: verison: unknown key "verison" (did you mean "version"?)',
        "demo.yaml: valid (1 warning)",
    ]


def test_strict_turns_warnings_into_errors(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work, "demo.yaml", VALID.replace("version:", "verison:"))
    code, out, _ = run(capsys, "validate", "--strict", "demo.yaml")
    assert code == 2
    assert out.splitlines()[0].startswith("demo.yaml:3:1: error: verison: unknown key")
    assert out.splitlines()[-1] == "demo.yaml: invalid (1 error)"


def test_json_output(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work, "demo.yaml", VALID)
    write(work, "broken.yaml", BROKEN)
    code, out, _ = run(capsys, "validate", "--json", "demo.yaml", "broken.yaml", "missing")
    assert code == 2
    results = json.loads(out)
    assert [(r["workflow"], r["valid"]) for r in results] == [
        ("demo.yaml", True),
        ("broken.yaml", False),
        ("missing", False),
    ]
    assert results[0]["problems"] == []
    [problem] = [p for p in results[1]["problems"] if p["severity"] == "error"]
    assert problem == {
        "severity": "error",
        "message": "step 'build': on_success references unknown state 'dnoe'",
        "path": "states.build.on_success",
        "file": "broken.yaml",
        "line": 7,
        "column": 5,
        "hint": 'did you mean "done"?',
    }
    assert results[2]["problems"][0]["message"].startswith('workflow "missing" not found')


def test_not_found_exits_1(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "nope")
    assert code == 1
    assert out.splitlines()[0].startswith('nope: error: workflow "nope" not found (searched: ')


def test_validate_by_name_and_several_files(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work / "workflows", "demo.yaml", VALID)
    write(work, "broken.yaml", BROKEN)
    code, out, _ = run(capsys, "validate", "demo", "broken.yaml")
    assert code == 2
    assert "workflows/demo.yaml: valid" in out.splitlines()


def test_validate_needs_a_workflow(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate")
    assert code == 1
    assert "the following arguments are required: WORKFLOW" in err


def test_the_examples_pass_strict_validation(capsys: pytest.CaptureFixture[str]) -> None:
    examples = sorted(str(p) for p in (ROOT / "workflows").glob("*.yaml"))
    code, out, _ = run(capsys, "validate", "--strict", *examples)
    assert code == 0, out
    assert out.count(": valid\n") == len(examples)


# --- awf list ------------------------------------------------------------------------------


def test_list_table(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work / "workflows", "demo.yaml", VALID)
    write(work / "workflows", "broken.yaml", BROKEN)
    code, out, _ = run(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "DESCRIPTION", "PATH"]
    assert (
        lines[1].startswith("broken ") and "INVALID: workflows/broken.yaml:7:5: error" in lines[1]
    )
    assert lines[2].split() == ["demo", "2.0", "A", "small", "demo", "workflows/demo.yaml"]


def test_list_json(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(work / ".awf" / "workflows", "demo.yaml", VALID)
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0
    [entry] = json.loads(out)
    assert entry["name"] == "demo" and entry["valid"] is True and entry["version"] == "2.0"
    assert entry["path"] == str(work / ".awf" / "workflows" / "demo.yaml")


def test_list_with_nothing_found(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list")
    assert (code, out) == (0, "")
    assert err.startswith("no workflows found (searched: ")


# --- awf schema ----------------------------------------------------------------------------


def test_schema_is_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "states" in schema["properties"]


# --- plumbing ------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"awf-nb {__version__}\n", "")


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("validate", "list", "schema"):
        assert name in out


def test_no_command_prints_help_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 1
    assert "usage: awf" in err


def test_unknown_option_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", "--frobnicate", "x.yaml")
    assert code == 1
    assert "awf: error: unrecognized arguments: --frobnicate" in err


def test_unknown_command_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 1
    assert "invalid choice: 'frobnicate'" in err


@pytest.fixture
def failing_command(monkeypatch: pytest.MonkeyPatch):
    """Register a temporary `awf boom` whose handler raises what the test sets."""
    raised: list[BaseException] = []

    def handler(args: argparse.Namespace) -> int:
        raise raised[0]

    monkeypatch.setitem(
        commands.COMMANDS, "boom", commands.Command("boom", "fails", lambda p: None, handler)
    )
    return raised.append


def test_awf_errors_print_their_message_and_code(
    failing_command, capsys: pytest.CaptureFixture[str]
) -> None:
    failing_command(ExecutionError("step build: exit status 2", hint="see the log"))
    assert run(capsys, "boom") == (3, "", "step build: exit status 2\nsee the log\n")


def test_internal_errors_exit_4_without_traceback(
    failing_command, capsys: pytest.CaptureFixture[str]
) -> None:
    failing_command(ZeroDivisionError("division by zero"))
    code, _, err = run(capsys, "boom")
    assert code == 4
    assert err.startswith("internal error: ZeroDivisionError: division by zero\n")
    assert "--debug" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--debug", "boom"], ["boom", "--debug"]])
def test_debug_shows_the_traceback(
    argv: list[str], failing_command, capsys: pytest.CaptureFixture[str]
) -> None:
    failing_command(ZeroDivisionError("division by zero"))
    code, _, err = run(capsys, *argv)
    assert code == 4
    assert "Traceback (most recent call last)" in err


def test_keyboard_interrupt_exits_130(failing_command, capsys: pytest.CaptureFixture[str]) -> None:
    failing_command(KeyboardInterrupt())
    assert run(capsys, "boom")[0] == 130


def test_commands_register_through_the_registry() -> None:
    assert {"validate", "list", "schema"} <= set(commands.COMMANDS)
    parser = cli.build_parser()
    args = parser.parse_args(["validate", "--strict", "a.yaml"])
    assert (
        args.handler is commands.workflows.cmd_validate
        and args.strict
        and args.workflows == ["a.yaml"]
    )


# --- the real command ----------------------------------------------------------------------


def _awf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`awf ARGS` with no user configuration and no AWF_WORKFLOWS_PATH."""
    return run_awf(
        *args, cwd=cwd, env={"XDG_CONFIG_HOME": str(cwd / "config"), "AWF_WORKFLOWS_PATH": None}
    )


def test_subprocess_bad_workflow_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = textwrap.dedent(
        """\
        name: demo
        states:
          initial: a
          a: [1, 2
        """
    )
    write(tmp_path, "bad.yaml", bad)
    write(tmp_path, "worse.yaml", "name: x\nstates:\n  initial: a\n  a:\n    type: agent\n")
    result = _awf("validate", "bad.yaml", "worse.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("bad.yaml:5:1: error: invalid YAML: ")
    assert "worse.yaml:4:3: error: states.a.provider: required field missing" in lines
    assert result.stderr == ""
