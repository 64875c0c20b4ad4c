"""MCP servers as tool sources: started (over stdio) with the step, stopped with it.

The protocol is the official SDK's (`mcp.ClientSession`); the process and its pipes are
`mcp_stdio`'s, which bounds what a misbehaving server can make awf keep or print. Each
server lives in a task of its own: the SDK's contexts are anyio task groups, which must be
left by the task that entered them, while tool calls come from whichever task runs the turn.

A server's tools are offered as `<server>_<tool>`. A server that cannot start — a missing
command, one that exits at once, one that never answers `initialize` within its
`startup_timeout` — is an `ExecutionError` naming it, with the end of what it wrote on
stderr (which is kept out of the terminal otherwise). Its tool list is bounded (pages,
tools, bytes); each call has a time bound (`timeout`, else the block's, else
DEFAULT_MCP_CALL_TIMEOUT). Results become text: text parts as they are, other parts as a
short note; secrets masked, size capped. What the SDK itself logs (it may quote what the
server sent) goes to awf's logger at debug level, masked (`_MaskedSdkLogs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import weakref
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from awf_nb.engine.ports import ToolResult, ToolSpec
from awf_nb.engine.summary import format_duration, format_limit
from awf_nb.errors import ExecutionError
from awf_nb.secrets import Masker
from awf_nb.tools.limits import format_size
from awf_nb.tools.mcp_stdio import Transport, stdio_transport
from awf_nb.tools.output import finish
from awf_nb.workflow.tools_model import DEFAULT_MCP_CALL_TIMEOUT, MCP_SERVER_LIMITS, McpServer

STDERR_TAIL_CHARS = 2000
_log = logging.getLogger("awf_nb.tools.mcp")
# A server's tool list: pages followed, tools kept (model APIs take far fewer: OpenAI 128);
# the defaults of its `max_list_pages` and `max_tools`.
MAX_LIST_PAGES = MCP_SERVER_LIMITS["max_list_pages"][0]
MAX_TOOLS = MCP_SERVER_LIMITS["max_tools"][0]
# The SDK's own shutdown is bounded (stdin closed, then SIGTERM, then SIGKILL: ~6 s);
# this only guards against a bug leaving aclose waiting forever.
STOP_TIMEOUT_SECONDS = 15.0


class McpServerTools:
    """One MCP server and its tools (a `ToolSet`, once `start` has returned)."""

    def __init__(
        self,
        server: McpServer,
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        masker: Masker,
        timeout: float | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.server = server
        self.cwd = Path(cwd)
        # The step's environment, as command steps get it (PATH, virtualenvs, the keys a
        # server needs), plus the server's own `env:`.
        self.env = {**env, **server.env}
        self.masker = masker
        self.timeout = timeout  # the block's `tools.timeout`
        self._warn = warn
        self.transport = Transport(
            server.name,
            server.max_message_bytes,
            self._warning,
            stderr_tail_bytes=server.stderr_tail_bytes,
        )
        self._specs: list[ToolSpec] = []
        self._names: dict[str, str] = {}  # offered name -> the server's tool name
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()

    @property
    def name(self) -> str:
        return self.server.name

    async def start(self) -> None:
        """Start the server and list its tools; `ExecutionError` naming it if that fails."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        _MaskedSdkLogs.install(self.masker)
        self._task = asyncio.create_task(self._serve(), name=f"mcp server {self.name}")
        timeout = self.server.startup_timeout
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except TimeoutError:
            await self.aclose()
            raise ExecutionError(
                f'MCP server "{self.name}" did not answer within {format_limit(timeout)} '
                f"({self._command_line()}){self._stderr_tail()}",
                hint="check that it is an MCP server speaking stdio, or raise startup_timeout",
            ) from None
        except asyncio.CancelledError:
            await self.aclose()
            raise
        except Exception as exc:
            tail = self._stderr_tail()
            await self.aclose()
            raise ExecutionError(
                f'MCP server "{self.name}" failed to start ({self._command_line()}): '
                f"{_describe(exc)}{tail}"
            ) from None

    async def _serve(self) -> None:
        from mcp import ClientSession

        assert self._ready is not None
        server = self.server
        try:
            async with (
                stdio_transport(
                    server.command,
                    server.args,
                    env=self.env,
                    cwd=self.cwd,
                    transport=self.transport,
                ) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = await _list_all_tools(session, server)
                self._adopt(tools)
                self._session = session
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    self._ready.cancel()
                else:
                    self._ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    def _adopt(self, tools: list[Any]) -> None:
        for tool in tools:
            offered = offered_name(self.name, tool.name, taken=self._names)
            self._names[offered] = tool.name
            description = tool.description or tool.title or f"{tool.name} (MCP server {self.name})"
            self._specs.append(ToolSpec(offered, description, dict(tool.input_schema or {})))

    def list(self) -> list[ToolSpec]:
        return list(self._specs)

    def needs_confirmation(self, name: str) -> bool:
        return False  # the step's `confirm` list decides (awf_nb.tools.StepToolSet)

    def time_limit(self, name: str) -> float:
        """How long one call may take: the server's `timeout`, else the block's."""
        if self.server.timeout is not None:
            return self.server.timeout
        return self.timeout if self.timeout is not None else DEFAULT_MCP_CALL_TIMEOUT

    def _warning(self, message: str) -> None:
        if self._warn is not None:
            self._warn(self.masker.mask(message))

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        tool = self._names.get(name)
        if tool is None:
            return ToolResult(f'unknown tool "{name}"', is_error=True)
        session = self._session
        if session is None:
            return ToolResult(f'MCP server "{self.name}" is not running', is_error=True)
        from mcp import MCPError

        limit = self.time_limit(name)
        try:
            async with asyncio.timeout(limit):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            setting = "its timeout" if self.server.timeout is not None else "tools.timeout"
            if self.server.timeout is None and self.timeout is None:
                setting = "the default; set tools.timeout or the server's timeout"
            return ToolResult(
                f'MCP server "{self.name}" did not answer {tool} within '
                f"{format_duration(limit)} ({setting})",
                is_error=True,
            )
        except MCPError as exc:
            return ToolResult(
                self.masker.mask(f'MCP server "{self.name}": {exc.message}'), is_error=True
            )
        except (OSError, RuntimeError, ValueError) as exc:
            # The SDK raises these for a broken connection or a malformed result.
            return ToolResult(
                self.masker.mask(f'MCP server "{self.name}": {_describe(exc)}'), is_error=True
            )
        return ToolResult(finish(result_text(result), self.masker), is_error=bool(result.is_error))

    async def aclose(self) -> None:
        """Stop the server (the SDK closes its stdin, then signals its process group)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None and self._ready is not None and not self._ready.done():
            # Still starting (waiting for `initialize`): only a cancellation ends that wait.
            # The SDK's shutdown is shielded from it and still stops the process.
            task.cancel()
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_SECONDS)

    def _command_line(self) -> str:
        return " ".join([self.server.command, *self.server.args])

    def _stderr_tail(self) -> str:
        """The end of what the server wrote on stderr, as a suffix for an error message."""
        transport = self.transport
        kept = transport.stderr_tail()
        text = self.masker.mask(kept[-STDERR_TAIL_CHARS:].strip())
        if not text:
            return ""
        _log.debug("MCP server %r: the end of its stderr:\n%s", self.name, self.masker.mask(kept))
        if transport.stderr_cut and len(kept) <= STDERR_TAIL_CHARS:
            # What is shown is all that was kept: the limit, not the message, cut it short.
            size = format_size(transport.stderr_tail_bytes)
            return (
                f"\nits stderr ends with (only its last {size} are kept: raise the server's "
                f"stderr_tail_bytes to see more):\n{text}"
            )
        return f"\nits stderr ends with:\n{text}"


async def _list_all_tools(session: Any, server: McpServer) -> list[Any]:
    """Every tool of the server, following pagination: at most `max_list_pages` pages,
    `max_tools` tools and `max_message_bytes` of names, descriptions and schemas."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    size = 0
    for _ in range(server.max_list_pages):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        listing = await session.list_tools(params=params)
        tools.extend(listing.tools)
        size += sum(_tool_size(tool) for tool in listing.tools)
        if len(tools) > server.max_tools:
            raise ValueError(f"it lists more than {server.max_tools} tools (max_tools)")
        if size > server.max_message_bytes:
            raise ValueError(
                f"its tool list is longer than {server.max_message_bytes} bytes (max_message_bytes)"
            )
        cursor = listing.next_cursor
        if not cursor:
            return tools
    raise ValueError(
        f"its tool list goes on for more than {server.max_list_pages} pages (max_list_pages)"
    )


def _tool_size(tool: Any) -> int:
    schema = json.dumps(tool.input_schema or {}, ensure_ascii=False)
    return len(tool.name) + len(tool.description or "") + len(schema)


def result_text(result: Any) -> str:
    """A tool result's content as text: text parts as they are, others as a short note."""
    parts: list[str] = []
    for item in result.content or ():
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {item.mime_type} omitted]")
        elif kind == "resource_link":
            parts.append(f"[resource {item.uri}]")
        elif kind == "resource":
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {resource.uri} omitted]")
        else:
            parts.append(f"[{kind or 'unknown'} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    return text if text else "(no output)"


def _describe(exc: BaseException) -> str:
    """An exception as a short sentence (the SDK's errors may be grouped by anyio)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "it closed the connection (exited?) before answering"
    message = getattr(exc, "message", None) or str(exc)
    return f"{message}" if message else type(exc).__name__


_NOT_IN_A_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_NAME = 64  # what OpenAI-style APIs accept


def offered_name(server: str, tool: str, *, taken: Collection[str] = ()) -> str:
    """`<server>_<tool>` as a model API accepts a function name: letters, digits, `_` and
    `-`, at most 64 characters (an MCP tool may be called `files.read`, or be longer). A
    name cut short, or cleaned into one already taken, ends with a hash of the original."""
    wanted = f"{server}_{tool}"
    name = _NOT_IN_A_TOOL_NAME.sub("_", wanted)
    if len(name) > MAX_TOOL_NAME or name in taken:
        digest = hashlib.sha256(wanted.encode()).hexdigest()[:8]
        name = f"{name[: MAX_TOOL_NAME - 9]}_{digest}"
    return name


class _MaskedSdkLogs(logging.Handler):
    """The SDK's log records, masked with the secrets of every MCP client alive, passed on
    to awf's logger at debug level. The SDK logs what a server sent when it cannot use it
    (with a traceback holding it): unmasked on stderr, that could show a secret the server
    printed. Installed once, on the `mcp` logger, which then no longer propagates."""

    _installed: _MaskedSdkLogs | None = None

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.maskers: weakref.WeakSet[Masker] = weakref.WeakSet()
        self.target = logging.getLogger("awf_nb.tools.mcp")

    @classmethod
    def install(cls, masker: Masker) -> None:
        handler = cls._installed
        if handler is None:
            handler = cls._installed = cls()
            sdk = logging.getLogger("mcp")
            sdk.addHandler(handler)
            sdk.propagate = False
        handler.maskers.add(masker)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            for masker in list(self.maskers):
                text = masker.mask(text)
            self.target.debug("%s: %s", record.name, text)
        except Exception:  # a log line must never break a tool call
            self.handleError(record)
