"""A replayed run's result says what its cassette replayed and what did not match
(`RunResult.replay`), without reaching into the run's providers."""

from __future__ import annotations

from pathlib import Path

from awf_nb.runs import ReplayReport, prepare_run

CHAT = """\
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Hello"
    options:
      replies: ["one", "two", "three"]
    on_success: done
  done: {type: terminal}
"""


async def _recorded(tmp_path: Path) -> Path:
    cassette = tmp_path / "chat.cassette.jsonl"
    recorded = await prepare_run(
        CHAT, storage=False, cwd=tmp_path, record=cassette, replies=["hi", ""]
    ).run()
    assert recorded.ok and recorded.replay is None  # recording is not replaying
    return cassette


async def test_a_replay_that_used_its_whole_cassette_reports_a_match(tmp_path: Path) -> None:
    cassette = await _recorded(tmp_path)
    result = await prepare_run(CHAT, storage=False, cwd=tmp_path, replay=cassette).run()
    assert result.ok
    report = result.replay
    assert isinstance(report, ReplayReport)
    assert report.matched and report.mismatches == () and not report.unused
    assert report.cassette == str(cassette)
    assert report.describe() == f"replayed {cassette}: matched"


async def test_a_replay_of_a_changed_workflow_reports_the_turn_that_differs(
    tmp_path: Path,
) -> None:
    cassette = await _recorded(tmp_path)
    changed = CHAT.replace('prompt: "Hello"', 'prompt: "Good morning"')
    result = await prepare_run(changed, storage=False, cwd=tmp_path, replay=cassette).run()
    assert result.status == "failed"
    report = result.replay
    assert report is not None and not report.matched
    (mismatch,) = report.mismatches
    assert "does not match the cassette" in mismatch and "prompt" in mismatch
    assert report.unused.turns == report.unused.of_turns  # nothing of it was replayed
    assert report.describe().startswith(f"replayed {cassette}: step talk")
