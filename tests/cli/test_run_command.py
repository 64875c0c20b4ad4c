"""`awf run` flags and failure modes, through the real command line."""

from __future__ import annotations

import json


def test_piped_empty_line_ends_after_first_reply(awf, chat):
    result = awf("run", str(chat), input="\n")
    assert result.returncode == 0, result.stderr
    assert "first reply" in result.stdout
    assert "second reply" not in result.stdout
    assert "talked 1 turns" in result.stdout
    assert "✓ completed" in result.stderr


def test_piped_lines_are_turns_and_echoed(awf, chat):
    result = awf("run", str(chat), input="more\n\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("> let us talk about bread") < out.index("first reply")
    assert out.index("first reply") < out.index("> more") < out.index("second reply")
    assert "talked 2 turns" in out
    assert out.count("second reply") == 1  # nothing printed twice


def test_reply_flags_and_inputs(awf, chat):
    result = awf("run", str(chat), "-i", "topic=rye", "--reply", "go on", "--reply", "")
    assert result.returncode == 0, result.stderr
    assert "> let us talk about rye" in result.stdout
    assert "talked 2 turns" in result.stdout


def test_input_from_file(awf, chat, tmp_path):
    (tmp_path / "topic.txt").write_text("sourdough")
    result = awf("run", str(chat), "-i", "topic=@topic.txt")
    assert "> let us talk about sourdough" in result.stdout


def test_buffered_and_silent_output(awf, chat):
    buffered = awf("run", str(chat), "--output", "buffered")
    assert "first reply" in buffered.stdout
    silent = awf("run", str(chat), "--output", "silent")
    assert silent.returncode == 0
    assert "first reply" not in silent.stdout
    assert silent.stderr == ""


def test_json_prints_the_final_state(awf, chat):
    result = awf("run", str(chat), "--json")
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    assert state["status"] == "completed"
    assert state["steps"]["chat"]["output"] == "first reply"
    assert state["steps"]["chat"]["conversation"]["stopped_by"] == "user_exit"


def test_dry_run_runs_nothing(awf, tmp_path):
    marker = tmp_path / "ran"
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        f"""
name: dry
inputs: [{{name: who, default: Ada}}]
states:
  initial: a
  a: {{type: step, command: "touch {marker}; echo hi {{{{.inputs.who}}}}", on_success: b}}
  b: {{type: agent, provider: scripted, prompt: "about {{{{.states.a.Output}}}}", on_success: done}}
  done: {{type: terminal}}
"""
    )
    result = awf("run", str(wf), "--dry-run", "-i", "who=Grace")
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    assert "1. a [command]" in result.stdout
    assert f"run: touch {marker}; echo hi Grace" in result.stdout
    assert "prompt: about {{.states.a.Output}}" in result.stdout  # not resolvable yet
    assert "success -> b" in result.stdout


def test_dry_run_shows_who_answers_with_simulate_user(awf, tmp_path):
    wf = tmp_path / "chat.yaml"
    wf.write_text(
        """
name: chat
limits: {max_agent_turns: 10}
states:
  initial: chat
  chat:
    type: agent
    provider: local
    mode: conversation
    prompt: hi
    tools: {builtin: [Bash], confirm: [Bash]}
    on_success: done
  done: {type: terminal}
"""
    )
    plain = awf("run", str(wf), "--dry-run")
    assert plain.returncode == 0, plain.stderr
    assert "limits: max_agent_turns 10" in plain.stdout
    assert "with: you (the person), until you end it" in plain.stdout
    assert "confirm: Bash (asked before each call)" in plain.stdout
    simulated = awf(
        "run", str(wf), "--dry-run", "--simulate-user", "A baker", "--user-provider", "scripted"
    )
    assert simulated.returncode == 0, simulated.stderr
    assert "with: user (simulated), provider scripted (playing you: A baker)" in simulated.stdout
    assert "max_turns: 5" in simulated.stdout


def test_bad_inputs_are_all_reported(awf, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        """
name: strict
inputs:
  - {name: count, type: integer, required: true, validation: {min: 1, max: 5}}
  - {name: mode, required: true, validation: {enum: [fast, slow]}}
  - {name: name, required: true}
states:
  initial: done
  done: {type: terminal}
"""
    )
    result = awf("run", str(wf), "-i", "count=9", "-i", "mode=medium")
    assert result.returncode == 1
    assert "inputs.count: value 9 exceeds maximum 5" in result.stderr
    assert 'inputs.mode: value "medium" not in allowed values [fast, slow]' in result.stderr
    assert "inputs.name: required but not provided" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_workflow_and_invalid_yaml(awf, tmp_path):
    missing = awf("run", "no-such-workflow")
    assert missing.returncode == 1
    assert 'workflow "no-such-workflow" not found' in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nstates:\n  initial: a\n  a: [unclosed\n")
    result = awf("run", str(broken))
    assert result.returncode == 2
    assert "broken.yaml:" in result.stderr
    assert "Traceback" not in result.stderr


def test_failed_run_exit_code_and_hint(awf, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "name: f\nstates:\n  initial: a\n  a: {type: step, command: 'exit 3', on_success: d}\n  d: {type: terminal}\n"
    )
    result = awf("run", str(wf))
    assert result.returncode == 3
    assert "error: step a: exit code 3" in result.stderr
    assert "awf resume" in result.stderr


def test_unreachable_server_is_a_clear_error(awf, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        """
name: offline
states:
  initial: ask
  ask:
    type: agent
    provider: openai_compatible
    prompt: hi
    options: {base_url: "http://127.0.0.1:9/v1", model: m}
    on_success: done
  done: {type: terminal}
"""
    )
    result = awf("run", str(wf))
    assert result.returncode == 3
    assert "cannot connect to http://127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr


def test_required_env_vars(awf, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text("name: e\nenv: [AWF_TEST_NEEDED]\nstates:\n  initial: d\n  d: {type: terminal}\n")
    result = awf("run", str(wf))
    assert result.returncode == 1
    assert "AWF_TEST_NEEDED" in result.stderr
    ok = awf("run", str(wf), env={"AWF_TEST_NEEDED": "1"})
    assert ok.returncode == 0, ok.stderr


def test_history_lists_runs(awf, chat):
    awf("run", str(chat))
    awf("run", str(chat), "-i", "topic=rye")
    listing = awf("history")
    assert listing.returncode == 0
    assert listing.stdout.count("chat") == 2
    entries = json.loads(awf("history", "--json", "-n", "1").stdout)
    assert len(entries) == 1 and entries[0]["status"] == "completed"
    assert json.loads(awf("history", "--json", "-s", "failed").stdout) == []
    unknown = awf("status", "nope")
    assert unknown.returncode == 1
    assert 'run "nope" not found' in unknown.stderr
