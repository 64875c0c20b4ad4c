"""The shared runner behind the agent-CLI providers (claude, gemini, codex, opencode, copilot,
mistral_vibe).

An agent CLI keeps its own conversation; we run it once per turn and resume it by session
id. This module does everything the five CLIs have in common: validating the step's
`options`, composing the prompt (system-prompt prefix, history replay when there is no id
to resume), starting the process without a shell in its own process group, reading its
NDJSON stdout line by line *as it arrives* while stderr is drained concurrently, turning
failures into `ProviderError`s that carry the CLI's own words, and killing the whole
process group on cancel or timeout.

A concrete provider supplies three things: how to build the command line
(`build_command`), how to read its output (`new_parser`, an `OutputParser`), and how the
CLI says "unknown session" (`session_missing_pattern`). MCP servers a turn brings
(`mcp_proxy`: awf serving the step's tools) reach the CLI through its own MCP flags in
`build_command`, or through its configuration in `prepare_env` when that must be merged
with the user's own (an environment variable, a settings file written for the turn).

Why one module: every CLI provider is this runner with three pieces of its own; the run of
one process (`_Run`: start, read, drain stderr, kill the group) and the error texts it
produces are shared by all six and change together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from awf_nb.engine.ports import (
    Final,
    McpServerSpec,
    Message,
    Notice,
    ProviderEvent,
    SessionId,
    TextDelta,
    TurnRequest,
    Usage,
)
from awf_nb.engine.process import EOF_GRACE_SECONDS, KILL_GRACE_SECONDS, ProcessGroup
from awf_nb.engine.reply_limits import DEFAULT_MAX_REPLY_BYTES, token_count
from awf_nb.errors import EXIT_USER, ProviderError
from awf_nb.providers.options import OptionsModel, parse_options, unknown_options

# One NDJSON line can carry a whole file the agent read; 16 MiB keeps us clear of that.
# A step raises it with `options.max_event_bytes` (up to MAX_EVENT_BYTES_CEILING): a longer
# line is skipped, said in a notice, and named in the error if the turn then fails.
STDOUT_LINE_LIMIT = 16 * 1024 * 1024
MAX_EVENT_BYTES_CEILING = 1024 * 1024 * 1024
SKIPPED_LINE_NOTICES = 3  # notices per turn for skipped lines; later ones are only counted
# How long one call of a served tool may take, for the CLIs that cap it themselves (codex:
# 60 s): awf's tools have their own limits (a command 2 minutes by default, Bash up to 10).
MCP_TOOL_TIMEOUT_SECONDS = 900
# How long an MCP server may take to start and list its tools (a Python process that may
# itself start the MCP servers it proxies), for the CLIs with a shorter default.
MCP_STARTUP_TIMEOUT_SECONDS = 60
# Linux refuses a single argv string over 128 KiB (MAX_ARG_STRLEN); longer prompts (a long
# replayed history) go through stdin for the CLIs that read one there.
ARGV_PROMPT_LIMIT = 100_000
STDERR_TAIL_LINES = 60
STDERR_LINE_CHARS = 2000
MAX_DIAGNOSTIC_LINES = 10_000  # non-JSON stdout lines kept per turn
TOOL_ARGUMENT_WIDTH = 80

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# --- what a provider builds and what a parser reports ---------------------------------------


class CliOptions(OptionsModel):
    """The `options:` of an agent step that uses a CLI provider (others are ignored,
    with a notice)."""

    model: str | None = None
    dangerously_skip_permissions: bool = False
    allowed_tools: tuple[str, ...] = Field(
        (), description="a list of tool names or one comma-separated string"
    )
    extra_args: tuple[str, ...] = Field((), description="a list of strings")
    env: dict[str, str] = Field(
        default_factory=dict, description="a mapping of variable names to values"
    )
    # The bound on one line of the CLI's output (one JSON event), in bytes (None: 16 MiB).
    max_event_bytes: int | None = Field(None, ge=1024, le=MAX_EVENT_BYTES_CEILING)

    @field_validator("model", mode="before")
    @classmethod
    def _blank_model_is_unset(cls, value: Any) -> Any:
        return value or None

    @field_validator("allowed_tools", "extra_args", mode="before")
    @classmethod
    def _words(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return ()
        if isinstance(value, str) and info.field_name == "allowed_tools":
            return tuple(part.strip() for part in value.split(",") if part.strip())
        if isinstance(value, list | tuple) and all(
            isinstance(item, str | int | float) and not isinstance(item, bool) for item in value
        ):
            return tuple(str(item) for item in value)
        return value  # reported as not a list of strings

    @field_validator("env", mode="before")
    @classmethod
    def _env_text(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return {} if value is None else value
        for key in value:
            if not isinstance(key, str) or not key or "=" in key:
                raise ValueError(f"options.env: invalid variable name {key!r}")
        # Scalars become the text a CLI would see; a mapping or list is reported.
        return {
            key: item if isinstance(item, Mapping | list) else _env_value(item)
            for key, item in value.items()
        }


@dataclass(frozen=True, slots=True)
class CliTurn:
    """One turn, ready for a command line: the prompt already carries what it must."""

    prompt: str  # with the system-prompt prefix / replayed transcript when applicable
    system_prompt: str | None  # only for CLIs with a system-prompt flag
    session_id: str | None
    options: CliOptions
    mcp_servers: tuple[McpServerSpec, ...] = ()  # to connect to for this turn (mcp_proxy)


@dataclass(frozen=True, slots=True)
class Command:
    argv: list[str]  # argv[0] is the bare binary name; the runner resolves it on PATH
    stdin: str | None = None  # None: stdin is /dev/null
    env: Mapping[str, str] = field(default_factory=dict)  # defaults the user's env overrides


@dataclass(slots=True)
class TurnOutcome:
    """What a parser concluded once the output ended."""

    text: str = ""
    ok: bool = False
    error: str = ""  # the CLI's own message when it reported a failure (else "")
    usage: Usage | None = None
    session_missing: bool = False  # the CLI said the resumed session does not exist


class OutputParser(ABC):
    """Reads one CLI's NDJSON events for one turn.

    `feed` is called for every JSON object line as it arrives and returns the events to
    stream right away; `outcome` is called once at the end.
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.text = TextJoiner()

    @abstractmethod
    def feed(self, event: dict[str, Any]) -> list[ProviderEvent]: ...

    @abstractmethod
    def outcome(self) -> TurnOutcome: ...

    def found_session(self, session_id: Any) -> list[ProviderEvent]:
        """A SessionId event the first time an id is seen (and again if it changes)."""
        if not isinstance(session_id, str) or not session_id or session_id == self.session_id:
            return []
        self.session_id = session_id
        return [SessionId(session_id)]


class TextJoiner:
    """Streams assistant text, putting a blank line between two different messages."""

    def __init__(self) -> None:
        self._current: object = None
        self._emitted = False

    def delta(self, message_key: object, text: str) -> list[ProviderEvent]:
        if not text:
            return []
        events: list[ProviderEvent] = []
        if self._emitted and message_key != self._current:
            events.append(TextDelta("\n\n"))
        self._current = message_key
        self._emitted = True
        events.append(TextDelta(text))
        return events


class ExecutableNotFound(ProviderError):
    """The CLI is not installed (or not on PATH); says how to install it."""

    def __init__(
        self, provider: str, binary: str, package: str, install: str | None = None
    ) -> None:
        # The spec fixes this wording, which names the provider in its own way.
        message = (
            f'provider "{provider}": executable "{binary}" not found on PATH '
            f"({install or f'npm install -g {package}'})"
        )
        super().__init__(provider, message, exit_code=EXIT_USER, prefixed=False)


# --- the provider ---------------------------------------------------------------------------


class CliProvider(ABC):
    """A provider that runs an agent CLI once per turn and resumes it by session id."""

    session_kind: Literal["history", "session_id"] = "session_id"

    default_name: ClassVar[str]
    binary: ClassVar[str]
    package: ClassVar[str]  # the npm package, for the "not found" message
    # How to install it, for the "not found" message (default: from npm).
    install_command: ClassVar[str | None] = None
    # The step's `options:` this CLI reads (common ones; a CLI may add its own).
    options_model: ClassVar[type[CliOptions]] = CliOptions
    # True: the system prompt has a flag of its own; False: it prefixes the first prompt.
    system_prompt_flag: ClassVar[bool] = False
    supports_allowed_tools: ClassVar[bool] = False
    # How the CLI says a resumed session does not exist (matched on its error and stderr).
    session_missing_pattern: ClassVar[re.Pattern[str] | None] = None
    session_missing_exit_code: ClassVar[int | None] = None
    # stderr lines that are chatter, not an explanation of a failure.
    stderr_noise: ClassVar[tuple[str, ...]] = ()

    kill_grace: float = KILL_GRACE_SECONDS  # from SIGTERM to SIGKILL
    eof_grace: float = EOF_GRACE_SECONDS  # for EOF (and stderr) after the CLI exited

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.default_name
        self._running: set[ProcessGroup] = set()
        self._closed = False
        self._noticed: set[str] = set()

    # -- what each CLI supplies

    @abstractmethod
    def build_command(self, turn: CliTurn) -> Command: ...

    @abstractmethod
    def new_parser(self) -> OutputParser: ...

    def prepare_env(
        self, turn: CliTurn, env: dict[str, str], turn_files: contextlib.ExitStack
    ) -> None:
        """Last changes to the CLI's environment (`env`, already holding the user's own
        variables), e.g. MCP servers merged into a configuration the user may set too.
        Cleanups pushed on `turn_files` run when the turn ends. Nothing by default."""
        return None

    def prepare_command(
        self, command: Command, parser: OutputParser, turn_files: contextlib.ExitStack
    ) -> Command:
        """The command as run, e.g. with a folder made for this turn that the CLI writes a
        report into; callbacks pushed on `turn_files` run when the process has ended (so
        the parser can read the report), before the turn's outcome is decided."""
        return command

    # -- the contract

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        # `turn.tools` is not passed on, on purpose: an agent CLI runs its own tools inside
        # its turn (reported as ToolUse) and never returns calls for awf to run, so turns
        # here never `continue` with tool results. Giving a CLI agent awf's tools is the
        # separate `mcp_proxy` feature (an MCP server awf serves to the CLI).
        options = self._options(turn.options)
        for notice in self._option_notices(turn.options, options):
            yield notice
        # History without a session id is replayed in the prompt (the engine says so).
        cli_turn, _ = self._prepare(turn, options)
        command = self.build_command(cli_turn)
        # The CLI's own defaults first (e.g. IS_SANDBOX), so the user can override them.
        env = {**os.environ, **command.env, **options.env, **_strings(turn.env)}
        parser = self.new_parser()
        streamed = False
        # Files written for this turn (prepare_env) go when it ends, however it ends.
        with contextlib.ExitStack() as turn_files:
            self.prepare_env(cli_turn, env, turn_files)
            command = self.prepare_command(command, parser, turn_files)
            run = _Run(
                self,
                command,
                env,
                Path(turn.working_dir),
                turn.max_reply_bytes,
                options.max_event_bytes or STDOUT_LINE_LIMIT,
            )
            async with contextlib.aclosing(run.lines()) as lines:
                async for line in lines:
                    if isinstance(line, SkippedLine):
                        if len(run.skipped) <= SKIPPED_LINE_NOTICES:
                            yield Notice(f"{self.name}: {run.skipped_message(line)}")
                        continue
                    for event in parse_line(parser, line, run.diagnostics):
                        streamed = streamed or isinstance(event, TextDelta)
                        yield event
        for event in parse_whole_document(parser, run.diagnostics):
            streamed = streamed or isinstance(event, TextDelta)
            yield event
        outcome = parser.outcome()
        self._raise_on_failure(turn, outcome, run)
        if not streamed and outcome.text:
            # e.g. `--output-format json` in extra_args: nothing streamed, show the reply.
            yield TextDelta(outcome.text)
        if outcome.usage is not None:
            yield outcome.usage
        yield Final(outcome.text)

    async def aclose(self) -> None:
        """Kill whatever is still running (a run ended while a turn was in flight).

        A turn whose process starts after this is killed as soon as it starts.
        """
        self._closed = True
        await asyncio.gather(*(group.stop(self.kill_grace) for group in list(self._running)))

    # -- options and prompt

    def _options(self, raw: Mapping[str, Any]) -> CliOptions:
        return parse_options(self.name, self.options_model, raw, ignore_unknown=True)

    def _option_notices(self, raw: Mapping[str, Any], options: CliOptions) -> list[Notice]:
        ignored = sorted(unknown_options(self.options_model, raw))
        if options.allowed_tools and not self.supports_allowed_tools:
            ignored.insert(0, "allowed_tools")
        notices = []
        for key in ignored:
            if key not in self._noticed:
                self._noticed.add(key)
                notices.append(Notice(f"{self.name}: option {key!r} is not supported; ignored"))
        return notices

    def _prepare(self, turn: TurnRequest, options: CliOptions) -> tuple[CliTurn, int]:
        """The prompt this CLI gets, and how many history messages were replayed into it."""
        prompt = turn.prompt
        system_prompt = turn.system_prompt
        replay = [m for m in turn.history if m.role != "system"] if not turn.session_id else []
        if replay:
            if system_prompt is None:
                # A new session is started, so its system prompt must be set up again.
                system_prompt = next((m.content for m in turn.history if m.role == "system"), None)
            prompt = replay_prompt(replay, prompt)
        if system_prompt and not self.system_prompt_flag:
            prompt = f"{system_prompt}\n\n{prompt}"
            system_prompt = None
        cli_turn = CliTurn(
            prompt=prompt,
            system_prompt=system_prompt or None,
            session_id=turn.session_id or None,
            options=options,
            mcp_servers=tuple(turn.mcp_servers),
        )
        return cli_turn, len(replay)

    # -- failures

    def _raise_on_failure(self, turn: TurnRequest, outcome: TurnOutcome, run: _Run) -> None:
        returncode = run.returncode
        if outcome.ok and returncode == 0:
            return
        stderr = run.stderr_summary(self.stderr_noise)
        detail = (
            outcome.error
            or stderr
            or _last_lines(run.diagnostics)
            or f"{self.binary} ended without reporting a result"
        )
        status = _describe_status(returncode)
        if run.skipped and not outcome.ok:
            # The CLI's verdict may be the line that was skipped: say which bound was hit
            # rather than blame the CLI for what it said after it.
            raise ProviderError(
                self.name,
                f"{run.skipped_summary()}, and the turn has no result ({status}): "
                f"{_RAISE_LINE_LIMIT}",
            )
        if turn.session_id and self._session_missing(outcome, returncode, detail, run):
            raise ProviderError(
                self.name,
                f'session "{turn.session_id}" not found, cannot resume it: {detail}',
                hint=(
                    "The session may have been deleted, or made in another working directory "
                    "or by another user (HOME): resumed turns must run where the first one "
                    f"ran (here: {turn.working_dir})."
                ),
            )
        if outcome.ok:  # the CLI reported success but exited with an error status
            raise ProviderError(self.name, f"{status}: {detail}")
        raise ProviderError(self.name, f"{detail} ({status})")

    def _session_missing(
        self, outcome: TurnOutcome, returncode: int | None, detail: str, run: _Run
    ) -> bool:
        if outcome.session_missing or returncode == self.session_missing_exit_code:
            return True
        pattern = self.session_missing_pattern
        if pattern is None:
            return False
        return bool(pattern.search(detail) or pattern.search("\n".join(run.stderr_lines)))

    # -- helpers for subclasses

    @staticmethod
    def prompt_fits_argv(prompt: str) -> bool:
        return len(prompt.encode()) <= ARGV_PROMPT_LIMIT


# --- MCP servers ---------------------------------------------------------------------------


def mcp_server_entry(server: McpServerSpec) -> dict[str, Any]:
    """A stdio server as the `mcpServers` entries of claude, gemini and copilot describe
    it: command, args and (only when there is some) env."""
    entry: dict[str, Any] = {"command": server.command, "args": list(server.args)}
    if server.env:
        entry["env"] = dict(server.env)
    return entry


# --- prompt helpers -------------------------------------------------------------------------


def replay_prompt(history: Iterable[Message], prompt: str) -> str:
    """The new message preceded by a transcript of the conversation so far.

    Tool calls made with awf's own tools (a step that ran on an HTTP or local provider
    before, e.g. through `continue_from`) are shown as lines the agent can read: the calls
    under the assistant's message, each result as a `Tool <name>:` entry."""
    transcript = "\n\n".join(_replayed(m) for m in history)
    return (
        "Here is our conversation so far (replayed because the previous session could not "
        "be resumed):\n\n"
        f"<conversation>\n{transcript}\n</conversation>\n\n"
        f"Continue the conversation. My new message:\n\n{prompt}"
    )


_SPEAKERS = {"user": "User", "assistant": "Assistant"}


def _replayed(message: Message) -> str:
    """One history message as transcript text."""
    if message.role == "tool":
        return f"Tool {message.name or 'result'}: {message.content}"
    lines = [f"{_SPEAKERS.get(message.role, message.role)}: {message.content}"]
    if message.tool_calls:
        if not message.content:
            lines = [f"{_SPEAKERS.get(message.role, message.role)}:"]
        lines += [f"[called {call.name}({call.arguments})]" for call in message.tool_calls]
    return "\n".join(lines)


def object_at(data: dict[str, Any], key: str) -> dict[str, Any]:
    """`data[key]` when it is a JSON object, else an empty one: a CLI's event may lack a
    field or hold something else there."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def short_argument(value: Any, keys: Iterable[str] = ()) -> str:
    """A one-line, bounded summary of a tool's input, for `[tool: name(arg)]`."""
    if isinstance(value, Mapping):
        for key in (*keys, "command", "file_path", "path", "pattern", "url", "query"):
            if isinstance(value.get(key), str) and value[key].strip():
                value = value[key]
                break
    if isinstance(value, str):
        text = value
    elif value in (None, {}, []):
        text = ""
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text.split())
    if len(text) > TOOL_ARGUMENT_WIDTH:
        text = text[: TOOL_ARGUMENT_WIDTH - 1] + "…"
    return text


def readable_error(message: str) -> str:
    """An API error message out of the JSON body some CLIs pass through verbatim."""
    text = message.strip()
    start = text.find("{")
    if start < 0:
        return text
    try:
        body = json.loads(text[start:].rstrip("]").strip())
    except ValueError:
        return text
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return text
    parts = [error["message"]]
    code = error.get("code") or error.get("status")
    if isinstance(code, int):
        parts.append(f"(HTTP {code})")
    elif isinstance(error.get("type"), str):
        parts.append(f"({error['type']})")
    prefix = text[:start].strip().strip("[").strip()
    return " ".join([prefix, *parts] if prefix else parts)


# --- parsing --------------------------------------------------------------------------------


def parse_line(parser: OutputParser, line: str, diagnostics: list[str]) -> list[ProviderEvent]:
    """Feed one stdout line to `parser`; a line that is not a JSON object goes to `diagnostics`."""
    text = line.strip()
    if not text:
        return []
    try:
        event = json.loads(text)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        # A banner or warning on stdout: kept for error messages, within bounds.
        if isinstance(diagnostics, DiagnosticLines):
            diagnostics.keep(text)
            return []
        if len(diagnostics) >= MAX_DIAGNOSTIC_LINES:
            del diagnostics[: MAX_DIAGNOSTIC_LINES // 10]
        diagnostics.append(text)
        return []
    return parser.feed(event)


class DiagnosticLines(list[str]):
    """A turn's stdout lines that are not JSON events (banners, warnings, a pretty-printed
    JSON document), kept for error messages and `parse_whole_document`: at most
    `MAX_DIAGNOSTIC_LINES` lines and `max_chars` characters (the turn's reply bound), the
    oldest dropped first. A CLI printing garbage without end costs no more than that."""

    def __init__(self, max_chars: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        super().__init__()
        self.max_chars = max_chars
        self.chars = 0

    def keep(self, line: str) -> None:
        line = line[: self.max_chars]
        self.append(line)
        self.chars += len(line)
        drop = 0
        while self.chars > self.max_chars or len(self) - drop > MAX_DIAGNOSTIC_LINES:
            self.chars -= len(self[drop])
            drop += 1
        if drop:
            del self[:drop]

    def clear(self) -> None:
        super().clear()
        self.chars = 0


def parse_whole_document(parser: OutputParser, diagnostics: list[str]) -> list[ProviderEvent]:
    """Events from a pretty-printed JSON document (`--output-format json` in extra_args)."""
    if not diagnostics or not diagnostics[0].startswith("{"):
        return []
    try:
        document = json.loads("\n".join(diagnostics))
    except ValueError:
        return []
    if not isinstance(document, dict):
        return []
    diagnostics.clear()
    return parser.feed(document)


def usage_count(value: Any) -> int:
    """A token count from a CLI's output to add up; what is no count (`NaN`, `1e400`, a
    negative or fractional number, text) adds nothing, instead of crashing the turn."""
    return token_count(value) or 0


def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):  # YAML `true` means the string "true" to a CLI
        return "true" if value else "false"
    return str(value)


def _strings(env: Mapping[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in env.items()}


def _last_lines(lines: list[str], count: int = 3) -> str:
    return " | ".join(line[:500] for line in lines[-count:])


def _describe_status(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


# --- the process ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """An output line longer than the turn's bound, read past and dropped."""

    size: int  # its length in bytes, newline excluded


_RAISE_LINE_LIMIT = (
    f"raise the bound with options.max_event_bytes (at most {MAX_EVENT_BYTES_CEILING:,})"
)


class _Run:
    """One CLI process: started in its own group, read line by line, always cleaned up."""

    def __init__(
        self,
        provider: CliProvider,
        command: Command,
        env: dict[str, str],
        cwd: Path,
        max_chars: int = DEFAULT_MAX_REPLY_BYTES,
        line_limit: int = STDOUT_LINE_LIMIT,
    ) -> None:
        self.provider = provider
        self.line_limit = line_limit
        self.skipped: list[SkippedLine] = []  # bounded by the output: one per over-long line
        self.command = command
        self.env = env
        self.cwd = cwd
        self.returncode: int | None = None
        self.diagnostics = DiagnosticLines(max_chars)
        self.stderr_lines: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

    async def lines(self) -> AsyncGenerator[str | SkippedLine]:
        provider = self.provider
        group = await self._spawn()
        provider._running.add(group)
        if provider._closed:  # aclose() ran while the process was starting
            await group.stop(provider.kill_grace)
            provider._running.discard(group)
            raise ProviderError(provider.name, "the provider was closed; turn not run")
        process = group.process
        helpers = [asyncio.create_task(self._drain_stderr(process))]
        if self.command.stdin is not None:
            helpers.append(asyncio.create_task(_feed_stdin(process, self.command.stdin)))
        try:
            # Something the CLI started may hold stdout after the CLI exited: the group
            # stops it after eof_grace, which ends this loop.
            async for line in self._stdout_lines(process):
                yield line
            self.returncode = await group.leader_exit()
            # stderr may still hold the explanation of a failure: let it arrive.
            await asyncio.wait(helpers, timeout=provider.eof_grace)
        finally:
            await group.close(provider.kill_grace)
            for task in helpers:
                task.cancel()
            provider._running.discard(group)

    async def _stdout_lines(
        self, process: asyncio.subprocess.Process
    ) -> AsyncIterator[str | SkippedLine]:
        """The CLI's stdout line by line; a line over `line_limit` bytes is read past in
        pieces of at most that size (never held whole) and reported as a `SkippedLine`."""
        stdout = process.stdout
        assert stdout is not None
        skipping = 0  # bytes of the over-long line read past so far
        while True:
            try:
                raw = await stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                raw = end.partial  # the last line has no newline, or there is none
            except asyncio.LimitOverrunError as over:
                # The buffer holds `consumed` bytes of the line (without its newline): drop
                # them and go on reading the same line.
                await stdout.readexactly(over.consumed)
                skipping += over.consumed
                continue
            if skipping:
                skipped = SkippedLine(skipping + len(raw.rstrip(b"\n")))
                skipping = 0
                self.skipped.append(skipped)
                yield skipped
            elif raw:
                yield raw.decode("utf-8", errors="replace")
            if not raw.endswith(b"\n"):
                return

    def skipped_message(self, line: SkippedLine) -> str:
        return (
            f"an output line of {line.size:,} bytes was skipped, over the bound of "
            f"{self.line_limit:,} bytes per event line; {_RAISE_LINE_LIMIT}"
        )

    def skipped_summary(self) -> str:
        """What the skipped lines were, for the turn's error: the bound and its value."""
        largest = max(line.size for line in self.skipped)
        if len(self.skipped) == 1:
            lines = f"an output line of {largest:,} bytes was skipped"
        else:
            lines = f"{len(self.skipped)} output lines (the longest {largest:,} bytes) were skipped"
        return f"{lines}, over the bound of {self.line_limit:,} bytes per event line"

    async def _spawn(self) -> ProcessGroup:
        provider = self.provider
        executable = shutil.which(self.command.argv[0], path=self.env.get("PATH", os.defpath))
        if executable is None:
            raise ExecutableNotFound(
                provider.name, provider.binary, provider.package, provider.install_command
            )
        if not self.cwd.is_dir():
            raise ProviderError(provider.name, f"working directory {self.cwd} does not exist")
        try:
            return await ProcessGroup.start(
                [executable, *self.command.argv[1:]],
                cwd=self.cwd,
                env=self.env,
                stdin=self.command.stdin is not None,
                limit=self.line_limit,
                eof_grace=provider.eof_grace,
                kill_grace=provider.kill_grace,
                # Nothing a turn started (the CLI's tools' processes) outlives the turn.
                contain=True,
            )
        except OSError as error:
            reason = error.strerror or str(error)
            raise ProviderError(provider.name, f"cannot start {executable}: {reason}") from error

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while True:
            try:
                raw = await process.stderr.readline()
            except ValueError:  # an over-long line was dropped; keep draining
                continue
            if not raw:
                return
            line = _ANSI_ESCAPE.sub("", raw.decode("utf-8", errors="replace")).strip()
            if line:  # cut: only the start of a line is ever shown
                self.stderr_lines.append(line[:STDERR_LINE_CHARS])

    def stderr_summary(self, noise: tuple[str, ...]) -> str:
        """The CLI's explanation on stderr: its first `Error…` line, else its last lines."""
        lines = [line for line in self.stderr_lines if not line.startswith(noise)]
        for line in lines:
            if re.match(r"(error|fatal)\b", line, re.IGNORECASE):
                return line[:1000]
        return _last_lines(lines)


async def _feed_stdin(process: asyncio.subprocess.Process, text: str) -> None:
    assert process.stdin is not None
    try:
        process.stdin.write(text.encode())
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the CLI exited before reading it all; its exit status tells the story
    finally:
        # Closing matters: codex and opencode wait for EOF on an open pipe.
        with contextlib.suppress(OSError):
            process.stdin.close()
