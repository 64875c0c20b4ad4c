"""`provider: acp`: any ACP agent (Claude Code's or Gemini's ACP adapters, `awf acp`, …) as
a step's agent. awf is the ACP *client*, on the official SDK (the `acp` extra).

The agent process is started once per run and step (in its own process group, through
the project's one supervisor, `engine/process.py`), `initialize`d, and each conversation
gets an ACP session (`session/new`); each turn is a `session/prompt`. Replies stream as
`TextDelta`s, the agent's tool calls become `ToolUse` notices, its permission requests are
answered by the step's confirm policy (`TurnRequest.ask_permission`: the person, `--yes`,
or refused), and its file reads and writes (`fs/read_text_file`, `fs/write_text_file`) are
confined to the step's working directory by the built-in tools' rules (`tools/paths.py`).
`continue_from` and `awf resume` give a session id: `session/load` when the agent can, else
a new session with the earlier turns replayed in the prompt.

Options: `command` (argv, required), `cwd` (default: the run's folder), `env`,
`startup_timeout` (seconds to answer `initialize` and `session/new`; default 60),
`turn_timeout` (seconds a turn may take; default: the step's `timeout`, else none),
`max_message_bytes` (the longest protocol line read; default 16 MiB).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from awf_nb.engine.ports import (
    Final,
    ProviderEvent,
    SessionId,
    TextDelta,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.engine.process import ProcessGroup
from awf_nb.engine.summary import format_duration, format_limit
from awf_nb.errors import ProviderError
from awf_nb.providers.options import OptionsModel, parse_options
from awf_nb.workflow.files import MAX_FILE_BYTES, read_text_capped

NAME = "acp"
DEFAULT_STARTUP_TIMEOUT = 60.0
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class AcpOptions(OptionsModel):
    command: list[str] = Field(min_length=1)
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    startup_timeout: float = Field(DEFAULT_STARTUP_TIMEOUT, gt=0)
    turn_timeout: float | None = Field(None, gt=0)
    max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, ge=1024)


class _Client:
    """What the agent may ask of awf during a turn (the SDK calls these)."""

    def __init__(self, root: Path) -> None:
        from awf_nb.tools.paths import Workspace

        self.workspace = Workspace(root)
        self.turn: _Turn | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.turn is not None:
            self.turn.updates.put_nowait(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        turn = self.turn
        name = tool_call.title or tool_call.tool_call_id or "tool"
        raw = tool_call.raw_input
        arguments = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        allowed = False
        if turn is not None and turn.ask is not None:
            allowed = await turn.ask(tool_call.tool_call_id, name, arguments)
        wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        for option in options:
            if option.kind in wanted:
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        from acp import RequestError
        from acp.schema import ReadTextFileResponse

        from awf_nb.tools.output import ToolError

        try:
            real = self.workspace.resolve(path)
            text = read_text_capped(real, MAX_FILE_BYTES)
        except ToolError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        except OSError as exc:
            raise RequestError.invalid_params(
                {"message": f"cannot read {path}: {exc.strerror or exc}"}
            ) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit if limit else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        from acp import RequestError
        from acp.schema import WriteTextFileResponse

        from awf_nb.tools.output import ToolError

        if len(content.encode()) > MAX_FILE_BYTES:
            raise RequestError.invalid_params(
                {"message": f"{path}: larger than {MAX_FILE_BYTES} bytes, not written"}
            )
        try:
            real = self.workspace.resolve(path)
            real.parent.mkdir(parents=True, exist_ok=True)
            fd = self.workspace.open_inside(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
        except ToolError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        except OSError as exc:
            raise RequestError.invalid_params(
                {"message": f"cannot write {path}: {exc.strerror or exc}"}
            ) from None
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass


class _Turn:
    def __init__(self, ask: Any) -> None:
        self.ask = ask
        self.updates: asyncio.Queue[Any] = asyncio.Queue()


class _Agent:
    """One running agent process and its connection."""

    def __init__(self, group: ProcessGroup, conn: Any, client: _Client, can_load: bool) -> None:
        self.group, self.conn, self.client, self.can_load = group, conn, client, can_load
        self.sessions: set[str] = set()
        self.lock = asyncio.Lock()  # one turn at a time per agent process


class AcpProvider:
    """Any ACP agent as a step's provider."""

    name = NAME
    session_kind: Literal["session_id"] = "session_id"

    def __init__(self) -> None:
        self._agents: dict[tuple[str, str], _Agent] = {}

    async def _agent(self, turn: TurnRequest, options: AcpOptions) -> _Agent:
        key = (turn.step, turn.speaker)
        agent = self._agents.get(key)
        if agent is not None and agent.group.returncode is None:
            return agent
        from acp import PROTOCOL_VERSION, connect_to_agent
        from acp.schema import ClientCapabilities, FileSystemCapabilities

        cwd = Path(options.cwd) if options.cwd else turn.working_dir
        env = {**os.environ, **turn.env, **options.env}
        try:
            group = await ProcessGroup.start(
                options.command,
                cwd=cwd,
                env=env,
                stdin=True,
                limit=options.max_message_bytes,
                contain=True,
            )
        except OSError as exc:
            raise ProviderError(
                NAME, f"cannot start {options.command[0]}: {exc.strerror or exc}"
            ) from None
        client = _Client(cwd)
        process = group.process
        assert process.stdin is not None and process.stdout is not None
        # The SDK's Client protocol lists every optional capability (terminals, elicitation,
        # extensions); awf offers files and permissions only, and the SDK's router answers
        # "method not found" for a handler an object does not have.
        conn = connect_to_agent(client, process.stdin, process.stdout)  # type: ignore[arg-type]
        try:
            init = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
                    ),
                ),
                options.startup_timeout,
            )
        except BaseException as exc:
            await _close(conn, group)
            if isinstance(exc, TimeoutError):
                raise ProviderError(
                    NAME,
                    f"{options.command[0]} did not answer initialize within "
                    f"{format_duration(options.startup_timeout)} (options.startup_timeout)",
                ) from None
            if isinstance(exc, Exception):
                raise ProviderError(
                    NAME, f"{options.command[0]} failed to start: {exc}{await _stderr(group)}"
                ) from None
            raise
        caps = init.agent_capabilities
        agent = _Agent(group, conn, client, bool(caps and caps.load_session))
        self._agents[key] = agent
        return agent

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        options = parse_options(NAME, AcpOptions, turn.options)
        agent = await self._agent(turn, options)
        async with agent.lock:
            async for event in self._turn(agent, turn, options):
                yield event

    async def _session(
        self, agent: _Agent, turn: TurnRequest, options: AcpOptions
    ) -> tuple[str, bool]:
        """The session id for this turn, and whether earlier turns must be replayed."""
        cwd = str(Path(options.cwd) if options.cwd else turn.working_dir)
        wanted = turn.session_id
        if wanted and wanted in agent.sessions:
            return wanted, False
        if wanted and agent.can_load:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    agent.conn.load_session(cwd=cwd, session_id=wanted, mcp_servers=[]),
                    options.startup_timeout,
                )
                agent.sessions.add(wanted)
                return wanted, False
        try:
            response = await asyncio.wait_for(
                agent.conn.new_session(cwd=cwd, mcp_servers=[]), options.startup_timeout
            )
        except TimeoutError:
            raise ProviderError(
                NAME,
                f"{options.command[0]} did not answer session/new within "
                f"{format_duration(options.startup_timeout)} (options.startup_timeout)",
            ) from None
        except Exception as exc:
            raise ProviderError(NAME, f"session/new failed: {exc}") from None
        agent.sessions.add(response.session_id)
        return response.session_id, True

    async def _turn(
        self, agent: _Agent, turn: TurnRequest, options: AcpOptions
    ) -> AsyncIterator[ProviderEvent]:
        from acp import text_block
        from acp.schema import AgentMessageChunk, ToolCallStart

        session_id, fresh = await self._session(agent, turn, options)
        yield SessionId(session_id)
        prompt = turn.prompt
        if fresh:
            prompt = _with_history(turn, prompt)
        current = _Turn(turn.ask_permission)
        agent.client.turn = current
        timeout = options.turn_timeout or turn.timeout
        request = asyncio.ensure_future(
            agent.conn.prompt(session_id=session_id, prompt=[text_block(prompt)])
        )
        text: list[str] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                getter = asyncio.ensure_future(current.updates.get())
                left = None if deadline is None else max(deadline - loop.time(), 0)
                done, _ = await asyncio.wait(
                    {getter, request}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    getter.cancel()
                    raise ProviderError(
                        NAME,
                        f"the turn took longer than {format_limit(timeout)} (options.turn_timeout)",
                    )
                if getter in done:
                    update = getter.result()
                    if isinstance(update, AgentMessageChunk):
                        piece = getattr(update.content, "text", "") or ""
                        size += len(piece.encode())
                        if size > turn.max_reply_bytes:
                            raise ProviderError(
                                NAME, f"the reply is longer than {turn.max_reply_bytes} bytes"
                            )
                        text.append(piece)
                        yield TextDelta(piece)
                    elif isinstance(update, ToolCallStart):
                        yield ToolUse(
                            update.title,
                            json.dumps(update.raw_input, default=str)[:200]
                            if update.raw_input is not None
                            else "",
                        )
                    continue
                getter.cancel()
                while not current.updates.empty():  # what arrived before the answer
                    update = current.updates.get_nowait()
                    if isinstance(update, AgentMessageChunk):
                        piece = getattr(update.content, "text", "") or ""
                        text.append(piece)
                        yield TextDelta(piece)
                break
            try:
                response = request.result()
            except Exception as exc:
                raise ProviderError(
                    NAME, f"session/prompt failed: {exc}{await _stderr(agent.group)}"
                ) from None
            usage = response.usage
            if usage is not None:
                yield Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
            if response.stop_reason == "refusal":
                raise ProviderError(NAME, "the agent refused the prompt")
            yield Final("".join(text), cut=response.stop_reason == "max_tokens")
        except BaseException:
            if not request.done():
                with contextlib.suppress(Exception):
                    await agent.conn.cancel(session_id=session_id)
                request.cancel()
            raise
        finally:
            agent.client.turn = None

    async def aclose(self) -> None:
        agents, self._agents = list(self._agents.values()), {}
        for agent in agents:
            await _close(agent.conn, agent.group)


def _with_history(turn: TurnRequest, prompt: str) -> str:
    """A new session for a conversation that had turns: they are replayed in the prompt."""
    earlier = [m for m in turn.history if m.role in ("user", "assistant")]
    parts = []
    if turn.system_prompt:
        parts.append(turn.system_prompt)
    if earlier:
        lines = [f"{m.role}: {m.content}" for m in earlier]
        parts.append("The conversation so far:\n" + "\n".join(lines))
    if not parts:
        return prompt
    return "\n\n".join([*parts, prompt])


async def _stderr(group: ProcessGroup) -> str:
    stream = group.process.stderr
    if stream is None:
        return ""
    with contextlib.suppress(Exception):
        data = await asyncio.wait_for(stream.read(4096), 0.5)
        text = data.decode(errors="replace").strip()
        if text:
            return f" ({text.splitlines()[-1][:300]})"
    return ""


async def _close(conn: Any, group: ProcessGroup) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
    await group.close()
