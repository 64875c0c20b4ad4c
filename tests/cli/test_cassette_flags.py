"""`awf run --record PATH` / `--replay PATH` / `--replay-speed X` through the real command
line, and their errors with their exit codes."""

from __future__ import annotations

import pytest


def test_a_replay_prints_exactly_what_the_recorded_run_printed(awf, chat, tmp_path):
    cassette = tmp_path / "chat.cassette.jsonl"
    recorded = awf("run", str(chat), "--reply", "go on", "--reply", "", "--record", str(cassette))
    assert recorded.returncode == 0, recorded.stderr
    assert "second reply" in recorded.stdout

    # No --reply and nothing on stdin: the person's messages come from the cassette too.
    replayed = awf("run", str(chat), "--replay", str(cassette), input="")

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert "talked 2 turns" in replayed.stdout


def test_a_replay_that_does_not_match_exits_1_naming_step_turn_and_prompt(awf, chat, tmp_path):
    cassette = tmp_path / "chat.cassette.jsonl"
    assert awf("run", str(chat), "--record", str(cassette)).returncode == 0

    replayed = awf("run", str(chat), "-i", "topic=rye", "--replay", str(cassette))

    assert replayed.returncode == 1
    assert "error: step chat: turn 1 does not match the cassette " in replayed.stderr
    assert "the prompt differs" in replayed.stderr
    assert '"let us talk about bread"' in replayed.stderr
    assert '"let us talk about rye"' in replayed.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--record", "a.jsonl", "--replay", "b.jsonl"], "not allowed with argument"),
        (["--replay", "missing.jsonl"], "cassette missing.jsonl not found"),
        (["--replay", "chat.yaml"], "chat.yaml is not an awf cassette"),
        (["--replay", "."], "cannot read the cassette ."),
        (["--record", "no-such-dir/c.jsonl"], "cannot write the cassette no-such-dir/c.jsonl"),
        (["--replay", "c.jsonl", "--replay-speed", "-1"], "must be a number >= 0 (got -1)"),
        (["--replay", "c.jsonl", "--replay-speed", "fast"], "not a number: 'fast'"),
        (["--replay-speed", "1"], "--replay-speed only applies with --replay PATH"),
    ],
)
def test_bad_cassette_flags_exit_1_with_a_clear_message(awf, chat, flags, message):
    result = awf("run", str(chat), *flags)

    assert result.returncode == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
