"""Real ACP peers for tests, on the official SDK: a client that records what an agent
sends (and answers permission requests as told), and the process of `awf acp`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    ClientCapabilities,
    DeniedOutcome,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
)

ROOT = Path(__file__).resolve().parents[2]


class RecordingClient:
    """An ACP client that keeps every session update per session and answers permission
    requests with `answers` in order ("allow_once", "allow_always", "deny", "cancel")."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.updates: dict[str, list[Any]] = {}
        self.permissions: list[Any] = []
        self.answers = list(answers or [])
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.setdefault(session_id, []).append(update)
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((session_id, tool_call, options))
        answer = self.answers.pop(0) if self.answers else "deny"
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    def text(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for u in self.updates.get(session_id, [])
            if isinstance(u, AgentMessageChunk)
        )

    def clear(self, session_id: str) -> None:
        self.updates[session_id] = []

    def commands(self, session_id: str) -> list[Any]:
        for update in self.updates.get(session_id, []):
            if isinstance(update, AvailableCommandsUpdate):
                return list(update.available_commands)
        return []

    def tool_calls(self, session_id: str) -> list[Any]:
        return [
            u
            for u in self.updates.get(session_id, [])
            if isinstance(u, (ToolCallStart, ToolCallProgress))
        ]

    async def wait_for(self, predicate: Any, timeout: float = 60) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), timeout)


def awf_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("AWF_WORKFLOWS_PATH", None)
    return env


@contextlib.asynccontextmanager
async def awf_acp(client: RecordingClient, cwd: Path, *args: str) -> AsyncIterator[tuple[Any, Any]]:
    """`awf acp ARGS` started in `cwd` (the worktree's awf_nb), initialized; runs are
    stored in `cwd/store`."""
    storage = ("--storage", str(cwd / "store"))
    command = (sys.executable, "-m", "awf_nb.cli", "acp", *storage, *args)
    async with spawn_agent_process(client, *command, cwd=cwd, env=awf_env()) as (conn, process):
        await asyncio.wait_for(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
            ),
            60,
        )
        yield conn, process


async def say(conn: Any, session_id: str, text: str) -> Any:
    return await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block(text)]), 60)
