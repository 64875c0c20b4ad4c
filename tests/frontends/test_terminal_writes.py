"""Streamed reply text reaches the terminal in bursts, not one system call per token, and
never out of order with the lines around it."""

from __future__ import annotations

import asyncio

import pytest

from awf_nb.engine import events as ev
from awf_nb.frontends.terminal import STREAM_FLUSH_DELAY, TerminalSink
from tests.support.screen import Screen, TtyStream


async def test_tokens_are_flushed_together_soon_after_they_arrive() -> None:
    screen = Screen()
    out, err = screen.stream("out"), screen.stream("err")
    sink = TerminalSink(out=out, err=err)  # type: ignore[arg-type]

    for word in ("Tomatoes", " need", " sun", "."):
        sink.emit(ev.AgentText("r", "plan", word))
    assert out.flushes == 0 and screen.shown == []  # buffered, not written per token

    await asyncio.sleep(STREAM_FLUSH_DELAY * 3)  # the flush timer fires before this wakes
    assert out.flushes == 1 and screen.shown == ["out:Tomatoes need sun."]


async def test_a_progress_line_waits_for_the_streamed_text_before_it() -> None:
    screen = Screen()
    out, err = screen.stream("out"), screen.stream("err")
    sink = TerminalSink(out=out, err=err)  # type: ignore[arg-type]

    sink.emit(ev.AgentText("r", "plan", "Water daily.\n"))
    sink.emit(ev.RunWarning("r", "slow server", step="plan"))

    assert screen.shown[0] == "out:Water daily.\n"
    assert screen.shown[1].startswith("err:") and "slow server" in screen.shown[1]


def test_without_a_running_loop_text_is_written_at_once() -> None:
    screen = Screen()
    out = screen.stream("out")
    sink = TerminalSink(out=out, err=screen.stream("err"))  # type: ignore[arg-type]

    sink.emit(ev.AgentText("r", "plan", "now"))

    assert screen.shown == ["out:now"]


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_colours_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, coloured: bool
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    if no_color is not None:
        monkeypatch.setenv("NO_COLOR", no_color)
    screen = Screen()
    err = TtyStream(screen, "err")
    sink = TerminalSink(out=TtyStream(screen, "out"), err=err)  # type: ignore[arg-type]

    sink.emit(ev.StepStarted("r", "plan", "agent"))

    assert ("\x1b[" in "".join(screen.shown)) is coloured
