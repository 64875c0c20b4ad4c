"""The terminal's answer to a breakpoint (`awf run --break-before STEP`, docs/debugging.md).

At each pause it shows the step and what it is about to do (or did), then asks
`[c]ontinue [s]tep [e]dit [k]skip [a]bort > `. Edit opens `$EDITOR` on the value (or reads
a line when there is none); skip reads the output to give the step. Lines are read through
the run's `TerminalReader`, so a line typed before the pause is not taken as an answer.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from awf_nb.engine.breakpoints import Pause, PauseAnswer
from awf_nb.frontends.terminal import TerminalReader
from awf_nb.frontends.terminal.text import terminal_safe as safe

__all__ = ["CHOICES", "EDITOR_TIMEOUT", "TerminalDebugger"]

CHOICES = "[c]ontinue [s]tep [e]dit [k]skip [a]bort > "
KEYS = {"c": "continue", "s": "step", "e": "edit", "k": "skip", "a": "abort"}
# How long `$EDITOR` may stay open on a value before the edit is given up (the value then
# stays as it was): a person's editing session, bounded like every child process.
EDITOR_TIMEOUT = 3600.0
# A value edited in `$EDITOR` is read back up to this size.
MAX_EDITED_BYTES = 1_000_000
# Answers that are none of the choices, at one pause, before it counts as abort.
MAX_WRONG_ANSWERS = 20
SHOWN_LINES = 20  # of the step's command, prompt or output
STATE_LINE_CHARS = 70  # of each earlier step's output


class TerminalDebugger:
    """Asks at the terminal what to do at a pause (see the module)."""

    def __init__(self, reader: TerminalReader, out: TextIO | None = None) -> None:
        self.reader = reader
        self.out = out or sys.stderr
        # Parallel branches may pause at once: one pause on the screen at a time.
        self._turn: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def pause(self, pause: Pause) -> PauseAnswer:
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn[0] is not loop:
            self._turn = (loop, asyncio.Lock())
        async with self._turn[1]:
            return await self._pause(pause)

    async def _pause(self, pause: Pause) -> PauseAnswer:
        self._show(pause)
        for _ in range(MAX_WRONG_ANSWERS):
            line = await self.reader.answer(CHOICES)
            if line is None:  # end of input: nobody can answer
                return PauseAnswer("abort")
            key = line.strip().lower()
            action = KEYS.get(key) or (key if key in KEYS.values() else None)
            if action is None:
                self._say("answer c, s, e, k or a")
                continue
            if action == "edit":
                value = await self._edit(pause)
                if value is None:
                    continue
                return PauseAnswer("edit", value)
            if action == "skip":
                value = await self.reader.answer("output of the skipped step > ")
                return PauseAnswer("skip", value or "")
            return PauseAnswer(action)  # type: ignore[arg-type]
        return PauseAnswer("abort")

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _show(self, pause: Pause) -> None:
        what = {"command": "command", "agent": "prompt"}.get(pause.step_type, "runs")
        if pause.when == "after":
            what = "output"
        lines = [f"⏸ {pause.describe()}"]
        shown = safe(pause.shows).splitlines() or [""]
        lines.append(f"  {what}: {shown[0]}")
        lines += [f"    {line}" for line in shown[1:SHOWN_LINES]]
        if len(shown) > SHOWN_LINES:
            lines.append(f"    … ({len(shown) - SHOWN_LINES} more lines)")
        for name, output in pause.state.items():
            first = safe(output).replace("\n", " ⏎ ")
            if len(first) > STATE_LINE_CHARS:
                first = first[:STATE_LINE_CHARS] + "…"
            lines.append(f"  state {name}: {first}")
        self._say("\n".join(lines))

    async def _edit(self, pause: Pause) -> str | None:
        """The new value: from `$EDITOR` on the current one, else a line typed."""
        if not pause.editable:
            self._say(f"step {pause.step}: nothing to edit before a {pause.step_type} step")
            return None
        editor = os.environ.get("EDITOR", "").strip()
        if not editor:
            return await self.reader.answer("new value > ")
        return await asyncio.to_thread(self._in_editor, editor, pause.value)

    def _in_editor(self, editor: str, value: str) -> str | None:
        with tempfile.TemporaryDirectory(prefix="awf-edit-") as folder:  # private: 0700
            path = Path(folder) / "value.txt"
            path.write_text(value, encoding="utf-8")
            try:
                done = subprocess.run(
                    [*shlex.split(editor), str(path)], timeout=EDITOR_TIMEOUT, check=False
                )
            except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
                self._say(f"$EDITOR ({editor}) could not edit the value: {exc}; nothing changed")
                return None
            if done.returncode != 0:
                self._say(f"$EDITOR ({editor}) exited with {done.returncode}; nothing changed")
                return None
            with path.open("rb") as handle:
                data = handle.read(MAX_EDITED_BYTES + 1)
            if len(data) > MAX_EDITED_BYTES:
                self._say(f"the edited value is over {MAX_EDITED_BYTES:,} bytes; nothing changed")
                return None
            return data.decode("utf-8", "replace").removesuffix("\n")
