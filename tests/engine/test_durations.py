"""One way to write a time (`format_duration`) everywhere one is shown, and a run's time is
the time it spent running: a run interrupted and resumed later does not count the time it
sat interrupted (the wall-clock time is shown beside it), and a conversation re-opened by
`awf resume` keeps the time it had run."""

from __future__ import annotations

import asyncio
import io
import textwrap
from datetime import timedelta
from typing import Any

import pytest

from awf_nb.engine import events as ev
from awf_nb.engine.state import RunState
from awf_nb.engine.summary import RunSummary, format_duration
from awf_nb.frontends.notebook.summary import summary_html
from awf_nb.frontends.terminal import TerminalSink
from awf_nb.frontends.terminal.text import describe_state
from awf_nb.runs import Resume, prepare_run
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect


@pytest.mark.parametrize(
    ("seconds", "shown", "whole"),
    [
        (0.421, "0.42 s", "0 s"),
        (9.999, "10.0 s", "9 s"),
        (12.34, "12.3 s", "12 s"),
        (59.97, "1 min 00 s", "59 s"),
        (125, "2 min 05 s", "2 min 05 s"),
        (3720, "1 h 02 min", "1 h 02 min"),
        (-0.5, "0.00 s", "0 s"),  # a clock that stepped back never shows a negative time
    ],
)
def test_the_one_duration_format(seconds: float, shown: str, whole: str) -> None:
    assert format_duration(seconds) == shown
    assert format_duration(seconds, whole=True) == whole


def test_the_terminal_writes_reply_and_step_times_in_that_format() -> None:
    err = io.StringIO()
    sink = TerminalSink("streaming", out=io.StringIO(), err=err)
    sink.emit(ev.TurnFinished("r", "chat", 2, 121, 23.74))
    sink.emit(ev.StepFinished("r", "chat", "completed", 91.2, tokens=121))
    sink.emit(ev.StepFinished("r", "build", "failed", 0.5, error="exit code 1"))
    shown = err.getvalue()
    assert "(turn 2 · 121 tokens · 23.7 s)" in shown
    assert "✓ chat 1 min 31 s · 121 tokens" in shown
    assert "✗ build 0.50 s: exit code 1" in shown


CHAT = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hello
    options: {replies: ["one", "two", "three"], delay_ms: 5}
    on_success: done
  done: {type: terminal}
"""


async def test_a_resumed_run_counts_the_time_it_ran_not_the_time_it_sat(store, workdir) -> None:
    class CancelAtThePrompt(Collect):
        runner: Any = None

        def emit(self, event: Any) -> None:
            super().emit(event)
            if isinstance(event, ev.AwaitingInput):
                self.runner.cancel()

    sink = CancelAtThePrompt()
    runner = prepare_run(
        load_text(textwrap.dedent(CHAT)), storage=store, cwd=workdir, sink=sink, reader=_Never()
    ).runner
    sink.runner = runner
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(runner.execute(), 30)
    first = store.load_state(runner.run_id)
    assert first.status == "cancelled"
    ran_before = first.duration
    assert ran_before == first.active_seconds > 0
    step_before = first.steps["chat"].duration
    assert step_before > 0

    # It sat interrupted for two hours.
    first.started_at -= timedelta(hours=2)
    first.steps["chat"].started_at -= timedelta(hours=2)
    first.steps["chat"].completed_at -= timedelta(hours=2)
    store.save_state(first)

    sink = Collect()
    resumed = await asyncio.wait_for(
        prepare_run(
            Resume(runner.run_id),
            storage=store,
            cwd=workdir,
            sink=sink,
            reader=_Replies("more", ""),
        ).runner.execute(),
        30,
    )
    assert resumed.status == "completed", resumed.error
    assert resumed.wall_duration > 2 * 3600
    assert ran_before < resumed.duration < 3600  # the two hours are not in it
    # The re-opened conversation kept the time it had run before.
    chat = resumed.steps["chat"]
    assert chat.earlier_seconds == pytest.approx(step_before)
    assert chat.duration >= chat.earlier_seconds

    # Every place shows that running time, in the one format.
    summary = sink.of(ev.RunFinished)[0].summary
    assert summary == RunSummary.from_state(resumed)
    assert summary.duration == resumed.duration
    shown = format_duration(resumed.duration)
    assert f"in {shown}" in summary.figures()
    assert f"in {shown}" in summary_html(summary)
    status = describe_state(RunState.from_json(resumed.to_json()))
    wall = format_duration(resumed.wall_duration)
    assert f"duration  {shown} running ({wall} since it started)" in status
    assert f"chat ({format_duration(chat.duration)} · " in status
    [entry] = store.history(limit=1)
    assert entry.duration == pytest.approx(resumed.duration)


async def test_a_conversation_a_killed_run_left_running_keeps_its_time_until_the_last_save(
    store, workdir
) -> None:
    state = await prepare_run(
        load_text(textwrap.dedent(CHAT)), storage=store, cwd=workdir, reader=_Replies("more", "")
    ).runner.execute()
    assert state.status == "completed", state.error
    # As a `kill -9` in the middle of the conversation leaves it: running, not ended, saved
    # 40 seconds after the step started.
    saved = store.load_state(state.run_id)
    chat = saved.steps["chat"]
    saved.status, saved.current_step, saved.completed_at = "running", "chat", None
    chat.status, chat.completed_at = "running", None
    chat.conversation.stopped_by = ""
    saved.saved_at = chat.started_at + timedelta(seconds=40)
    saved.pid = 0
    store.save_state(saved)

    resumed = await asyncio.wait_for(
        prepare_run(
            Resume(state.run_id), storage=store, cwd=workdir, reader=_Replies("")
        ).runner.execute(),
        30,
    )
    assert resumed.status == "completed", resumed.error
    assert resumed.steps["chat"].earlier_seconds == pytest.approx(40)
    assert resumed.steps["chat"].duration >= 40


class _Replies:
    """The person's lines, then the end of input."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)

    async def read(self, prompt: str) -> str | None:
        return self.lines.pop(0) if self.lines else None


class _Never:
    """A person who never answers (the run is cancelled at the prompt)."""

    async def read(self, prompt: str) -> str | None:
        await asyncio.Future()
        return None


# --- the one format in messages, evaluations, and `{{.workflow.Duration}}` -----------------


async def test_a_step_timeout_is_echoed_in_the_one_format(run_yaml: Any) -> None:
    result = await run_yaml(
        """
        name: t
        states:
          initial: slow
          slow:
            type: step
            command: exec sleep 30
            timeout: 1.5s
            on_success: done
          done: {type: terminal}
        """
    )
    assert result.steps["slow"].error == "timed out after 1.50 s"


def test_eval_tables_show_times_in_the_one_format() -> None:
    from awf_nb.evals.results import EvalRow, EvalSummary, row_cells, table_header

    row = EvalRow(case="a", epoch=1, status="completed", seconds=91.2, passed=True)
    header, cells = table_header([]), row_cells(row, [])
    assert cells[header.index("time")] == "1 min 31 s"
    summary = EvalSummary.of([row, EvalRow(case="b", epoch=1, seconds=0.5)], [], 1)
    assert "; 1 min 32 s of runs" in summary.totals_line()


@pytest.mark.parametrize(
    ("seconds", "go"),
    [
        (0, "0s"),
        (0.0004, "0s"),
        (0.25, "250ms"),
        (1.5, "1.5s"),
        (60, "1m0s"),
        (123.04, "2m3.04s"),
        (3605, "1h0m5s"),
    ],
)
def test_workflow_duration_is_written_as_awf_writes_it(seconds: float, go: str) -> None:
    from awf_nb.workflow.durations import go_duration, parse_duration

    assert go_duration(seconds) == go
    assert parse_duration(go) == pytest.approx(round(seconds, 3))


async def test_the_workflow_duration_template_renders_a_go_duration(run_yaml: Any) -> None:
    from awf_nb.workflow.durations import go_duration, parse_duration

    result = await run_yaml(
        """
        name: t
        states:
          initial: show
          show:
            type: step
            command: echo "{{.workflow.Duration}}"
            on_success: done
          done: {type: terminal}
        """
    )
    assert result.ok, result.error
    shown = result.outputs["show"]
    # Go's form, as AWF renders it: `12ms`, `1.204s` — never `0.0s` or `0.1s`.
    assert shown == go_duration(parse_duration(shown) or 0.0), shown


def test_the_terminal_eval_progress_counts_time_in_the_one_format() -> None:
    from rich.progress import Progress

    from awf_nb.frontends.terminal.eval_progress import ElapsedColumn, RemainingColumn

    now = [100.0]
    progress = Progress(get_time=lambda: now[0])
    task_id = progress.add_task("runs", total=4)
    assert RemainingColumn().render(progress.tasks[0]).plain == ""  # no pace yet
    for step in (71.6, 10.0, 10.0):  # the last two runs took 10 s each
        now[0] += step
        progress.update(task_id, advance=0 if step > 60 else 1)
    task = progress.tasks[0]
    assert ElapsedColumn().render(task).plain == "1 min 31 s elapsed"
    assert RemainingColumn().render(task).plain == "ETA 20 s"  # two runs left


def test_no_module_writes_a_time_by_hand() -> None:
    """A number of seconds put into text with a format of its own (`{t:.0f} s`, `{t}s`)
    is a second duration format: messages go through `format_duration`."""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "awf_nb"
    by_hand = re.compile(r"\{[^{}]*(?:second|timeout|elapsed|duration|_s\b)[^{}]*\} ?s\b", re.I)
    exempt = {
        "engine/summary.py",  # the one format itself
        # tells the model the Bash tool's `timeout` argument in its unit, seconds
        "tools/builtins.py",
    }
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in package.rglob("*.py")
        if str(path.relative_to(package)) not in exempt
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if by_hand.search(line)
    ]
    assert found == []
