"""The terminal frontend: renders run events to stdout/stderr, and reads the `> ` prompt.

stdout carries what the workflow produces (streamed agent replies, command output);
stderr carries progress (step started/finished, durations, tokens), warnings and errors,
so `awf run wf > out.txt` captures just the content. Output modes: `streaming` (text as it
arrives), `buffered` (each reply when complete), `silent` (only errors).

On a terminal a conversation reads as one: each reply is labelled with who writes it (the
step's agent by its step's name, a partner by its name), the person's lines follow a `> `
prompt in their own colour, the step's prompt is shown as the workflow's (`prompt: …`,
dimmed), replies break between words at the terminal's width (terminal_wrap.py), and a
resumed conversation shows what was said before, dimmed, before the next turn.

Why one module: the sink, the `> ` reader and Ctrl-C share one terminal — the reader
must know what the sink has written on the prompt's line, Ctrl-C must reach the reader
waiting at the prompt and the reply being streamed — and `TerminalSession`
(terminal_frontend.py) ties them to one run; the text they render lives in
terminal_text.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from awf_nb.engine import events as ev
from awf_nb.engine.summary import format_duration, format_tokens
from awf_nb.frontends.terminal_text import terminal_safe as safe
from awf_nb.frontends.terminal_wrap import WordWrap, display_width
from awf_nb.frontends.tool_calls import shorten_arguments, shorten_result

OutputMode = Literal["streaming", "buffered", "silent"]

# How long streamed reply text may wait in stdout's buffer: well under what a person notices
# (the aim is <= 50 ms from byte to screen), long enough to write a burst of tokens at once.
STREAM_FLUSH_DELAY = 0.02
# The person's side: the `> ` prompt bold cyan, then their typing cyan, until the reset.
YOU_PROMPT, YOU_TYPE, RESET = "\033[1;36m", "\033[0;36m", "\033[0m"
PROMPT_LINES_SHOWN = 6  # a step's prompt (maybe a whole file put into it) is shown this far
EARLIER_LINES_SHOWN = 3  # lines of each earlier message shown when a conversation resumes


class _Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def partner(self, text: str) -> str:
        """A conversation partner's label: its own colour (magenta, bold)."""
        return self._wrap("1;35", text)

    def agent(self, text: str) -> str:
        """The step's agent's label (green, bold)."""
        return self._wrap("1;32", text)


def _use_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


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
        self.style = _Style(_use_color(self.err) if color is None else color)
        self.out_style = _Style(_use_color(self.out) if color is None else color)
        self._at_line_start = True
        self._flush_timer: asyncio.TimerHandle | None = None
        # Only a person watching gets labels and word wrapping: a file gets the text alone.
        self.out_is_tty = _is_tty(self.out)
        self._wrap: WordWrap | None = WordWrap(_width(self.out)) if self.out_is_tty else None
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
            self._wrap.start(_width(self.out), display_width(f"{name}: "))

    def _prompt_lines(self, text: str) -> str:
        """The step's prompt, dimmed and labelled as the workflow's, its first lines only."""
        lines = safe(text).split("\n")
        if len(lines) > PROMPT_LINES_SHOWN:
            more = len(lines) - PROMPT_LINES_SHOWN
            lines = [*lines[:PROMPT_LINES_SHOWN], f"… ({more} more lines)"]
        shown = "\n".join(lines)
        if self._wrap is not None:
            self._wrap.start(_width(self.out), len("prompt: "))
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
                self._wrap.start(_width(self.out), display_width(f"{who}: "))
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


# Said before a question is asked again: the line just read was typed for an earlier
# prompt, so it cannot be the answer (it is kept as the next message instead).
NOT_AN_ANSWER = (
    "(“{}” was typed for an earlier prompt: it is kept as your next message, not taken as "
    "the answer)"
)
# How many lines typed ahead of a question are set aside at most (a terminal's input queue
# holds about 4 KiB; this only bounds a loop on a stream that never ends).
MAX_TYPED_AHEAD = 1000


@dataclass
class _Ask:
    """A prompt waiting for its line. A confirmation only takes the line of the read made
    for it (`request`), which starts once its question is shown: never a line typed for an
    earlier prompt, nor one typed ahead of the question."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[str | None]
    prompt: str
    confirming: bool
    request: int | None = None  # the read made for it; None: it waits on an earlier read


class TerminalReader:
    """Reads the person's messages from stdin: a `> ` prompt with readline on a TTY,
    one line per turn from a pipe. Cancellable: a read pending when its task is cancelled
    is abandoned at once; a line typed afterwards is kept for the next message, not lost.

    It is also a `Confirmer`: `confirm` asks a tool call's question at a `[y/N]` prompt,
    and only a line typed after the question is shown answers it. Lines typed before
    (typed ahead, or at a prompt that was abandoned) are kept as messages instead.
    Prompts are asked one at a time (parallel branches may ask at once: they take turns).

    Reads happen in one daemon thread (a blocked `input()` cannot be interrupted, and a
    daemon thread never holds up process exit). Each read the thread makes is a numbered
    request, so a line is known to come from the read made for a question, or not.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        history_path: Path | None = None,
        prompt_out: TextIO | None = None,
    ) -> None:
        self.stream = stream or sys.stdin
        # The `> ` prompt belongs on the terminal: with stdout redirected to a file it goes
        # to stderr, so the file holds only the conversation.
        if prompt_out is None:
            prompt_out = sys.stdout if _is_tty(sys.stdout) else sys.stderr
        self.prompt_out = prompt_out
        # The person's lines in their own colour: the prompt bold, what they type plain cyan.
        self.color = _use_color(prompt_out)
        self.is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.history_path = history_path
        self._requests: queue.Queue[tuple[int, str, bool]] = queue.Queue()
        self._ready: deque[str | None] = deque()  # lines no prompt took: the next messages
        self._waiter: _Ask | None = None
        self._lock = threading.Lock()
        self._reading: int | None = None  # the read the thread is on (maybe an abandoned one)
        self._last_request = 0
        self._turn: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._thread: threading.Thread | None = None
        self._readline = self._setup_readline() if self.is_tty else None

    def _setup_readline(self) -> object | None:
        try:
            import readline
        except ImportError:  # not on every platform; plain input() still works
            return None
        readline.set_history_length(1000)
        if self.history_path is not None:
            with contextlib.suppress(OSError):
                readline.read_history_file(self.history_path)
        return readline

    def _remember(self, line: str, *, add: bool = False) -> None:
        """Put a message in the arrow-up history file (`add`: and in readline's, for a line
        readline did not read itself)."""
        rl: Any = self._readline
        if rl is None or self.stream is not sys.stdin or not line.strip():
            return
        if add:
            rl.add_history(line)
        if self.history_path is None:
            return
        with contextlib.suppress(OSError):
            self.history_path.parent.mkdir(parents=True, exist_ok=True)
            self.history_path.touch(exist_ok=True)
            rl.append_history_file(1, self.history_path)

    def _forget(self, line: str) -> None:
        """A `y`/`n` answer is not a message: keep it out of the arrow-up history (readline
        adds every line `input()` returns)."""
        rl: Any = self._readline
        if rl is None or self.stream is not sys.stdin or not line.strip():
            return
        last = rl.get_current_history_length()
        if last and rl.get_history_item(last) == line:
            rl.remove_history_item(last - 1)

    def _painted(self, prompt: str, *, for_readline: bool = False) -> str:
        """`prompt` in the person's colours, leaving the colour of their typing on. For
        readline the codes are marked as taking no room (`\\001…\\002`)."""
        if not self.color:
            return prompt
        mark = ("\001", "\002") if for_readline else ("", "")
        return f"{mark[0]}{YOU_PROMPT}{mark[1]}{prompt}{mark[0]}{YOU_TYPE}{mark[1]}"

    def _reset_colour(self) -> None:
        if self.color:
            self.prompt_out.write(RESET)
            self.prompt_out.flush()

    def _read_line(self, prompt: str) -> str | None:
        if self.is_tty and self.stream is sys.stdin:
            if self.prompt_out is not sys.stdout:  # input() would print it to stdout
                self.prompt_out.write(self._painted(prompt))
                self.prompt_out.flush()
                prompt = ""
            else:
                prompt = self._painted(prompt, for_readline=self._readline is not None)
            try:
                line = input(prompt)
            except EOFError:
                return None
            except UnicodeDecodeError:
                return "\ufffd"  # a byte that is not UTF-8: never a crash
            finally:
                self._reset_colour()
            return _valid_text(line)
        line = self.stream.readline()
        return None if line == "" else _valid_text(line.rstrip("\r\n"))

    def _typed_ahead(self) -> list[str | None]:
        """On a terminal, what was typed before the prompt about to be shown: whole lines
        (kept as messages, in the arrow-up history too) and a line begun but not ended
        (dropped). Between reads the terminal is in its line mode: the input queue holds
        whole lines, and a line still being typed that `tcflush` discards."""
        if not (self.is_tty and self.stream is sys.stdin):
            return []
        try:
            import select
            import termios

            fd = self.stream.fileno()
            data = b""
            for _ in range(MAX_TYPED_AHEAD):
                if not select.select([fd], [], [], 0)[0]:
                    break
                chunk = os.read(fd, 4096)
                if not chunk:  # Ctrl-D typed ahead: the end of input
                    data += b"\x04"
                    break
                data += chunk
            termios.tcflush(fd, termios.TCIFLUSH)
        except (ImportError, OSError, ValueError):
            return []
        text = data.decode("utf-8", "replace")
        *whole, _begun = text.split("\n")
        lines: list[str | None] = []
        for line in whole:
            lines.append(_valid_text(line.rstrip("\r")))
            self._remember(line, add=True)
        if text.endswith("\x04"):
            lines.append(None)
        return lines

    def _work(self) -> None:
        while True:
            request, prompt, fresh = self._requests.get()
            early = self._typed_ahead() if fresh else []
            try:
                line = self._read_line(prompt)
            except (OSError, ValueError):  # stdin closed under us
                line = None
            with self._lock:
                if self._reading == request:
                    self._reading = None
                for typed in early:
                    self._deliver(typed, None)
                self._deliver(line, request)

    def _deliver(self, line: str | None, request: int | None) -> None:
        """Give a line to the prompt waiting now, or keep it for the next message. `request`
        is the read it came from (None: typed ahead of one). Called with the lock held."""
        waiter = self._waiter
        if waiter is None or waiter.future.done():
            self._keep(line, request)
            return
        if waiter.confirming and request != waiter.request and line is not None:
            # Typed before the question was shown: kept, and the question asked again.
            self._keep(line, request)
            if waiter.request is None or request is not None:
                if self.is_tty:
                    self.prompt_out.write(NOT_AN_ANSWER.format(safe(line)) + "\n")
                    self.prompt_out.flush()
                waiter.request = self._request(waiter.prompt, fresh=True)
            return
        self._waiter = None
        if line is not None and request is not None:
            if waiter.confirming:
                self._forget(line)
            else:
                self._remember(line)
        with contextlib.suppress(RuntimeError):  # the loop has closed
            waiter.loop.call_soon_threadsafe(_resolve, waiter.future, line)

    def _keep(self, line: str | None, request: int | None) -> None:
        self._ready.append(line)
        if line is not None and request is not None:
            self._remember(line)

    def _request(self, prompt: str, *, fresh: bool) -> int:
        """Have the thread read a line at `prompt` (`fresh`: set aside what was typed
        before it is shown). Called with the lock held."""
        self._last_request += 1
        self._reading = self._last_request
        self._requests.put((self._last_request, prompt, fresh))
        return self._last_request

    async def read(self, prompt: str) -> str | None:
        return await self._ask(prompt, confirming=False)

    async def confirm(self, question: str) -> bool | None:
        """Ask `question` (e.g. `Allow Bash({"command": "ls"})?`) at a `[y/N]` prompt: y or
        yes allows, anything else refuses, end of input is None (refused too).

        Only a line typed after the question is on the screen answers it (see the class)."""
        prompt = safe(question) + " [y/N] "
        answer = await self._ask(prompt, confirming=True)
        if not self.is_tty:
            # Nobody saw a prompt: put the question and the answer read on record.
            self.prompt_out.write(f"{prompt}{'' if answer is None else safe(answer)}\n")
            self.prompt_out.flush()
        if answer is None:
            return None
        return answer.strip().lower() in ("y", "yes")

    async def answer(self, prompt: str) -> str | None:
        """A line typed after `prompt` is shown (a breakpoint's choice, an edited value),
        not a message typed ahead; None at end of input."""
        return await self._ask(prompt, confirming=True)

    async def _ask(self, prompt: str, *, confirming: bool) -> str | None:
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn[0] is not loop:
            self._turn = (loop, asyncio.Lock())
        async with self._turn[1]:  # one prompt at a time
            return await self._ask_now(loop, prompt, confirming=confirming)

    async def _ask_now(
        self, loop: asyncio.AbstractEventLoop, prompt: str, *, confirming: bool
    ) -> str | None:
        with self._lock:
            if self._ready and not confirming:
                return self._ready.popleft()
            waiter = _Ask(loop, loop.create_future(), prompt, confirming)
            self._waiter = waiter
            # A read made for an abandoned prompt may still be on: its line comes first
            # (a message takes it; a question asks again after it). Else a read of its own.
            shown_by_us = self._reading is not None
            if not shown_by_us:
                waiter.request = self._request(prompt, fresh=confirming)
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="awf-stdin", daemon=True)
            self._thread.start()
        if shown_by_us and self.is_tty:
            self.prompt_out.write(self._painted(prompt))
            self.prompt_out.flush()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if self.is_tty:
                # Ctrl-C left the prompt unanswered: what is said next (the run cancelled,
                # the reply or tool call interrupted) starts on a line of its own, in the
                # terminal's own colour.
                self.prompt_out.write(RESET + "\n" if self.color else "\n")
                self.prompt_out.flush()
            raise
        finally:
            with self._lock:
                if self._waiter is waiter:
                    self._waiter = None


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


def _width(stream: TextIO) -> int:
    """The columns of the terminal `stream` shows on (80 when it cannot tell)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 80


def _valid_text(line: str) -> str:
    """Bytes that were not UTF-8 (surrogate escapes from stdin) become U+FFFD."""
    if line.isascii():
        return line
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _resolve(future: asyncio.Future[str | None], line: str | None) -> None:
    if not future.done():
        future.set_result(line)


class Interruptible(Protocol):
    """A run Ctrl-C can act on: its `RunControl`, or a notebook `RunHandle`."""

    def interrupt(self) -> str: ...  # "turn" (a reply was cut short) or "run" (cancelled)

    def cancel(self) -> object: ...


class CtrlC:
    """What Ctrl-C does during a run — one policy for `awf run` and for `%awf` in a terminal
    IPython: while a reply streams it interrupts that reply only (back to the `> ` prompt);
    at the prompt, or twice within `double_press` seconds, it cancels the run.

    Call it (in the event loop) once per press; `cancelled` says whether a press ended the
    run.
    """

    def __init__(
        self,
        run: Interruptible,
        on_reply_interrupted: Callable[[], None],
        *,
        double_press: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run = run
        self.on_reply_interrupted = on_reply_interrupted
        self.double_press = double_press
        self.clock = clock
        self.cancelled = False
        self._last_press = float("-inf")

    def __call__(self) -> None:
        pressed = self.clock()
        twice = pressed - self._last_press < self.double_press
        self._last_press = pressed
        if twice:
            self.run.cancel()
            self.cancelled = True
        elif self.run.interrupt() == "turn":
            self.on_reply_interrupted()
        else:
            self.cancelled = True
