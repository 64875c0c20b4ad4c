"""A small ACP agent on the official SDK, for `provider: acp` tests (run as a script).

It answers `echo: <prompt>`; a prompt `write NAME TEXT` asks permission and then writes
NAME through the client (`fs/write_text_file`); `read NAME` reads it back
(`fs/read_text_file`). Sessions are kept in $ACP_TEST_STATE (a JSON file) so a later
process can `session/load` them; `--no-load` turns session/load off (the replay fallback).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message_text,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    Usage,
)

LOAD = "--no-load" not in sys.argv
STATE = Path(os.environ.get("ACP_TEST_STATE", "acp-test-state.json"))


def _sessions() -> dict[str, list[str]]:
    return json.loads(STATE.read_text()) if STATE.exists() else {}


def _save(sessions: dict[str, list[str]]) -> None:
    STATE.write_text(json.dumps(sessions))


class EchoAgent:
    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=LOAD),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        sessions = _sessions()
        sessions[session_id] = []
        _save(sessions)
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> Any:
        if session_id not in _sessions():
            from acp import RequestError

            raise RequestError.invalid_params({"message": f"no session {session_id}"})
        return LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        sessions = _sessions()
        sessions.setdefault(session_id, []).append(text)
        _save(sessions)
        reply = f"echo: {text} (turn {len(sessions[session_id])})"
        words = text.split(" ", 2)
        if words[0] == "write" and len(words) == 3:
            await self.conn.session_update(
                session_id,
                start_tool_call("w1", "Write", kind="edit", raw_input={"path": words[1]}),
            )
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(
                    tool_call_id="w1", title="Write", raw_input={"path": words[1]}
                ),
                options=[
                    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Deny", kind="reject_once"),
                ],
            )
            outcome = answer.outcome
            if isinstance(outcome, AllowedOutcome) and outcome.option_id == "yes":
                try:
                    await self.conn.write_text_file(
                        session_id=session_id, path=words[1], content=words[2]
                    )
                    reply = f"wrote {words[1]}"
                except Exception as exc:
                    reply = f"write failed: {exc} {getattr(exc, 'data', '')}"
            else:
                reply = "not allowed"
        elif words[0] == "read" and len(words) >= 2:
            try:
                read = await self.conn.read_text_file(session_id=session_id, path=words[1])
                reply = f"read: {read.content}"
            except Exception as exc:
                reply = f"read failed: {exc} {getattr(exc, 'data', '')}"
        elif text.startswith("hang"):
            await asyncio.sleep(3600)
        for start in range(0, len(reply), 5):
            await self.conn.session_update(
                session_id, update_agent_message_text(reply[start : start + 5])
            )
        return PromptResponse(
            stop_reason="end_turn",
            usage=Usage(total_tokens=7, input_tokens=4, output_tokens=3),
        )

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    del text_block
    (Path(os.environ.get("ACP_TEST_PID_DIR", ".")) / f"agent-{os.getpid()}.pid").write_text("")
    asyncio.run(run_agent(EchoAgent()))
