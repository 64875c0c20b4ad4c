"""The `opencode` provider: the opencode CLI (`opencode-ai`), run as `opencode run`.

Command: `opencode run --format json [--model provider/model] [-s ID]
[--dangerously-skip-permissions] [extra_args…]` with the prompt (system prompt prefixed on
the first turn) **on stdin**, then closed: an argv prompt containing spaces gets wrapped
in literal quotes by opencode. Never pass `--framework`, `--verbose` or `--output`
(rejected). Text parts arrive whole; the reply is all of them joined with "". Success is
a last `step_finish` with reason `stop` and no `error` line.

MCP servers (`mcp_proxy`) go in the `OPENCODE_CONFIG_CONTENT` configuration, merged into
the one the user may give there (`mcp.<name>`: a `local` server), with
`permission["<name>_*"] = "allow"`: a permission set to `ask` is refused in a run, as no
one can answer.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from awf_nb.engine.ports import McpServerSpec, ProviderEvent, ToolUse, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers.cli.base import (
    MCP_STARTUP_TIMEOUT_SECONDS,
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    object_at,
    readable_error,
    short_argument,
    usage_count,
)


class OpencodeProvider(CliProvider):
    default_name = "opencode"
    binary = "opencode"
    package = "opencode-ai"
    session_missing_pattern = re.compile(r"session not found", re.IGNORECASE)

    def build_command(self, turn: CliTurn) -> Command:
        options = turn.options
        argv = [self.binary, "run", "--format", "json"]
        if options.model:
            argv += ["--model", options.model]
        if turn.session_id:
            argv += ["-s", turn.session_id]
        if options.dangerously_skip_permissions:
            argv.append("--dangerously-skip-permissions")
        return Command([*argv, *options.extra_args], stdin=turn.prompt)

    def prepare_env(
        self, turn: CliTurn, env: dict[str, str], turn_files: contextlib.ExitStack
    ) -> None:
        if not turn.mcp_servers:
            return
        text = env.get(CONFIG_VARIABLE, "").strip()
        try:
            config = json.loads(text) if text else {}
        except ValueError as exc:
            raise ProviderError(
                self.name, f"{CONFIG_VARIABLE} is not valid JSON ({exc}); cannot add MCP servers"
            ) from None
        if not isinstance(config, dict):
            raise ProviderError(self.name, f"{CONFIG_VARIABLE} must hold a JSON object")
        env[CONFIG_VARIABLE] = json.dumps(with_mcp_servers(config, turn.mcp_servers))

    def new_parser(self) -> OpencodeParser:
        return OpencodeParser()


CONFIG_VARIABLE = "OPENCODE_CONFIG_CONTENT"


def with_mcp_servers(config: dict[str, Any], servers: tuple[McpServerSpec, ...]) -> dict[str, Any]:
    """`config` (opencode's JSON configuration) with `servers` added and allowed."""
    mcp = dict(config.get("mcp") or {})
    permission = config.get("permission")
    # A single word sets every tool's permission; rules by tool name can say the same.
    rules = dict(permission) if isinstance(permission, dict) else {}
    if isinstance(permission, str):
        rules["*"] = permission
    for server in servers:
        mcp[server.name] = {
            "type": "local",
            "command": [server.command, *server.args],
            "environment": dict(server.env),
            "enabled": True,
            "timeout": MCP_STARTUP_TIMEOUT_SECONDS * 1000,  # ms, to list the tools
        }
        rules[f"{server.name}_*"] = "allow"  # opencode names them <server>_<tool>
    return {**config, "mcp": mcp, "permission": rules}


class OpencodeParser(OutputParser):
    """Reads `opencode run --format json` events."""

    def __init__(self) -> None:
        super().__init__()
        self._texts: dict[str, str] = {}  # part id -> text, in arrival order
        self._finish_reason: str | None = None
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = 0.0
        self._counted = False
        self._error = ""

    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]:
        events = [] if self.session_id else self.found_session(event.get("sessionID"))
        kind = event.get("type")
        part = object_at(event, "part")
        if kind == "text":
            events += self._text(part)
        elif kind == "tool_use":
            state = object_at(part, "state")
            name = str(part.get("tool", "tool"))
            events.append(ToolUse(name, short_argument(state.get("input"))))
        elif kind == "step_finish":
            self._step_finish(part)
        elif kind == "error":
            self._error = _error_message(event.get("error"))
        return events

    def _text(self, part: dict[str, Any]) -> list[ProviderEvent]:
        text = part.get("text")
        if not isinstance(text, str):
            return []
        part_id = str(part.get("id", len(self._texts)))
        first_time = part_id not in self._texts
        self._texts[part_id] = text  # a part sent again carries its final text
        return self.text.delta(part_id, text) if first_time else []

    def _step_finish(self, part: dict[str, Any]) -> None:
        self._finish_reason = str(part.get("reason", ""))
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            self._counted = True
            self._input_tokens += usage_count(tokens.get("input"))
            self._output_tokens += usage_count(tokens.get("output"))
        cost = part.get("cost")
        if isinstance(cost, int | float):
            self._cost += float(cost)

    def outcome(self) -> TurnOutcome:
        if self._error:
            return TurnOutcome(error=self._error)
        if self._finish_reason != "stop":
            reason = self._finish_reason
            error = f"the model stopped early (reason: {reason})" if reason else ""
            return TurnOutcome(error=error)
        usage = None
        if self._counted:
            usage = Usage(
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                cost_usd=self._cost,
            )
        return TurnOutcome(text="".join(self._texts.values()), ok=True, usage=usage)


def _error_message(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error or "opencode reported an error")
    data = object_at(error, "data")
    message = readable_error(str(data.get("message") or error.get("message") or ""))
    status = data.get("statusCode")
    name = str(error.get("name", "")).strip()
    text = f"{name}: {message}" if name and message else name or message or "error"
    return f"{text} (HTTP {status})" if isinstance(status, int) else text
