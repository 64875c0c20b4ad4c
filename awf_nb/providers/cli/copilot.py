"""The `github_copilot` provider (alias `copilot`): GitHub's Copilot CLI (`@github/copilot`).

Command: `copilot [--resume=ID] -p P --output-format=json --silent [--model=M]
[--allow-all] [--allow-tool=T]… [--additional-mcp-config=JSON --allow-tool=SERVER]…
[extra_args…]`, the system prompt prefixed to the first prompt. MCP servers
(`mcp_proxy`) are added to the user's own for the session by `--additional-mcp-config`,
and their tools allowed by naming the server in `--allow-tool`: without it, a
non-interactive copilot denies every call ("no interactive user response"). Text streams
from `assistant.message_delta`; the reply is the last `assistant.message` with non-empty
content; the session id only comes in the final `result` event, whose `exitCode` tells
success. Copilot reports no token usage.
"""

from __future__ import annotations

import json
import re
from typing import Any

from awf_nb.engine.ports import Notice, ProviderEvent, ToolUse
from awf_nb.providers.cli.base import (
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    mcp_server_entry,
    object_at,
    readable_error,
    short_argument,
)


class CopilotProvider(CliProvider):
    default_name = "github_copilot"
    binary = "copilot"
    package = "@github/copilot"
    supports_allowed_tools = True
    session_missing_pattern = re.compile(
        r"no session, task, or name matched|session not found", re.IGNORECASE
    )

    def build_command(self, turn: CliTurn) -> Command:
        options = turn.options
        argv = [self.binary]
        if turn.session_id:
            argv.append(f"--resume={turn.session_id}")
        stdin = None
        if not self.prompt_fits_argv(turn.prompt):
            stdin = turn.prompt  # without -p, copilot reads the prompt from stdin
        elif turn.prompt.startswith("-"):
            argv.append(f"--prompt={turn.prompt}")  # `-p -x…` would read as an option
        else:
            argv += ["-p", turn.prompt]
        argv += ["--output-format=json", "--silent"]
        if options.model:
            argv.append(f"--model={options.model}")
        if options.dangerously_skip_permissions:
            argv.append("--allow-all")
        argv += [f"--allow-tool={tool}" for tool in options.allowed_tools]
        for server in turn.mcp_servers:
            # `tools: ["*"]`: copilot's config offers only the tools listed there.
            entry = {"type": "local", **mcp_server_entry(server), "tools": ["*"]}
            config = {"mcpServers": {server.name: entry}}
            argv += [f"--additional-mcp-config={json.dumps(config)}", f"--allow-tool={server.name}"]
        return Command([*argv, *options.extra_args], stdin=stdin)

    def new_parser(self) -> CopilotParser:
        return CopilotParser()


class CopilotParser(OutputParser):
    """Reads `copilot --output-format=json` events."""

    def __init__(self) -> None:
        super().__init__()
        self._streamed: set[str] = set()
        self._reply = ""
        self._exit_code: int | None = None
        self._error = ""

    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]:
        kind = event.get("type")
        data = object_at(event, "data")
        if kind == "assistant.message_delta":
            message_id = str(data.get("messageId", ""))
            self._streamed.add(message_id)
            return self.text.delta(message_id, str(data.get("deltaContent") or ""))
        if kind == "assistant.message":
            return self._message(data)
        if kind == "tool.execution_start":
            name = str(data.get("toolName", "tool"))
            return [ToolUse(name, short_argument(data.get("arguments")))]
        if kind == "session.error":
            self._error = readable_error(str(data.get("message") or "session error"))
        elif kind == "session.warning" and data.get("message"):
            return [Notice(f"copilot: {data['message']}")]
        elif kind == "result":
            code = event.get("exitCode")
            self._exit_code = code if isinstance(code, int) else None
            return self.found_session(event.get("sessionId"))
        return []

    def _message(self, data: dict[str, Any]) -> list[ProviderEvent]:
        content = data.get("content")
        if not isinstance(content, str) or not content:
            return []  # a message that only requests tools
        self._reply = content
        message_id = str(data.get("messageId", ""))
        if message_id in self._streamed:
            return []
        return self.text.delta(message_id, content)

    def outcome(self) -> TurnOutcome:
        if self._exit_code == 0:
            return TurnOutcome(text=self._reply, ok=True)
        return TurnOutcome(error=self._error)
