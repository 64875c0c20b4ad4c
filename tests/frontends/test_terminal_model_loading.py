"""The terminal shows a model being loaded before the first reply (on stderr, with the
other progress lines), so a cold start is not a silent wait."""

from __future__ import annotations

import io

from awf_nb.engine import events as ev
from awf_nb.frontends.terminal import TerminalSink


def test_loading_and_ready_are_progress_lines_on_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    sink = TerminalSink(out=out, err=err, color=False)
    sink.emit(ev.ModelLoading("r", "chat", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    sink.emit(ev.ModelLoading("r", "chat", "SmolLM2-135M-Instruct.Q4_1.gguf", True, 1.25))
    sink.emit(ev.AgentText("r", "chat", "Hello"))
    assert err.getvalue() == (
        "loading model SmolLM2-135M-Instruct.Q4_1.gguf…\n  (model ready in 1.2s)\n"
    )
    assert out.getvalue() == "Hello"


def test_silent_output_shows_no_loading_lines() -> None:
    out, err = io.StringIO(), io.StringIO()
    sink = TerminalSink("silent", out=out, err=err, color=False)
    sink.emit(ev.ModelLoading("r", "chat", "model.gguf"))
    assert err.getvalue() == out.getvalue() == ""
