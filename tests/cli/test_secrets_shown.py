"""Secrets through the real command line: a secret written in the workflow text never
breaks resume, and nothing shown (terminal, --json, --dry-run, status) or stored outside
the private workflow copy holds it. Run data is private to the user (0600 / 0700)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from tests.support.cli import only_run_id
from tests.support.openai_server import OpenAIServer, Reply

TOKEN = "dev-token-123"
API_KEY = "sk-literal-key-9876"
HEADER = "hdr-value-5555"

FAILS_ONCE = f"""
name: deploy
inputs:
  - name: api_token
    default: {TOKEN}
states:
  initial: call
  call:
    type: step
    command: 'echo "using $AWF_TOKEN_SEEN"; test -e {{{{.inputs.flag}}}}'
    on_success: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "token {{{{.inputs.api_token}}}}"
    on_success: done
  done: {{type: terminal, message: "done with {{{{.inputs.api_token}}}}"}}
"""


def workflow_with_flag(tmp_path: Path) -> Path:
    text = FAILS_ONCE.replace("{{.inputs.flag}}", str(tmp_path / "flag"))
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return path


def everything_under(storage: Path) -> list[Path]:
    return [storage, *storage.rglob("*")]


def test_a_secret_in_the_yaml_text_does_not_break_resume(awf, storage, tmp_path):
    workflow = workflow_with_flag(tmp_path)
    failed = awf("run", str(workflow))
    assert failed.returncode == 3, failed.stderr
    run_id = only_run_id(storage)
    run_dir = storage / "runs" / run_id
    assert TOKEN not in (run_dir / "state.json").read_text()
    assert (run_dir / "workflow.yaml").read_text() == workflow.read_text()  # exactly as written

    (tmp_path / "flag").touch()
    workflow.unlink()  # resume uses the stored text, not the file
    resumed = awf("resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "done with ***" in resumed.stdout
    assert TOKEN not in resumed.stdout + resumed.stderr


def test_status_json_and_history_never_show_the_secret(awf, storage, tmp_path):
    workflow = workflow_with_flag(tmp_path)
    (tmp_path / "flag").touch()
    result = awf("run", str(workflow), "--json")
    assert result.returncode == 0, result.stderr
    assert TOKEN not in result.stdout
    assert "workflow_source" not in json.loads(result.stdout)
    run_id = only_run_id(storage)
    for shown in (awf("status", run_id), awf("status", run_id, "--json"), awf("history")):
        assert shown.returncode == 0, shown.stderr
        assert TOKEN not in shown.stdout + shown.stderr


def test_dry_run_masks_inputs_and_rendered_commands(awf, tmp_path):
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        """
name: dry
inputs:
  - {name: db_password}
  - {name: note, secret: true}
  - {name: max_tokens, default: "4000"}
states:
  initial: a
  a: {type: step, command: 'mysql -p{{.inputs.db_password}} -e "{{.inputs.note}}"', on_success: done}
  done: {type: terminal}
"""
    )
    result = awf(
        "run", str(workflow), "--dry-run",
        "-i", "db_password=hunter2-long", "-i", "note=confidential-note",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for secret in ("hunter2-long", "confidential-note"):
        assert secret not in result.stdout
    assert "db_password = '***'" in result.stdout
    assert "mysql -p*** -e" in result.stdout
    assert "max_tokens = '4000'" in result.stdout  # a word that only contains "token"


def test_api_key_and_secret_headers_in_options_are_masked(awf, tmp_path):
    with OpenAIServer() as server:
        # The server echoes the key and the header back, as a misbehaving proxy might.
        server.script(Reply.text(f"key={API_KEY} header={HEADER} team=docs"))
        workflow = tmp_path / "wf.yaml"
        workflow.write_text(
            f"""
name: keys
states:
  initial: ask
  ask:
    type: agent
    provider: openai_compatible
    prompt: hi
    options:
      base_url: {server.base_url}
      model: m
      api_key: {API_KEY}
      headers: {{X-Api-Key: {HEADER}, X-Team: docs}}
    on_success: done
  done: {{type: terminal}}
"""
        )
        result = awf("run", str(workflow), "--json")
    assert result.returncode == 0, result.stderr
    for secret in (API_KEY, HEADER):
        assert secret not in result.stdout + result.stderr
    assert "key=*** header=*** team=docs" in result.stdout


def test_explicit_secret_flags_override_the_naming_rule(awf, tmp_path):
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        """
name: flags
inputs:
  - {name: motto, secret: true}
  - {name: public_token, secret: false}
states:
  initial: a
  a: {type: step, command: 'echo "{{.inputs.motto}} / {{.inputs.public_token}}"', on_success: done}
  done: {type: terminal, message: "{{.states.a.Output}}"}
"""
    )
    result = awf("run", str(workflow), "-i", "motto=keep-it-quiet", "-i", "public_token=shown-x1")
    assert result.returncode == 0, result.stderr
    assert "*** / shown-x1" in result.stdout
    assert "keep-it-quiet" not in result.stdout


def test_run_data_is_private_to_the_user(awf, storage, tmp_path):
    workflow = workflow_with_flag(tmp_path)
    (tmp_path / "flag").touch()
    old = os.umask(0o022)
    try:
        result = awf("run", str(workflow), "--reply", "fine")
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    paths = everything_under(storage)
    assert {p.name for p in paths} >= {"state.json", "transcript.jsonl", "workflow.yaml",
                                       "history.db"}  # fmt: skip
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        expected = 0o700 if path.is_dir() else 0o600
        assert mode == expected, f"{path}: {oct(mode)}"


ESCAPED_SECRET = "sk-live-5511"
QUOTED_PASSWORD = 'pa"ss\\word-77'


def strings_in(text: str) -> list[str]:
    """Every text a file holds, JSON decoded as deep as it goes: its lines' strings, and the
    strings of strings that are JSON themselves (tool-call arguments)."""
    found: list[str] = []
    pending: list[object] = [text]
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            pending.append(json.loads(line))
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str):
            found.append(value)
            if value[:1] in "{[":
                with contextlib.suppress(ValueError):
                    pending.append(json.loads(value))
    return found


def test_a_secret_in_json_escaped_tool_arguments_is_masked_shown_and_stored(awf, storage, tmp_path):
    """The model writes the secret with JSON escapes (`\\u0073k-…`, a password holding `"`
    and `\\`): decoded, the terminal would show it, and the state, the transcript and the
    cassette would hold it recoverably. Each holds `***` instead."""
    escaped = "\\u0073k-live-5511"
    password = json.dumps(QUOTED_PASSWORD)[1:-1]  # pa\"ss\\word-77
    arguments = json.dumps(f'{{"command": "echo {escaped} \'{password}\' >/dev/null; echo done"}}')
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        f"""
name: leak
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: Go.
    options:
      replies:
        - tool_calls: [{{name: Bash, arguments: {arguments}}}]
        - Finished.
    tools: {{builtin: [Bash]}}
    on_success: done
  done: {{type: terminal}}
"""
    )
    cassette = tmp_path / "run.cassette.jsonl"
    env = {"SECRET_TOKEN": ESCAPED_SECRET, "DB_PASSWORD": QUOTED_PASSWORD}

    result = awf("run", str(workflow), "--record", str(cassette), env=env)

    assert result.returncode == 0, result.stderr
    assert """Bash({"command": "echo *** '***' >/dev/null; echo done"}) → done""" in result.stdout
    stored = [cassette, *(p for p in everything_under(storage) if p.is_file())]
    for path in [*stored]:
        if path.suffix == ".db":
            continue
        for text in strings_in(path.read_text()):
            for secret in (ESCAPED_SECRET, QUOTED_PASSWORD):
                assert secret not in text, f"{path.name} holds {secret!r}"
    for shown in strings_in(result.stdout + result.stderr):
        assert ESCAPED_SECRET not in shown and QUOTED_PASSWORD not in shown
