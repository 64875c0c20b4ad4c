"""Breakpoints from Python: `run(..., break_before=[...], on_pause=callback)`, each action
(continue, step, edit, skip, abort), the workflow's own `breakpoint:`, masking of edited
values, and a pause kept in the run's state for `awf resume`."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.api import arun
from awf_nb.engine.breakpoints import Pause, PauseAnswer
from awf_nb.errors import UserError
from awf_nb.runs.options import Resume, RunOptions
from awf_nb.runs.setup import prepare_run
from awf_nb.store import Store

WF = """
name: debug-me
inputs:
  - {name: token, secret: true, default: "tok-SECRET-1234"}
states:
  initial: make
  make: {type: command, command: "echo made", on_success: ask}
  ask: {type: agent, provider: scripted, prompt: "say {{.states.make.Output}}", on_success: show}
  show: {type: command, command: "echo got {{.states.ask.Output}}", on_success: done}
  done: {type: terminal}
"""


def _answers(*answers: PauseAnswer | str | None):
    """An on_pause callback answering in order, and the pauses it was shown."""
    seen: list[Pause] = []
    queue = list(answers)

    def on_pause(pause: Pause) -> PauseAnswer | str | None:
        seen.append(pause)
        return queue.pop(0) if queue else "continue"

    return on_pause, seen


@pytest.fixture
def wf(tmp_path: Path) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(WF)
    return path


async def test_pause_before_shows_the_resolved_command_and_continue(wf: Path, store: Store):
    on_pause, seen = _answers("continue")
    result = await arun(wf, storage=store, break_before=["show"], on_pause=on_pause)
    assert result.status == "completed"
    assert [(p.step, p.when) for p in seen] == [("show", "before")]
    pause = seen[0]
    assert pause.step_type == "command" and pause.editable
    assert pause.shows.startswith("echo got ")  # resolved, not the template
    assert pause.state["make"] == "made"
    assert store.load_state(result.run_id).paused == {}


async def test_step_pauses_before_the_next_step(wf: Path, store: Store):
    on_pause, seen = _answers("step", "step", "continue")
    result = await arun(wf, storage=store, break_before=["make"], on_pause=on_pause)
    assert result.status == "completed"
    assert [p.step for p in seen] == ["make", "ask", "show"]


async def test_edit_before_changes_the_command_run(wf: Path, store: Store):
    on_pause, seen = _answers(PauseAnswer("edit", "echo edited"), "continue")
    result = await arun(wf, storage=store, break_before=["make"], on_pause=on_pause)
    assert result.status == "completed"
    assert result.outputs["make"] == "edited"
    assert seen[1].value == "echo edited"  # the pause shown again with the new value


async def test_edit_before_changes_the_prompt_sent(wf: Path, store: Store):
    on_pause, _ = _answers(PauseAnswer("edit", "a prompt of mine"))
    result = await arun(wf, storage=store, break_before=["ask"], on_pause=on_pause)
    assert result.status == "completed"
    assert "a prompt of mine" in result.outputs["ask"]  # the scripted agent echoes it


async def test_edit_after_changes_the_output_the_next_step_reads(wf: Path, store: Store):
    on_pause, seen = _answers(PauseAnswer("edit", "changed"), "continue")
    result = await arun(wf, storage=store, break_after=["make"], on_pause=on_pause)
    assert seen[0].when == "after" and seen[0].shows == "made"
    assert result.outputs["make"] == "changed"
    assert "changed" in result.outputs["ask"]


async def test_skip_gives_the_output_without_running_the_step(
    wf: Path, store: Store, tmp_path: Path
):
    marker = tmp_path / "ran"
    text = WF.replace('command: "echo made"', f'command: "touch {marker}; echo made"')
    wf.write_text(text)
    on_pause, _ = _answers(PauseAnswer("skip", "mocked"))
    result = await arun(wf, storage=store, break_before=["make"], on_pause=on_pause)
    assert result.status == "completed"
    assert not marker.exists()
    assert result.outputs["make"] == "mocked"
    assert result.outputs["show"].startswith("got ")


async def test_abort_cancels_and_resume_pauses_there_again(wf: Path, store: Store):
    on_pause, _ = _answers("abort")
    result = await arun(wf, storage=store, break_before=["ask"], on_pause=on_pause)
    assert result.status == "cancelled"
    kept = store.load_state(result.run_id)
    assert kept.paused == {"ask": "before"}
    assert kept.breakpoints and kept.breakpoints["before"] == ["ask"]
    again, seen = _answers("continue")
    prepared = prepare_run(Resume(result.run_id), RunOptions(storage=store, on_pause=again))
    state = await prepared.runner.execute()
    assert state.status == "completed"
    assert [(p.step, p.when) for p in seen] == [("ask", "before")]


async def test_resume_of_a_pause_after_does_not_run_the_step_again(
    wf: Path, store: Store, tmp_path: Path
):
    marker = tmp_path / "count"
    text = WF.replace('command: "echo made"', f'command: "echo x >> {marker}; echo made"')
    wf.write_text(text)
    on_pause, _ = _answers("abort")
    result = await arun(wf, storage=store, break_after=["make"], on_pause=on_pause)
    assert store.load_state(result.run_id).paused == {"make": "after"}
    again, seen = _answers(PauseAnswer("edit", "late edit"), "continue")
    prepared = prepare_run(Resume(result.run_id), RunOptions(storage=store, on_pause=again))
    state = await prepared.runner.execute()
    assert state.status == "completed"
    assert marker.read_text().count("x") == 1
    assert [(p.step, p.when) for p in seen] == [("make", "after")] * 2
    assert state.steps["make"].output == "late edit"


async def test_edited_values_are_masked_in_the_stored_state(wf: Path, store: Store):
    on_pause, seen = _answers(PauseAnswer("edit", "key tok-SECRET-1234"), "continue")
    result = await arun(wf, storage=store, break_after=["make"], on_pause=on_pause)
    assert "tok-SECRET-1234" not in seen[1].value
    stored = (store.run_dir(result.run_id) / "state.json").read_text()
    assert "tok-SECRET-1234" not in stored
    assert "tok-SECRET-1234" not in result.outputs["make"]


async def test_file_breakpoints_count_only_when_asked(wf: Path, store: Store):
    wf.write_text(WF.replace("on_success: show}", "on_success: show, breakpoint: after}"))
    result = await arun(wf, storage=store)  # headless, as in CI: runs through
    assert result.status == "completed"
    on_pause, seen = _answers()
    result = await arun(wf, storage=store, on_pause=on_pause)
    assert [(p.step, p.when) for p in seen] == [("ask", "after")]
    seen.clear()
    await arun(wf, storage=store, on_pause=on_pause, breakpoints=False)
    assert seen == []


async def test_async_callback_and_star(wf: Path, store: Store):
    steps: list[str] = []

    async def on_pause(pause: Pause) -> None:
        steps.append(pause.step)

    result = await arun(wf, storage=store, break_before=["*"], on_pause=on_pause)
    assert result.status == "completed"
    assert steps == ["make", "ask", "show"]


def test_breakpoints_with_nobody_to_answer_are_refused(wf: Path, store: Store):
    with pytest.raises(UserError, match="breakpoints need someone to answer the pause"):
        prepare_run(wf, RunOptions(storage=store, break_before=["make"]))


def test_breakpoint_on_an_unknown_step_is_refused(wf: Path, store: Store):
    with pytest.raises(UserError, match="breakpoint on unknown step mkae"):
        prepare_run(wf, RunOptions(storage=store, break_before=["mkae"], on_pause=print))


def test_unknown_action_is_refused():
    with pytest.raises(UserError, match="unknown pause action 'go'"):
        PauseAnswer.of("go")


async def test_an_edit_is_for_every_attempt_of_one_visit(tmp_path: Path, store: Store):
    log = tmp_path / "log"
    wf = tmp_path / "cycle.yaml"
    wf.write_text(
        f"""
name: cycle
limits: {{max_visits: {{count: 3}}}}
states:
  initial: count
  count:
    type: command
    command: "echo template >> {log}; wc -l < {log}"
    retry: {{max_attempts: 2, initial_delay: 0s}}
    transitions:
      - {{when: 'states.count.Output == "3"', goto: done}}
      - {{goto: count}}
  done: {{type: terminal}}
"""
    )
    # First visit: edited to fail, so the retry runs the edited command too; the second
    # visit (the cycle comes back) runs the workflow's own command again.
    edited = PauseAnswer("edit", f"echo edited >> {log}; exit 1")
    on_pause, seen = _answers(edited, "continue")
    result = await arun(wf, storage=store, break_before=["count"], on_pause=on_pause)
    assert log.read_text().split() == ["edited", "edited", "template"]
    assert [p.step for p in seen] == ["count"] * 3  # edit shown again, then the 2nd visit
    assert result.status == "completed"


async def test_pauses_as_an_async_iterator(wf: Path, store: Store):
    import asyncio

    from awf_nb import PauseStream

    pauses = PauseStream()
    run = asyncio.create_task(
        arun(wf, storage=store, break_before=["make", "show"], on_pause=pauses)
    )
    pauses.watch(run)
    seen = []
    async for pause in pauses:
        seen.append(pause.step)
        pauses.answer(PauseAnswer("skip", "mocked") if pause.step == "show" else None)
    result = await run
    assert seen == ["make", "show"]
    assert result.status == "completed" and result.outputs["show"] == "mocked"
    with pytest.raises(UserError, match="no pause is waiting"):
        pauses.answer("continue")
