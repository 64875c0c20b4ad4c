"""The `gemini` provider: Google's Gemini CLI (`@google/gemini-cli`).

Command: `gemini --output-format stream-json [--model M] [--approval-mode=yolo]
--skip-trust [--resume ID] -p P [extra_args…]`, the system prompt prefixed to the first
prompt. `--skip-trust` is required: in an untrusted folder a headless run exits 55 and
yolo mode is silently dropped. The reply is the assistant `message` deltas joined with
"" (AWF joins them with newlines and breaks words apart: a bug we do not copy).

MCP servers (`mcp_proxy`): gemini has no flag for them and reads them only from settings
files — the user's (`~/.gemini/settings.json`), the project's (`.gemini/settings.json`),
and the system's. awf leaves the first two alone and gives gemini, for the turn, a
*system defaults* file (`GEMINI_CLI_SYSTEM_DEFAULTS_PATH`): the one gemini would read
otherwise, plus the servers, marked `trust: true` (a headless gemini does not even offer
tools that would need approval). Gemini reads a system file only if it and every folder
above it belong to root and no one else may write there: so this works when awf runs as
root (containers, CI); otherwise the step fails with an error saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from awf_nb.engine.ports import McpServerSpec, Notice, ProviderEvent, ToolUse, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers.cli.base import (
    MCP_TOOL_TIMEOUT_SECONDS,
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    mcp_server_entry,
    readable_error,
    short_argument,
    usage_count,
)

# Exit status of a headless gemini whose --resume names no known session.
_EXIT_SESSION_MISSING = 42
DEFAULTS_VARIABLE = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
SETTINGS_VARIABLE = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"


class GeminiProvider(CliProvider):
    default_name = "gemini"
    binary = "gemini"
    package = "@google/gemini-cli"
    session_missing_exit_code = _EXIT_SESSION_MISSING
    session_missing_pattern = re.compile(
        r"error resuming session|invalid session identifier|no previous sessions found",
        re.IGNORECASE,
    )
    stderr_noise = (
        "Warning: 256-color support not detected",
        "YOLO mode is enabled",
        "Ripgrep is not available",
        "[STARTUP]",
    )

    def build_command(self, turn: CliTurn) -> Command:
        options = turn.options
        argv = [self.binary, "--output-format", "stream-json"]
        if options.model:
            argv += ["--model", options.model]
        if options.dangerously_skip_permissions:
            argv.append("--approval-mode=yolo")
        argv.append("--skip-trust")
        if turn.session_id:
            argv += ["--resume", turn.session_id]
        stdin = None
        if not self.prompt_fits_argv(turn.prompt):
            # gemini prepends stdin to the -p text; an empty -p keeps it headless.
            stdin = turn.prompt
            argv.append("--prompt=")
        elif turn.prompt.startswith("-"):
            argv.append(f"--prompt={turn.prompt}")  # `-p -x…` would read as an option
        else:
            argv += ["-p", turn.prompt]
        argv += options.extra_args
        return Command(argv, stdin=stdin)

    def new_parser(self) -> GeminiParser:
        return GeminiParser()

    def prepare_env(
        self, turn: CliTurn, env: dict[str, str], turn_files: contextlib.ExitStack
    ) -> None:
        if not turn.mcp_servers:
            return
        if not _running_as_root():
            raise ProviderError(
                self.name,
                "cannot give gemini the step's tools (mcp_proxy): gemini takes extra MCP "
                "servers only from settings files owned by root, and awf is not running as "
                "root",
                hint="Run awf as root (e.g. in a container), or use another agent CLI "
                "(claude, codex, opencode, copilot) for a step with mcp_proxy.",
            )
        source = system_defaults_path(env)
        try:
            defaults = _read_settings(source)
        except (OSError, ValueError) as exc:
            raise ProviderError(
                self.name, f"cannot add MCP servers to gemini's system defaults {source}: {exc}"
            ) from None
        folder = _root_only_folder()
        if folder is None:
            raise ProviderError(
                self.name,
                "cannot give gemini the step's tools (mcp_proxy): found no folder that "
                "only root may write to (and all folders above it) for its settings file",
                hint="Set XDG_RUNTIME_DIR to such a folder.",
            )
        text = json.dumps(with_mcp_servers(defaults, turn.mcp_servers))
        fd, name = tempfile.mkstemp(dir=folder, prefix="gemini-defaults-", suffix=".json")
        turn_files.callback(_remove, name)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        env[DEFAULTS_VARIABLE] = name


def system_defaults_path(env: dict[str, str]) -> Path:
    """The system defaults file gemini reads with this environment (as gemini finds it)."""
    if env.get(DEFAULTS_VARIABLE):
        return Path(env[DEFAULTS_VARIABLE])
    if env.get(SETTINGS_VARIABLE):
        return Path(env[SETTINGS_VARIABLE]).parent / "system-defaults.json"
    if sys.platform == "darwin":
        return Path("/Library/Application Support/GeminiCli/system-defaults.json")
    if sys.platform == "win32":
        return Path("C:\\ProgramData\\gemini-cli\\system-defaults.json")
    return Path("/etc/gemini-cli/system-defaults.json")


def with_mcp_servers(
    settings: dict[str, Any], servers: tuple[McpServerSpec, ...]
) -> dict[str, Any]:
    """Gemini `settings` with `servers` added to `mcpServers`, trusted (no approval)."""
    entries = dict(settings.get("mcpServers") or {})
    for server in servers:
        entries[server.name] = {
            **mcp_server_entry(server),
            "trust": True,
            "timeout": MCP_TOOL_TIMEOUT_SECONDS * 1000,  # ms, per tool call
        }
    return {**settings, "mcpServers": entries}


def _read_settings(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    data = json.loads(text) if text.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _root_only_folder() -> Path | None:
    """A private folder that gemini accepts a system settings file in: it and every
    folder above it owned by root and writable by no one else (tmp folders are not)."""
    candidates = [os.environ.get("XDG_RUNTIME_DIR"), str(Path.home() / ".cache" / "awf-nb")]
    for candidate in filter(None, candidates):
        folder = Path(candidate)
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        if all(_root_only(path) for path in (folder, *folder.parents)):
            return folder
    return None


def _root_only(path: Path) -> bool:
    try:
        stat = path.stat()
    except OSError:
        return False
    return stat.st_uid == 0 and not stat.st_mode & 0o022


def _running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


class GeminiParser(OutputParser):
    """Reads `gemini --output-format stream-json` events (and the `json` document)."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._segment = 0  # bumped by each tool call, to separate the text around it
        self._result: dict[str, Any] | None = None
        self._errors: list[str] = []

    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]:
        kind = event.get("type")
        if kind == "init":
            return [] if self.session_id else self.found_session(event.get("session_id"))
        if kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if not isinstance(content, str):
                return []
            self._parts.append(content)
            return self.text.delta(self._segment, content)
        if kind == "tool_use":
            self._segment += 1
            name = str(event.get("tool_name", "tool"))
            return [ToolUse(name, short_argument(event.get("parameters")))]
        if kind == "error":
            message = str(event.get("message", "")).strip()
            self._errors.append(message)
            return [Notice(f"gemini: {message}")] if message else []
        if kind == "result":
            self._result = event
            return []
        if kind is None and "response" in event:
            return self._json_document(event)
        return []

    def _json_document(self, document: dict[str, Any]) -> list[ProviderEvent]:
        """`--output-format json`: one object with `session_id`, `response`, `stats`."""
        events = self.found_session(document.get("session_id"))
        response = document.get("response")
        if isinstance(response, str):
            self._parts.append(response)
            events += self.text.delta("document", response)
        error = document.get("error")
        self._result = {
            "status": "error" if error else "success",
            "error": error,
            "stats": _document_stats(document.get("stats")),
        }
        return events

    def outcome(self) -> TurnOutcome:
        result = self._result
        if result is None:
            return TurnOutcome(error="; ".join(self._errors))
        ok = result.get("status") == "success"
        error = ""
        if not ok:
            details = result.get("error")
            message = details.get("message") if isinstance(details, dict) else details
            error = readable_error(str(message or f"status {result.get('status')}"))
        return TurnOutcome(
            text="".join(self._parts) if ok else "",
            ok=ok,
            error=error,
            usage=_usage(result.get("stats")),
        )


def _usage(stats: Any) -> Usage | None:
    if not isinstance(stats, dict):
        return None
    prompt, output = stats.get("input_tokens"), stats.get("output_tokens")
    if not isinstance(prompt, int) or not isinstance(output, int):
        return None
    return Usage(input_tokens=prompt, output_tokens=output)


def _document_stats(stats: Any) -> dict[str, int]:
    """Token totals over the per-model figures of the `json` output format."""
    totals = {"input_tokens": 0, "output_tokens": 0}
    models = stats.get("models") if isinstance(stats, dict) else None
    for model in (models or {}).values():
        tokens = model.get("tokens") if isinstance(model, dict) else None
        if isinstance(tokens, dict):
            totals["input_tokens"] += usage_count(tokens.get("prompt"))
            totals["output_tokens"] += usage_count(tokens.get("candidates"))
    return totals
