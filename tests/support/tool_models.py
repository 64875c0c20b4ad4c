"""A model that calls tools and a person who answers tool confirmations, for the tests of
the engine's tool loop: `ScriptedModel` plays a `Script` (reply texts and tool calls) on the
scripted provider, `Confirming` answers confirmations from a list, `workflow` writes the
one-step workflow they run in."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import AsyncIterator
from typing import Any

from awf_nb.engine.ports import TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from awf_nb.runs.replies import ScriptedReader

# A model's script: each entry a reply text or a list of (tool name, arguments) calls.
Script = list[str | list[tuple[str, dict[str, Any] | str]]]


def numbered_calls(script: Script) -> list[str | list[dict[str, str]]]:
    """The script with each call as {id, name, arguments as JSON text}, ids numbered
    across the whole script (call_1, call_2, …)."""
    numbered: list[str | list[dict[str, str]]] = []
    number = 0
    for entry in script:
        if isinstance(entry, str):
            numbered.append(entry)
            continue
        calls = []
        for name, arguments in entry:
            number += 1
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append({"id": f"call_{number}", "name": name, "arguments": text})
        numbered.append(calls)
    return numbered


class ScriptedModel:
    """The script played by the scripted provider (its replies can call tools); remembers
    every request the engine made."""

    name = "scripted"
    session_kind = "history"

    def __init__(self, script: Script) -> None:
        self.requests: list[TurnRequest] = []
        self.provider = ScriptedProvider()
        self.replies = [
            entry if isinstance(entry, str) else {"tool_calls": entry}
            for entry in numbered_calls(script)
        ]

    def stream(self, turn: TurnRequest) -> AsyncIterator[object]:
        self.requests.append(turn)
        options = {"replies": self.replies}
        return self.provider.stream(dataclasses.replace(turn, options=options))

    async def aclose(self) -> None:
        pass


class Confirming(ScriptedReader):
    """A person who answers tool confirmations from a list (True/False) and messages from
    another."""

    def __init__(self, answers: list[bool], replies: list[str] | None = None) -> None:
        super().__init__(replies or [])
        self.answers = list(answers)
        self.questions: list[str] = []

    async def confirm(self, question: str) -> bool | None:
        self.questions.append(question)
        return self.answers.pop(0) if self.answers else None


def workflow(tools: str, *, mode: str = "single", conversation: str = "") -> str:
    """A one-agent-step workflow on the `toolmodel` provider with the given `tools:` (and
    `mode`, and extra step lines in `conversation`)."""
    return textwrap.dedent(
        f"""
        name: tools
        states:
          initial: work
          work:
            type: agent
            provider: toolmodel
            mode: {mode}
            prompt: Tidy the notes.
            tools: {tools}
        {conversation}
            on_success: done
          done: {{type: terminal, message: "{{{{.states.work.Output}}}}"}}
        """
    )
