"""A frontend opens a session that runs the prepared run (`awf_nb.runs.session`).

`prepare_run` makes the run's `RunControl`, opens the frontend once with it, and binds the
run to it; `await prepared.run()` runs the run in that session. A new frontend is one class:
the ones here are written in the test, as someone adding a frontend would.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from awf_nb.runs import FrontendRequest, RunControl, RunResult, Session, prepare_run
from awf_nb.runs.session import Execute
from tests.support.events import Collect
from tests.support.waiting import until

HELLO = """\
name: hello
states:
  initial: greet
  greet: {type: command, command: "echo hello", on_success: done}
  done: {type: terminal}
"""

# A command that says it started (a marker file), then waits for the run to be cancelled.
WAITS = """\
name: waits
states:
  initial: wait
  wait: {type: command, command: "touch started && sleep 60", on_success: done}
  done: {type: terminal}
"""


@dataclass
class RecordingSession(Session):
    """Says what happened around the run it runs."""

    seen: list[str] = field(default_factory=list)

    async def run(self, execute: Execute) -> RunResult:
        self.seen.append("before")
        result = await execute()
        self.seen.append(f"after: {result.status}")
        return result


class RecordingFrontend:
    """A whole frontend: the request and control it was opened with, and its session."""

    def __init__(self) -> None:
        self.opened: list[tuple[FrontendRequest, RunControl]] = []
        self.sink = Collect()

    def open(self, request: FrontendRequest, control: RunControl) -> RecordingSession:
        self.opened.append((request, control))
        return RecordingSession(sink=self.sink)


async def test_a_new_frontend_is_one_class_whose_session_runs_the_run(tmp_path: Path) -> None:
    frontend = RecordingFrontend()
    prepared = prepare_run(HELLO, storage=False, cwd=tmp_path, frontend=frontend)

    ((request, control),) = frontend.opened  # opened once, before the run is made
    assert request.workflow.name == "hello" and control is prepared.control
    assert control.run_id == prepared.run_id and prepared.runner.config.sink is frontend.sink

    result = await prepared.run()
    assert result.ok
    assert isinstance(prepared.session, RecordingSession)
    assert prepared.session.seen == ["before", "after: completed"]
    assert frontend.sink.events, "the run's events went to the session's sink"


async def test_cancel_reaches_the_run_through_the_control_its_frontend_was_given(
    tmp_path: Path,
) -> None:
    frontend = RecordingFrontend()
    prepared = prepare_run(WAITS, storage=False, cwd=tmp_path, frontend=frontend)
    ((_, control),) = frontend.opened
    running = asyncio.create_task(prepared.run())
    await until(lambda: (tmp_path / "started").exists(), "the command to start")

    assert control.stop() is False  # no reply is being streamed: Stop does nothing
    assert prepared.state.status == "running"
    control.cancel()
    await asyncio.wait({running})
    assert running.cancelled()  # a cancellation is recorded, then re-raised
    assert control.state.status == "cancelled" and prepared.result().status == "cancelled"


def test_a_control_acts_on_nothing_before_its_run_is_made() -> None:
    control = RunControl()
    assert control.stop() is False and control.interrupt() == "run"
    control.cancel()  # nothing to cancel yet: no error


def test_without_a_frontend_the_run_gets_the_headless_session(tmp_path: Path) -> None:
    prepared = prepare_run(HELLO, storage=False, cwd=tmp_path)
    assert type(prepared.session) is Session
    assert prepared.session.reader is None and prepared.session.sink is None
    result = prepared.run_sync()  # a new event loop of its own
    assert result.ok and result.replay is None
