"""The terminal's `EventSink`: a run written to stdout (what the workflow produces:
streamed replies, command output) and stderr (progress, warnings, errors), so
`awf run wf > out.txt` captures just the content. Output modes: `streaming` (text as it
arrives), `buffered` (each reply when complete), `silent` (only errors).

On a terminal a conversation reads as one: each reply is labelled with who writes it (the
step's agent by its step's name, a partner by its name), the step's prompt is shown as the
workflow's (`prompt: …`, dimmed), replies break between words at the terminal's width
(wrap.py), and a resumed conversation shows what was said before, dimmed. Each kind of
event has a method of its own, found in `_HANDLERS`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any, Literal, TextIO

from awf_nb.engine import events as ev
from awf_nb.engine.summary import format_duration, format_tokens
from awf_nb.frontends.terminal.style import Style, is_tty, use_color, width
from awf_nb.frontends.terminal.text import terminal_safe as safe
from awf_nb.frontends.terminal.wrap import WordWrap, display_width
from awf_nb.frontends.tool_calls import shorten_arguments, shorten_result

__all__ = ["STREAM_FLUSH_DELAY", "OutputMode", "TerminalSink"]

OutputMode = Literal["streaming", "buffered", "silent"]

# How long streamed reply text may wait in stdout's buffer: well under what a person notices
# (the aim is <= 50 ms from byte to screen), long enough to write a burst of tokens at once.
STREAM_FLUSH_DELAY = 0.02
PROMPT_LINES_SHOWN = 6  # a step's prompt (maybe a whole file put into it) is shown this far
EARLIER_LINES_SHOWN = 3  # lines of each earlier message shown when a conversation resumes


class TerminalSink:
    """An `EventSink` that writes a run to a terminal (or pipes)."""

    def __init__(
        self,
        mode: OutputMode = "streaming",
        *,
        out: TextIO | None = None,
        err: TextIO | None = None,
        echo_input: bool = True,
        color: bool | None = None,
    ) -> None:
        self.mode = mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        # On a TTY the person's own typing is already on screen; echo only what they did
        # not type (the step's first prompt, piped or scripted replies).
        self.echo_input = echo_input
        # Colours only where they go to a terminal: progress goes to stderr, content to
        # stdout, which may be a file (`awf run wf > out.txt` must get plain text).
        self.style = Style(use_color(self.err) if color is None else color)
        self.out_style = Style(use_color(self.out) if color is None else color)
        self._at_line_start = True
        self._flush_timer: asyncio.TimerHandle | None = None
        # Only a person watching gets labels and word wrapping: a file gets the text alone.
        self.out_is_tty = is_tty(self.out)
        self._wrap: WordWrap | None = WordWrap(width(self.out)) if self.out_is_tty else None
        # The arguments of the tool calls between started and finished, by call id (the
        # finished event, which prints the line, does not repeat them).
        self._tools_running: dict[str, str] = {}

    # --- low-level writes -------------------------------------------------------------------

    def _write_out(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self._flush_out()
        self._at_line_start = text.endswith("\n")

    def _write_streamed(self, text: str) -> None:
        """Reply text as it streams: buffered, and flushed within STREAM_FLUSH_DELAY (one
        system call per burst of tokens instead of one per token). On a terminal, line
        breaks go between words (a word waits for the space after it)."""
        self._stream_raw(text if self._wrap is None else self._wrap.feed(text))

    def _stream_raw(self, text: str) -> None:
        """`_write_streamed` of text already broken into lines."""
        if not text:
            return
        self.out.write(text)
        self._at_line_start = text.endswith("\n")
        if self._flush_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.out.flush()
            return
        self._flush_timer = loop.call_later(STREAM_FLUSH_DELAY, self._flush_out)

    def _flush_out(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        self.out.flush()

    def _end_line(self) -> None:
        if not self._at_line_start:
            self._write_out("\n")

    def _note(self, text: str) -> None:
        if self._flush_timer is not None:
            self._flush_out()
        self._end_line()
        self.err.write(text + "\n")
        self.err.flush()

    # --- events -------------------------------------------------------------------------------

    def emit(self, event: ev.RunEvent) -> None:
        if type(event) is ev.AgentText:  # the hot path: once per streamed token
            if self.mode == "streaming":
                self._write_streamed(safe(event.text))
            return
        if self._wrap is not None and (held := self._wrap.flush()):
            self._stream_raw(held)  # the last word of the reply
        if self._flush_timer is not None:  # streamed text first, then what follows it
            self._flush_out()
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    @property
    def _silent(self) -> bool:
        return self.mode == "silent"

    # --- one handler per event kind (`_HANDLERS`) ----------------------------------------------

    def _on_run_started(self, event: ev.RunStarted) -> None:
        if not self._silent:
            verb = "resuming" if event.resumed else "running"
            self._note(self.style.dim(f"{verb} {safe(event.workflow)} (run {event.run_id})"))

    def _on_step_started(self, event: ev.StepStarted) -> None:
        if self._silent:
            return
        s, mode = self.style, event.mode
        what = event.kind if not mode or mode == "single" else f"{event.kind}, {mode}"
        if event.detail:
            what += f", {event.detail}"
        retry = f" (attempt {event.attempt})" if event.attempt > 1 else ""
        self._note(s.bold(f"▶ {safe(event.step)}") + s.dim(f" [{safe(what)}]{retry}"))

    def _on_step_output(self, event: ev.StepOutput) -> None:
        if self._silent:
            return
        if event.stream == "stdout":
            self._write_out(safe(event.text))
        else:
            self._end_line()
            self.err.write(safe(event.text))
            self.err.flush()

    def _on_agent_tool_use(self, event: ev.AgentToolUse) -> None:
        if not self._silent:
            self._end_line()
            tool = safe(f"[tool: {event.name}({event.argument})]")
            self._write_out(self.out_style.dim(tool) + "\n")

    def _on_tool_call_started(self, event: ev.ToolCallStarted) -> None:
        # Shown when it finishes (one line per call, with its result); calls of one reply
        # may run at once, and their lines would interleave otherwise.
        self._tools_running[event.call_id] = event.arguments

    def _on_tool_call_finished(self, event: ev.ToolCallFinished) -> None:
        arguments = self._tools_running.pop(event.call_id, "")
        if not self._silent:
            self._end_line()
            self._write_out(self._tool_line(event, arguments) + "\n")

    def _on_awaiting_confirmation(self, event: ev.AwaitingConfirmation) -> None:
        # The reader asks next (`Allow …? [y/N]`): on a line of its own, after the streamed
        # text.
        self._end_line()

    def _on_turn_started(self, event: ev.TurnStarted) -> None:
        # A message streams next: on a line of its own, labelled (a partner agent always;
        # the step's own agent when a person reads it).
        if (event.speaker or self.out_is_tty) and not self._silent:
            self._end_line()
            if self.mode == "streaming":
                self._label(event.speaker, event.step)

    def _on_user_message(self, event: ev.UserMessage) -> None:
        if self._silent:
            return
        if event.speaker and event.speaker != ev.PERSON:
            # scripted replies: nobody typed them, so always shown
            self._end_line()
            label = self.out_style.partner(f"{safe(event.speaker)}: ")
            self._write_out(label + safe(event.text) + "\n")
        elif event.turn == 1 and event.speaker == "":
            # the step's prompt: the workflow wrote it, not the person
            self._end_line()
            self._write_out(self._prompt_lines(event.text))
        elif self.echo_input:
            self._end_line()
            self._write_out(self.out_style.bold("> ") + safe(event.text) + "\n")

    def _on_conversation_resumed(self, event: ev.ConversationResumed) -> None:
        if not self._silent:
            self._end_line()
            self._write_out(self._earlier_lines(event.earlier, event.left_out, event.step))

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        silent, speaker = self._silent, event.speaker
        if self.mode == "buffered":
            if speaker or self.out_is_tty:
                self._label(speaker, event.step)
            self._write_streamed(safe(event.text))
            if self._wrap is not None:
                self._stream_raw(self._wrap.flush())
        if event.cut and not silent and self.out_style.enabled:
            self._write_out(self.out_style.dim(" …"))  # the reply ends mid-thought
        if not silent:
            flag = ", interrupted" if event.interrupted else ""
            flag = ", cut at max_tokens" if event.cut else flag
            who = f"{safe(speaker)} " if speaker else ""
            tokens = format_tokens(event.tokens, event.tokens_estimated)
            figures = f"{tokens} · {format_duration(event.duration)}{flag}"
            self._note(self.style.dim(f"  ({who}turn {event.turn} · {figures})"))

    def _on_step_finished(self, event: ev.StepFinished) -> None:
        if self._silent:
            return
        s = self.style
        step = safe(event.step)
        took = format_duration(event.duration)
        tokens = event.tokens
        extra = f" · {format_tokens(tokens, event.tokens_estimated)}" if tokens else ""
        if event.status == "completed":
            self._note(s.green("✓ ") + step + s.dim(f" {took}{extra}"))
        elif event.status == "cancelled":
            self._note(s.yellow("■ ") + step + s.dim(" cancelled"))
        else:
            failed = s.red("✗ ") + step + s.dim(f" {took}")
            self._note(failed + f": {safe(event.error)}")

    def _on_model_loading(self, event: ev.ModelLoading) -> None:
        if self._silent:  # otherwise: the first reply waits for the model, say why
            return
        if event.done:
            self._note(self.style.dim(f"  (model ready in {format_duration(event.seconds)})"))
        else:
            self._note(self.style.dim(f"loading model {safe(event.model)}…"))

    def _on_log_message(self, event: ev.LogMessage) -> None:
        if not self._silent:
            self._note(safe(event.message))

    def _on_run_warning(self, event: ev.RunWarning) -> None:
        self._note(self.style.yellow("warning: ") + safe(event.message))

    def _on_run_error(self, event: ev.RunError) -> None:
        self._note(self.style.red("error: ") + safe(event.message))

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        self._end_line()
        if self._silent:
            return
        s, summary = self.style, event.summary
        if summary.status == "completed" and summary.message:
            self._write_out(safe(summary.message) + "\n")
        color = {"completed": s.green, "cancelled": s.yellow}.get(summary.status, s.red)
        outcome = color(f"{summary.mark} {summary.status}")
        self._note(outcome + s.dim(f" {summary.figures()}"))

    def _tool_line(self, event: ev.ToolCallFinished, arguments: str) -> str:
        """`⚙ Grep({"pattern": "TODO"}) → 12 matches · 0.12 s`, dim; errors in red, refused
        and interrupted calls in yellow. Name, arguments and result are the model's and
        the tool's text: shortened to one line, then made safe (decoding the JSON arguments
        can bring back control characters that were escaped in it)."""
        s = self.out_style
        who = s.partner(f"{safe(event.speaker)}: ") if event.speaker else ""
        shown = safe(shorten_arguments(arguments))
        call = s.dim("⚙ ") + who + s.dim(f"{safe(event.name)}({shown}) → ")
        took = s.dim(f" · {format_duration(event.duration)}")
        if event.outcome == "refused":
            return call + s.yellow("refused")
        if event.outcome == "interrupted":  # a call cut short may come with no duration
            return call + s.yellow("interrupted") + (took if event.duration else "")
        preview = safe(shorten_result(event.result))
        if event.is_error:
            return call + s.red(f"error: {preview}") + took
        return call + s.dim(preview) + took

    def _label(self, speaker: str, step: str) -> None:
        """Who writes the message that streams next: a partner by its name, the step's agent
        by its step's (the last part of a dotted name)."""
        name = safe(speaker or step.rpartition(".")[2])
        paint = self.out_style.partner if speaker else self.out_style.agent
        self._write_out(paint(f"{name}: "))
        if self._wrap is not None:
            self._wrap.start(width(self.out), display_width(f"{name}: "))

    def _prompt_lines(self, text: str) -> str:
        """The step's prompt, dimmed and labelled as the workflow's, its first lines only."""
        lines = safe(text).split("\n")
        if len(lines) > PROMPT_LINES_SHOWN:
            more = len(lines) - PROMPT_LINES_SHOWN
            lines = [*lines[:PROMPT_LINES_SHOWN], f"… ({more} more lines)"]
        shown = "\n".join(lines)
        if self._wrap is not None:
            self._wrap.start(width(self.out), len("prompt: "))
            shown = self._wrap.feed(shown) + self._wrap.flush()
        return self.out_style.dim(f"prompt: {shown}") + "\n"

    def _earlier_lines(self, earlier: tuple[ev.Said, ...], left_out: int, step: str) -> str:
        """A resumed conversation so far, dimmed: who said what (long messages shortened)."""
        lines = [f"(earlier in {safe(step)}; {left_out} more messages before these)"]
        if not left_out:
            lines[0] = f"(earlier in {safe(step)})"
        for said in earlier:
            who = {"prompt": "prompt", "person": "you", "agent": step.rpartition(".")[2]}.get(
                said.role, said.name
            )
            text = safe(said.text).strip().split("\n")
            if len(text) > EARLIER_LINES_SHOWN:
                text = [*text[:EARLIER_LINES_SHOWN], "…"]
            body = "\n".join(text)
            if self._wrap is not None:
                self._wrap.start(width(self.out), display_width(f"{who}: "))
                body = self._wrap.feed(body) + self._wrap.flush()
            mark = " [interrupted]" if said.interrupted else (" …" if said.cut else "")
            lines.append(f"{safe(who)}: {body}{mark}")
        return self.out_style.dim("\n".join(lines)) + "\n"

    def interrupted_turn(self) -> None:
        """Called by the CLI when Ctrl-C cut a reply (or a running tool call) short. The
        terminal has echoed `^C` already: the note does not print another one."""
        what = "tool call" if self._tools_running else "reply"
        self._note(
            self.style.yellow(f"■ {what} interrupted")
            + self.style.dim(" (Ctrl-C at the prompt cancels the run)")
        )


# What the terminal does with each kind of event (by exact type; any other kind is not
# shown). `AgentText`, the hot path, is handled in `emit` itself.
_HANDLERS: dict[type, Callable[[TerminalSink, Any], None]] = {
    ev.RunStarted: TerminalSink._on_run_started,
    ev.StepStarted: TerminalSink._on_step_started,
    ev.StepOutput: TerminalSink._on_step_output,
    ev.AgentToolUse: TerminalSink._on_agent_tool_use,
    ev.ToolCallStarted: TerminalSink._on_tool_call_started,
    ev.ToolCallFinished: TerminalSink._on_tool_call_finished,
    ev.AwaitingConfirmation: TerminalSink._on_awaiting_confirmation,
    ev.TurnStarted: TerminalSink._on_turn_started,
    ev.UserMessage: TerminalSink._on_user_message,
    ev.ConversationResumed: TerminalSink._on_conversation_resumed,
    ev.TurnFinished: TerminalSink._on_turn_finished,
    ev.StepFinished: TerminalSink._on_step_finished,
    ev.ModelLoading: TerminalSink._on_model_loading,
    ev.LogMessage: TerminalSink._on_log_message,
    ev.RunWarning: TerminalSink._on_run_warning,
    ev.RunError: TerminalSink._on_run_error,
    ev.RunFinished: TerminalSink._on_run_finished,
}
