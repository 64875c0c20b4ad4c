"""A model that calls tools by script, for frontend tests of chat mode (tool calls, the
person's confirmation) in-process, in `awf run` under a pseudo-terminal, and in a kernel.

`provider: toolscript` with `options: {script: [...], delay_ms: N}`: each turn or tool
round takes the next entry — a string is a reply, `{text, calls: [{name, arguments}]}` a
reply that streams `text` and then calls tools (`arguments` an object). Text streams word
by word, `delay_ms` apart. Out of script, the reply is "out of script".

In another process, `register()` makes the name known (the test run's `tests` package must
be importable there: `sys.path` gets the repository's root).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any, Literal

from awf_nb.engine.ports import Final, TextDelta, ToolCall, TurnRequest, Usage

NAME = "toolscript"


class ToolScript:
    """Serves `options.script` in order, for every step (one counter per step)."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = NAME) -> None:
        self.name = name
        self._next: dict[str, int] = {}
        self._calls = 0

    async def stream(self, turn: TurnRequest) -> AsyncIterator[object]:
        script: list[Any] = list(turn.options.get("script", []))
        delay = float(turn.options.get("delay_ms", 0)) / 1000
        index = self._next.get(turn.step, 0)
        self._next[turn.step] = index + 1
        entry = script[index] if index < len(script) else "out of script"
        if isinstance(entry, str):
            entry = {"text": entry}
        text = str(entry.get("text", ""))
        for word in re.findall(r"\S+\s*|\s+", text):
            if delay:
                await asyncio.sleep(delay)
            yield TextDelta(word)
        for call in entry.get("calls", []):
            self._calls += 1
            arguments = call.get("arguments", {})
            yield ToolCall(f"call_{self._calls}", call["name"], json.dumps(arguments))
        yield Usage(10, max(1, len(text) // 4))
        yield Final(text)

    async def aclose(self) -> None:
        pass


def register() -> None:
    from awf_nb.providers import register_provider

    register_provider(NAME, ToolScript)
