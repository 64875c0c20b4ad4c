"""Secrets through the real command line: a secret written in the workflow text never
breaks resume, and nothing shown (terminal, --json, --dry-run, status) or stored outside
the private workflow copy holds it. Run data is private to the user (0600 / 0700)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.cli.conftest import only_run_id
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
