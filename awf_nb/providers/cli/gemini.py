"""The `gemini` provider: Google's Gemini CLI (`@google/gemini-cli`).

Command: `gemini --output-format stream-json [--model M] [--approval-mode=yolo]
--skip-trust [--resume ID] -p P [extra_args…]`, the system prompt prefixed to the first
prompt. `--skip-trust` is required: in an untrusted folder a headless run exits 55 and
yolo mode is silently dropped. The reply is the assistant `message` deltas joined with
"" (AWF joins them with newlines and breaks words apart: a bug we do not copy).
"""

from __future__ import annotations

import re
from typing import Any

from awf_nb.engine.ports import Notice, ProviderEvent, ToolUse, Usage
from awf_nb.providers.cli.base import (
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    readable_error,
    short_argument,
)

# Exit status of a headless gemini whose --resume names no known session.
_EXIT_SESSION_MISSING = 42


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
            totals["input_tokens"] += int(tokens.get("prompt") or 0)
            totals["output_tokens"] += int(tokens.get("candidates") or 0)
    return totals
