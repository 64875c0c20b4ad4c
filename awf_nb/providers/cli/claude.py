"""The `claude` provider: Anthropic's Claude Code CLI (`@anthropic-ai/claude-code`).

Command: `claude -p P --output-format stream-json --verbose --include-partial-messages
[--model M] [--system-prompt S] [-r ID] [--mcp-config=JSON] [--allowedTools=A,B]
[--dangerously-skip-permissions] [extra_args…]`. MCP servers (`mcp_proxy`) go in
`--mcp-config` (added to the user's own servers) with `alwaysLoad` — claude waits for
such a server before its first request (up to `MCP_CONNECT_TIMEOUT_MS`, set as long as
awf's startup timeout; others connect in the background and a first request can go out
without their tools) and offers its tools directly, not behind a tool search — and
their tools are allowed with `mcp__<server>` in `--allowedTools`: a `-p` run denies any
tool not allowed there, as there is no one to ask. Text streams token by token from
`stream_event` deltas (the `assistant` event that follows repeats it and is skipped);
success is `result.is_error == false` — a failed API call still says `subtype: success`.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from awf_nb.engine.ports import Notice, ProviderEvent, ToolUse, Usage
from awf_nb.engine.summary import format_duration
from awf_nb.providers.cli.base import (
    MCP_STARTUP_TIMEOUT_SECONDS,
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    mcp_server_entry,
    short_argument,
)

_SESSION_MISSING = re.compile(
    r"no conversation found with session id|--resume requires a valid session", re.IGNORECASE
)
# Claude Code's stand-in "model" for error messages it makes up itself.
_SYNTHETIC_MODEL = "<synthetic>"


class ClaudeProvider(CliProvider):
    default_name = "claude"
    binary = "claude"
    package = "@anthropic-ai/claude-code"
    system_prompt_flag = True
    supports_allowed_tools = True
    session_missing_pattern = _SESSION_MISSING

    def build_command(self, turn: CliTurn) -> Command:
        options = turn.options
        argv = [self.binary, "-p"]
        stdin = None
        trailing: list[str] = []
        if not self.prompt_fits_argv(turn.prompt):
            stdin = turn.prompt  # `claude -p` reads the prompt from stdin when none is given
        elif turn.prompt.startswith("-"):
            trailing = ["--", turn.prompt]  # would be taken for an option right after -p
        else:
            argv.append(turn.prompt)
        argv += ["--output-format", "stream-json", "--verbose", "--include-partial-messages"]
        if options.model:
            argv += ["--model", options.model]
        if turn.system_prompt:
            argv += ["--system-prompt", turn.system_prompt]
        if turn.session_id:
            argv += ["-r", turn.session_id]
        allowed = list(options.allowed_tools)
        env: dict[str, str] = {}
        if turn.mcp_servers:
            servers = {
                server.name: {"type": "stdio", **mcp_server_entry(server), "alwaysLoad": True}
                for server in turn.mcp_servers
            }
            # The `=` form, like --allowedTools below: the flag takes several values.
            argv.append("--mcp-config=" + json.dumps({"mcpServers": servers}))
            allowed += [f"mcp__{server.name}" for server in turn.mcp_servers]
            startup_ms = str(MCP_STARTUP_TIMEOUT_SECONDS * 1000)
            env |= {"MCP_CONNECT_TIMEOUT_MS": startup_ms, "MCP_TIMEOUT": startup_ms}
        if allowed:
            # The `=` form: --allowedTools is variadic and would swallow a following word.
            argv.append("--allowedTools=" + ",".join(allowed))
        if options.dangerously_skip_permissions:
            argv.append("--dangerously-skip-permissions")
            if _running_as_root():
                env["IS_SANDBOX"] = "1"  # claude refuses the flag as root without it
        argv += [*options.extra_args, *trailing]
        return Command(argv, stdin=stdin, env=env)

    def new_parser(self) -> ClaudeParser:
        return ClaudeParser()


def _running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


class ClaudeParser(OutputParser):
    """Reads `claude --output-format stream-json --verbose` events."""

    def __init__(self) -> None:
        super().__init__()
        self._streamed_messages: set[str] = set()
        self._current_message = ""
        self._result: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]:
        kind = event.get("type")
        if kind == "system":
            return self._system(event)
        if kind == "stream_event":
            return self._stream_event(event)
        if kind == "assistant":
            return self._assistant(event)
        if kind == "result":
            self._result = event
            return self.found_session(event.get("session_id"))
        return []

    def _system(self, event: dict[str, Any]) -> list[ProviderEvent]:
        events = self.found_session(event.get("session_id"))
        if event.get("subtype") == "api_retry":
            events.append(Notice(_retry_message(event)))
        return events

    def _stream_event(self, event: dict[str, Any]) -> list[ProviderEvent]:
        if event.get("parent_tool_use_id"):
            return []  # a sub-agent's own chatter, not this turn's reply
        inner = event.get("event") or {}
        if inner.get("type") == "message_start":
            self._current_message = str((inner.get("message") or {}).get("id", ""))
            return []
        delta = inner.get("delta") or {}
        if inner.get("type") != "content_block_delta" or delta.get("type") != "text_delta":
            return []
        self._streamed_messages.add(self._current_message)
        return self.text.delta(self._current_message, str(delta.get("text", "")))

    def _assistant(self, event: dict[str, Any]) -> list[ProviderEvent]:
        message = event.get("message") or {}
        message_id = str(message.get("id", ""))
        events: list[ProviderEvent] = list(self.found_session(event.get("session_id")))
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                name = str(block.get("name", "tool"))
                events.append(ToolUse(name, short_argument(block.get("input"))))
            elif block.get("type") == "text" and self._shows_text(event, message, message_id):
                events += self.text.delta(message_id, str(block.get("text", "")))
        return events

    def _shows_text(self, event: dict[str, Any], message: dict[str, Any], message_id: str) -> bool:
        return (
            message_id not in self._streamed_messages  # already streamed as deltas
            and not event.get("parent_tool_use_id")
            and message.get("model") != _SYNTHETIC_MODEL  # an error, reported as a failure
        )

    def outcome(self) -> TurnOutcome:
        result = self._result
        if result is None:
            return TurnOutcome()
        ok = result.get("is_error") is False
        text = result.get("result")
        text = text if isinstance(text, str) else ""
        errors = [str(e) for e in result.get("errors") or [] if e]
        error = "" if ok else (text or "; ".join(errors) or str(result.get("subtype", "error")))
        return TurnOutcome(
            text=text if ok else "",
            ok=ok,
            error=error,
            usage=_usage(result),
            session_missing=any(_SESSION_MISSING.search(e) for e in errors),
        )


def _usage(result: dict[str, Any]) -> Usage | None:
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    # Anthropic counts cached prompt tokens apart from `input_tokens`.
    prompt = count("input_tokens") + count("cache_creation_input_tokens")
    prompt += count("cache_read_input_tokens")
    cost = result.get("total_cost_usd")
    return Usage(
        input_tokens=prompt,
        output_tokens=count("output_tokens"),
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
    )


def _retry_message(event: dict[str, Any]) -> str:
    status = event.get("error_status")
    reason = f"HTTP {status}" if status else "connection error"
    if event.get("error"):
        reason += f": {event['error']}"
    delay = event.get("retry_delay_ms")
    when = f" in {format_duration(delay / 1000)}" if isinstance(delay, int | float) else ""
    attempt, most = event.get("attempt"), event.get("max_retries")
    count = f" (attempt {attempt} of {most})" if attempt and most else ""
    return f"claude: API request failed ({reason}); retrying{when}{count}"
