"""Inputs that try to break a run: secrets in validation errors, bytes that are not UTF-8,
endless files, catastrophic patterns, undeclared names, AWF's other input types."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from awf_nb.engine.events import RunWarning
from awf_nb.engine.inputs import parse_input_args, resolve_inputs
from awf_nb.errors import DefinitionError, InputError, UserError
from awf_nb.workflow.loader import load_text
from tests.support.cli import run_awf
from tests.support.events import Collect


def workflow(inputs: str) -> str:
    return f"name: t\ninputs:\n{inputs}\nstates:\n  initial: d\n  d: {{type: terminal}}\n"


def test_a_secret_never_appears_in_an_input_error() -> None:
    wf = load_text(
        workflow(
            "  - {name: db_password, validation: {pattern: '^[a-z]+$'}}\n"
            "  - {name: pin, type: integer, secret: true}"
        )
    )
    with pytest.raises(InputError) as caught:
        resolve_inputs(wf, {"db_password": "Hunter2-Long!", "pin": "12ab34cd"})
    message = str(caught.value)
    assert "Hunter2" not in message and "12ab34cd" not in message
    assert 'inputs.db_password: value "***" does not match pattern' in message
    assert 'inputs.pin: value "***" is not an integer' in message


def test_argv_bytes_that_are_not_utf8_are_a_clear_input_error() -> None:
    value = b"caf\xe9".decode("utf-8", "surrogateescape")  # what Python makes of argv bytes
    with pytest.raises(UserError, match=r"inputs\.topic: the value is not valid UTF-8 text"):
        parse_input_args([f"topic={value}"])


def test_an_input_file_with_a_stray_byte_is_read_with_replacement(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes(b"caf\xe9 au lait")
    assert parse_input_args(["notes=@notes.txt"], cwd=tmp_path) == {"notes": "caf\ufffd au lait"}


def test_an_input_file_over_one_mebibyte_is_refused(tmp_path: Path) -> None:
    with (tmp_path / "big.txt").open("wb") as big:
        big.truncate((1 << 20) + 1)  # sparse: costs no disk
    with pytest.raises(UserError, match=r"inputs.x: .*big.txt is larger than 1 MiB"):
        parse_input_args(["x=@big.txt"], cwd=tmp_path)


def test_an_input_from_a_device_or_a_fifo_is_refused_without_reading(tmp_path: Path) -> None:
    """`/dev/zero` never ends, and opening a FIFO waits for a writer: neither is opened."""
    with pytest.raises(UserError) as caught:
        parse_input_args(["x=@/dev/zero"])
    assert str(caught.value) == (
        "inputs.x: cannot read /dev/zero: not a regular file (it is a character device)"
    )
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UserError, match=r"inputs.x: cannot read .*pipe: not a regular file"):
        parse_input_args(["x=@pipe"], cwd=tmp_path)


def test_a_nul_byte_in_an_input_file_is_a_clear_input_error(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"ab\x00cd")
    with pytest.raises(UserError) as caught:
        parse_input_args(["x=@data.bin"], cwd=tmp_path)
    assert str(caught.value) == (
        f"inputs.x: {tmp_path / 'data.bin'} holds a NUL byte (character 3): an input is text, "
        "and this looks like a binary file"
    )


@pytest.mark.parametrize(
    ("declared", "given"),
    [
        ("  - {name: x}", {"x": "a\x00b"}),  # through the Python API
        ("  - {name: x, type: array}", {"x": ["ok", "a\x00b"]}),
        ("  - {name: x, type: object}", {"x": {"k": "a\x00b"}}),
        ('  - {name: x, default: "a\\x00b"}', {}),  # a default written with a YAML escape
        ("  - {name: y}", {"x": "a\x00b"}),  # not declared: passed on, so checked too
    ],
)
def test_a_nul_byte_in_an_input_value_is_a_clear_input_error(declared: str, given: dict) -> None:
    wf = load_text(workflow(declared))
    with pytest.raises(InputError) as caught:
        resolve_inputs(wf, given)
    assert caught.value.problems == [
        "inputs.x: the value holds a NUL byte, which an input cannot hold (inputs are text)"
    ]


def test_a_nul_byte_in_an_input_file_fails_the_command_before_any_run(tmp_path: Path) -> None:
    """It used to crash inside the command step (internal error, exit 4, the run left
    interrupted): now it is an input error, exit 1, and no run is made."""
    (tmp_path / "data.bin").write_bytes(b"ab\x00cd")
    (tmp_path / "wf.yaml").write_text(
        "name: t\ninputs:\n  - {name: x}\nstates:\n  initial: a\n"
        "  a: {type: step, command: 'echo {{.inputs.x}}', on_success: d}\n"
        "  d: {type: terminal}\n"
    )
    storage = tmp_path / "storage"
    result = run_awf("run", "wf.yaml", "-i", "x=@data.bin", cwd=tmp_path,
                     env={"AWF_STORAGE": str(storage), "NO_COLOR": "1"})  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[0].endswith(
        "holds a NUL byte (character 3): an input is text, and this looks like a binary file"
    )
    assert "internal error" not in result.stderr
    assert not (storage / "runs").exists() or not any((storage / "runs").iterdir())


def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    # (a+)+$ on 28 a's and a '!' took 16.7 s with Python's re; RE2 does not backtrack.
    wf = load_text(workflow("  - {name: x, validation: {pattern: '(a+)+$'}}"))
    with pytest.raises(InputError, match="does not match pattern"):
        resolve_inputs(wf, {"x": "a" * 28 + "!"})


def test_a_pattern_re2_cannot_run_is_a_load_error() -> None:
    with pytest.raises(DefinitionError, match=r"invalid pattern '\(\?<=a\)b'"):
        load_text(workflow("  - {name: x, validation: {pattern: '(?<=a)b'}}"))


def test_awf_input_types_number_array_object() -> None:
    wf = load_text(
        workflow(
            "  - {name: ratio, type: number}\n"
            "  - {name: files, type: array}\n"
            "  - {name: more, type: array}\n"
            "  - {name: opts, type: object}"
        )
    )
    values = resolve_inputs(
        wf, {"ratio": "0.25", "files": "a.py, b.py", "more": '["x", 2]', "opts": '{"k": 1}'}
    )
    assert values == {"ratio": 0.25, "files": ["a.py", "b.py"], "more": ["x", 2], "opts": {"k": 1}}
    with pytest.raises(InputError, match=r'inputs\.ratio: value "lots" is not a number'):
        resolve_inputs(wf, {"ratio": "lots"})


def test_an_unknown_input_type_is_a_warning_not_an_error() -> None:
    wf = load_text(workflow("  - {name: when, type: datetime}"))
    (warning,) = [w for w in wf.warnings if "unknown type" in w.message]
    assert warning.message == 'input when: unknown type "datetime"; its value is used as text'
    assert warning.severity == "warning"
    assert resolve_inputs(wf, {"when": "2026-01-01"}) == {"when": "2026-01-01"}


async def test_an_undeclared_input_is_warned_about(run_yaml) -> None:
    sink = Collect()
    result = await run_yaml(workflow("  - {name: topic, default: x}"), {"zz": "1"}, sink=sink)
    assert result.ok
    (warning,) = [w for w in sink.of(RunWarning) if "zz" in w.message]
    assert "input zz is not declared by workflow t (its inputs: topic)" in warning.message


def test_on_failure_status_must_be_an_exit_code() -> None:
    text = (
        "name: t\nstates:\n  initial: a\n"
        "  a: {type: step, command: 'false', on_failure: {message: no, status: 256}}\n"
        "  d: {type: terminal}\n"
    )
    with pytest.raises(DefinitionError, match="less than or equal to 255"):
        load_text(text)


async def test_a_prompt_that_renders_empty_is_an_error_naming_the_step(run_yaml) -> None:
    text = """
name: t
inputs: [{name: question, default: ""}]
states:
  initial: ask
  ask: {type: agent, provider: scripted, prompt: "{{.inputs.question}}", on_success: done}
  done: {type: terminal}
"""
    result = await run_yaml(text)
    assert result.status == "failed"
    assert result.error.startswith("step ask: the prompt is empty after rendering")


def awf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`awf ARGS` in an environment with nothing but PATH, HOME and the import path."""
    return run_awf(
        *args, cwd=cwd, inherit_env=False, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    )


def test_validate_rejects_an_unknown_provider_with_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(
        "name: t\nstates:\n  initial: a\n  a: {type: agent, provider: claud, prompt: hi,"
        " on_success: d}\n  d: {type: terminal}\n"
    )
    result = awf("validate", "wf.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert 'wf.yaml:4:20: error: states.a.provider: unknown provider "claud"' in result.stdout
    assert 'did you mean "claude"?' in result.stdout


def test_validate_a_missing_file_says_it_does_not_exist(tmp_path: Path) -> None:
    result = awf("validate", "/nonexistent.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "/nonexistent.yaml" in result.stdout + result.stderr
    assert "does not exist" in result.stdout + result.stderr
    assert "must be inside a workflow folder" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("step", "what"),
    [
        ("{type: agent, provider: scripted, prompt_file: /dev/zero, on_success: d}", "prompt_file"),
        ("{type: step, script_file: /dev/zero, on_success: d}", "script_file"),
    ],
)
async def test_an_endless_template_file_is_refused(run_yaml, step: str, what: str) -> None:
    text = f"name: t\nstates:\n  initial: a\n  a: {step}\n  d: {{type: terminal}}\n"
    result = await run_yaml(text)
    assert result.status == "failed"
    assert f"cannot read {what} /dev/zero: not a regular file (it is a character device)" in (
        result.error
    )
