"""The `mistral_vibe` provider: Mistral's Vibe CLI (`mistral-vibe` on PyPI, binary `vibe`).

Command: `vibe -p P --output streaming --output-dir DIR [--resume ID] [--agent A]
[--max-turns N] [--max-tokens N] [--max-price X] [--workdir W] [--enabled-tools T]…
[--add-dir D]… [--trust] [extra_args…]`, the system prompt prefixed to the first prompt
(Vibe has no flag for one). A prompt too long for argv goes on stdin (`-p` without a
value reads it there); one starting with `-` is passed as `--prompt=P`. The model is
Vibe's `active_model` setting, given as `VIBE_ACTIVE_MODEL` (Vibe reads every setting
from a `VIBE_*` variable too, JSON for lists: `VIBE_PROVIDERS`, `VIBE_MODELS`).

`--output streaming` prints one JSON object per session entry as it completes (no token
deltas): `type: "message"` with `role` and `content: [{type: "text", text}]`, and
`type: "effect"` for a tool the agent ran (`detail.toolName`, `detail.input`). Every
entry carries `sessionId`; `--resume ID` continues that session (kept in `$VIBE_HOME`,
default `~/.vibe`, whatever the working directory). The reply is the last assistant
message. `--output-dir` makes Vibe write `export.json` on every exit, in a folder made
for the turn and removed after it: its `outcome` (`finished`, `turn_limit`,
`infrastructure_failure`, `usage_error`…), `error.message`, and token `usage` and
`cost_usd` are how the turn is judged and counted (exit status 0 when finished, 1 for a
usage error such as an unknown session, 2 for a failed model call, 3 for a limit).

Options beyond the common ones (AWF's): `agent_profile` (`--agent`: Vibe's built-in
`ask`, `accept-edits`, `smart-approve`, `auto-approve`, or one of `~/.vibe/agents/`),
`max_turns`, `max_tokens`, `max_price`, `enabled_tools`, `add_dirs`, `workdir` (no `..`),
`trust`; `dangerously_skip_permissions` means `--agent auto-approve`; `output_format` is
accepted for AWF's sake — the reply is read from the streaming output whatever it says.
Unlike AWF, no `--agent` is passed unless asked for: Vibe 3 has no agent named `default`;
and `mcp_proxy` is refused (AWF writes a Vibe home of its own for it).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from awf_nb.engine.ports import ProviderEvent, ToolUse, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers.cli.base import (
    CliOptions,
    CliProvider,
    CliTurn,
    Command,
    OutputParser,
    TurnOutcome,
    object_at,
    short_argument,
)

EXPORT_FILE = "export.json"
MAX_EXPORT_BYTES = 4 << 20  # the report holds the effective config: small, but bounded
_ARGUMENT_KEYS = ("filePath", "command", "pattern", "url")  # what Vibe's tools take


class VibeOptions(CliOptions):
    agent_profile: str | None = None
    max_turns: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_price: float | None = Field(None, ge=0, allow_inf_nan=False)
    enabled_tools: tuple[str, ...] = Field((), description="a list of tool names")
    add_dirs: tuple[str, ...] = Field((), description="a list of folders")
    workdir: str | None = None
    trust: bool = False
    output_format: Literal["text", "json", "streaming"] | None = None

    @field_validator("max_price", mode="before")
    @classmethod
    def _price_number(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("enabled_tools", "add_dirs", mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
            return tuple(value)
        return value  # reported as not a list of strings

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str | None) -> str | None:
        return None if value is None else _clean_path("workdir", value)

    @field_validator("add_dirs")
    @classmethod
    def _add_dirs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_clean_path("add_dirs", item) for item in value)

    @model_validator(mode="after")
    def _approval(self) -> VibeOptions:
        profile = self.agent_profile
        if self.dangerously_skip_permissions and profile and profile != "auto-approve":
            raise ValueError(
                "agent_profile conflicts with dangerously_skip_permissions: expected "
                f"auto-approve, got {profile}"
            )
        return self


def _clean_path(option: str, path: str) -> str:
    if not path.strip():
        raise ValueError(f"{option}: a path cannot be empty")
    if ".." in Path(path).parts:
        raise ValueError(f"{option}: {path!r} must not contain '..'")
    return str(Path(path))


class MistralVibeProvider(CliProvider):
    default_name = "mistral_vibe"
    binary = "vibe"
    package = "mistral-vibe"
    install_command = "pip install mistral-vibe, or uv tool install mistral-vibe"
    options_model: ClassVar[type[CliOptions]] = VibeOptions
    stderr_noise = ("Reading API keys from the system keyring",)

    def build_command(self, turn: CliTurn) -> Command:
        options = turn.options
        assert isinstance(options, VibeOptions)
        if turn.mcp_servers:
            raise ProviderError(
                self.name,
                "mcp_proxy is not supported with mistral_vibe in awf-nb: its tools would "
                "need Vibe's own MCP configuration; use another agent CLI for this step",
            )
        argv = [self.binary]
        stdin = None
        if not self.prompt_fits_argv(turn.prompt):
            argv.append("-p")  # without a value: the prompt is read from stdin
            stdin = turn.prompt
        else:
            argv.append(f"--prompt={turn.prompt}")  # `=`: a prompt may start with `-`
        argv += ["--output", "streaming"]
        if turn.session_id:
            argv += ["--resume", turn.session_id]
        profile = "auto-approve" if options.dangerously_skip_permissions else options.agent_profile
        if profile:
            argv += ["--agent", profile]
        if options.max_turns is not None:
            argv += ["--max-turns", str(options.max_turns)]
        if options.max_tokens is not None:
            argv += ["--max-tokens", str(options.max_tokens)]
        if options.max_price is not None:
            argv += ["--max-price", f"{options.max_price:g}"]
        if options.workdir:
            argv += ["--workdir", options.workdir]
        for tool in options.enabled_tools:
            argv += ["--enabled-tools", tool]
        for folder in options.add_dirs:
            argv += ["--add-dir", folder]
        if options.trust:
            argv.append("--trust")
        env = {"VIBE_ACTIVE_MODEL": options.model} if options.model else {}
        return Command([*argv, *options.extra_args], stdin=stdin, env=env)

    def prepare_command(
        self, command: Command, parser: OutputParser, turn_files: contextlib.ExitStack
    ) -> Command:
        folder = Path(tempfile.mkdtemp(prefix="awf-vibe-"))  # private (0700)
        turn_files.callback(shutil.rmtree, folder, ignore_errors=True)
        assert isinstance(parser, VibeParser)
        turn_files.callback(parser.read_report, folder / EXPORT_FILE)  # runs first
        argv = [*command.argv[:1], "--output-dir", str(folder), *command.argv[1:]]
        return Command(argv, stdin=command.stdin, env=command.env)

    def new_parser(self) -> VibeParser:
        return VibeParser()


class VibeParser(OutputParser):
    """Reads `vibe --output streaming` entries, then the turn's `export.json`."""

    def __init__(self) -> None:
        super().__init__()
        self._reply = ""
        self._replied = False
        self._announced: set[str] = set()
        self._report: dict[str, Any] | None = None
        self._report_problem = ""

    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]:
        events = [] if self.session_id else self.found_session(event.get("sessionId"))
        if event.get("generationStatus", "completed") != "completed":
            return events
        kind, entry_id = event.get("type"), str(event.get("id", ""))
        if kind == "message" and event.get("role") == "assistant":
            text = _text(event.get("content"))
            if text:
                self._reply, self._replied = text, True
                events += self.text.delta(entry_id, text)
        elif kind == "effect" and entry_id not in self._announced:
            self._announced.add(entry_id)
            detail = object_at(event, "detail")
            name = str(detail.get("toolName") or event.get("title") or "tool")
            events.append(ToolUse(name, short_argument(detail.get("input"), _ARGUMENT_KEYS)))
        return events

    def read_report(self, path: Path) -> None:
        """Read `export.json` (called when the process has ended, before the folder goes)."""
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_EXPORT_BYTES + 1)
        except FileNotFoundError:
            return  # no report: the process did not get that far
        except OSError as exc:
            self._report_problem = f"cannot read vibe's report: {exc.strerror or exc}"
            return
        if len(data) > MAX_EXPORT_BYTES:
            self._report_problem = "vibe's report is larger than 4 MiB"
            return
        try:
            report = json.loads(data)
        except ValueError:
            self._report_problem = "vibe's report is not JSON"
            return
        if isinstance(report, dict):
            self._report = report
            if not self.session_id and isinstance(report.get("session_id"), str):
                self.session_id = report["session_id"]

    def outcome(self) -> TurnOutcome:
        report = self._report
        if report is None:
            # No report (killed, or an older vibe): a reply is success, the exit status judges.
            return TurnOutcome(text=self._reply, ok=self._replied, error=self._report_problem)
        result = str(report.get("outcome") or "")
        error = object_at(report, "error")
        message = str(error.get("message") or "").strip()
        usage = _usage(report.get("usage"), report.get("cost_usd"))
        if result == "finished" and not message:
            return TurnOutcome(text=self._reply, ok=True, usage=usage)
        if not message:
            stop = report.get("stop_reason")
            message = f"vibe stopped: {result or 'no outcome'}" + (f" ({stop})" if stop else "")
            if result == "turn_limit":
                message += "; raise options.max_turns"
        missing = message.startswith("Session not found")
        return TurnOutcome(text=self._reply, error=message, usage=usage, session_missing=missing)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    blocks = [block for block in content if isinstance(block, dict) and block.get("type") == "text"]
    return "".join(block["text"] for block in blocks if isinstance(block.get("text"), str))


def _usage(usage: Any, cost: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, output = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(prompt, int) or not isinstance(output, int) or not (prompt or output):
        return None
    cost_usd = float(cost) if isinstance(cost, int | float) and cost else None
    return Usage(input_tokens=prompt, output_tokens=output, cost_usd=cost_usd)
