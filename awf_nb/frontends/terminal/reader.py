"""The terminal's `InputReader` (and `Confirmer`): the person's messages at a `> ` prompt
(readline on a TTY, one line per turn from a pipe), tool-call questions at a `[y/N]` one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from awf_nb.frontends.terminal.style import RESET, YOU_PROMPT, YOU_TYPE, is_tty, use_color
from awf_nb.frontends.terminal.text import terminal_safe as safe

__all__ = ["MAX_TYPED_AHEAD", "NOT_AN_ANSWER", "TerminalReader"]


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
            prompt_out = sys.stdout if is_tty(sys.stdout) else sys.stderr
        self.prompt_out = prompt_out
        # The person's lines in their own colour: the prompt bold, what they type plain cyan.
        self.color = use_color(prompt_out)
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


def _valid_text(line: str) -> str:
    """Bytes that were not UTF-8 (surrogate escapes from stdin) become U+FFFD."""
    if line.isascii():
        return line
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _resolve(future: asyncio.Future[str | None], line: str | None) -> None:
    if not future.done():
        future.set_result(line)
