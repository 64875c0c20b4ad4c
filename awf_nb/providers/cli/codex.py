"""The `codex` provider: OpenAI's Codex CLI (`@openai/codex`), run as `codex exec`.

Command: `codex exec [resume ID] --json --skip-git-repo-check [--model M]
[--dangerously-bypass-approvals-and-sandbox] [-c mcp_servers.NAME.KEY=VALUE…]
[extra_args…] P`, the system prompt prefixed to the first prompt.
`--skip-git-repo-check` is required outside a git repository. MCP servers (`mcp_proxy`)
are config overrides (TOML values): command, args, env, a longer startup and tool timeout
than codex's 10 s and 60 s, `required = true` — codex otherwise gives a server one second
to start and sends the first request without the tools of one still starting (and a
server that cannot start fails the turn instead of leaving it without tools) — and
`default_tools_approval_mode="approve"`: `codex exec` never asks, so without it every
call of an MCP tool is refused.
Codex prints whole items, not token deltas: each `agent_message` arrives complete; the
reply is the last one. Success is a `turn.completed` with no `turn.failed`.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from awf_nb.engine.ports import McpServerSpec, Notice, ProviderEvent, ToolUse, Usage
from awf_nb.providers.cli.base import (
    MCP_STARTUP_TIMEOUT_SECONDS,
    MCP_TOOL_TIMEOUT_SECONDS,
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    readable_error,
    short_argument,
)

_SHELLS = ("bash", "sh", "zsh")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class CodexProvider(CliProvider):
    default_name = "codex"
    binary = "codex"
    package = "@openai/codex"
    session_missing_pattern = re.compile(
        r"no rollout found|thread/resume failed|no (session|thread) found", re.IGNORECASE
    )
    stderr_noise = (
        "Reading additional input from stdin",
        "WARNING: proceeding, even though we could not create PATH aliases",
    )

    def build_command(self, turn: CliTurn) -> Command:
        options = turn.options
        argv = [self.binary, "exec"]
        if turn.session_id:
            argv += ["resume", turn.session_id]
        argv += ["--json", "--skip-git-repo-check"]
        if options.model:
            argv += ["--model", options.model]
        if options.dangerously_skip_permissions:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        for server in turn.mcp_servers:  # before extra_args: a user's own -c comes later, wins
            argv += [arg for item in mcp_overrides(server) for arg in ("-c", item)]
        argv += options.extra_args
        if not self.prompt_fits_argv(turn.prompt):
            return Command([*argv, "-"], stdin=turn.prompt)  # `-`: read the prompt from stdin
        if turn.prompt.startswith("-"):
            argv.append("--")  # or the prompt would be read as an option
        return Command([*argv, turn.prompt])

    def new_parser(self) -> CodexParser:
        return CodexParser()


def mcp_overrides(server: McpServerSpec) -> list[str]:
    """`-c` overrides that add a stdio MCP server, waited for before the first request,
    whose tools run without approval."""
    key = server.name if _BARE_KEY.fullmatch(server.name) else _toml(server.name)
    values: dict[str, Any] = {"command": server.command, "args": list(server.args)}
    if server.env:
        values["env"] = dict(server.env)
    values |= {
        "startup_timeout_sec": MCP_STARTUP_TIMEOUT_SECONDS,
        "tool_timeout_sec": MCP_TOOL_TIMEOUT_SECONDS,
        "required": True,
        "default_tools_approval_mode": "approve",
    }
    return [f"mcp_servers.{key}.{name}={_toml(value)}" for name, value in values.items()]


def _toml(value: Any) -> str:
    """A TOML value. JSON's strings, numbers and arrays are TOML's too (non-ASCII kept
    as is: TOML has no surrogate-pair escapes); a mapping is an inline table."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


class CodexParser(OutputParser):
    """Reads `codex exec --json` events."""

    def __init__(self) -> None:
        super().__init__()
        self._reply = ""
        self._completed: dict[str, Any] | None = None
        self._failure = ""
        self._errors: list[str] = []
        self._announced: set[str] = set()

    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]:
        kind = event.get("type")
        if kind == "thread.started":
            return [] if self.session_id else self.found_session(event.get("thread_id"))
        if kind in ("item.started", "item.completed"):
            return self._item(event.get("item") or {}, completed=kind == "item.completed")
        if kind == "turn.completed":
            self._completed = event
        elif kind == "turn.failed":
            error = event.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else error
            self._failure = readable_error(str(message or "turn failed"))
        elif kind == "error":
            # Transient trouble (reconnecting) as well as the cause of a coming turn.failed.
            message = readable_error(str(event.get("message", "")))
            self._errors.append(message)
            return [Notice(f"codex: {message}")] if message else []
        return []

    def _item(self, item: dict[str, Any], *, completed: bool) -> list[ProviderEvent]:
        item_type = item.get("type")
        item_id = str(item.get("id", ""))
        if item_type == "agent_message" and completed:
            text = item.get("text")
            if not isinstance(text, str):
                return []
            self._reply = text
            return self.text.delta(item_id, text)
        if item_type == "error" and completed:
            return [Notice(f"codex: {item.get('message', '')}")]
        tool = _tool_use(item)
        if tool is None or item_id in self._announced:
            return []
        self._announced.add(item_id)
        return [tool]

    def outcome(self) -> TurnOutcome:
        if self._failure or self._completed is None:
            error = self._failure or "; ".join(self._errors)
            return TurnOutcome(error=error)
        return TurnOutcome(text=self._reply, ok=True, usage=_usage(self._completed.get("usage")))


def _tool_use(item: dict[str, Any]) -> ToolUse | None:
    item_type = item.get("type")
    if item_type == "command_execution":
        return ToolUse("shell", short_argument(_unwrap_shell(str(item.get("command", "")))))
    if item_type == "file_change":
        changes = item.get("changes") or []
        paths = [str(c.get("path", "")) for c in changes if isinstance(c, dict)]
        return ToolUse("edit", short_argument(", ".join(p for p in paths if p)))
    if item_type == "mcp_tool_call":
        name = ".".join(str(item[k]) for k in ("server", "tool") if item.get(k))
        return ToolUse(name or "mcp", short_argument(item.get("arguments")))
    if item_type == "web_search":
        return ToolUse("web_search", short_argument(item.get("query", "")))
    return None


def _unwrap_shell(command: str) -> str:
    """`/bin/bash -lc 'echo hi'` → `echo hi`: the wrapper says nothing to the user."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return command


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, output = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(prompt, int) or not isinstance(output, int):
        return None
    return Usage(input_tokens=prompt, output_tokens=output)
