"""The stdio transport to an MCP server: the server's process, and its messages, bounded.

An MCP server is a program awf starts and cannot trust to behave. The SDK's own stdio
transport keeps whatever the server writes: stderr in a file without a limit, a line
without an end in memory (re-split on every read: quadratic), and it logs every line that
is not a JSON-RPC message with a traceback holding that line. This one, used by
`mcp_client` in its place with the SDK's `ClientSession`:

- starts the server through the process supervisor (`engine.process`): its own process
  group, contained (nothing it starts outlives it), recorded by the step for `awf resume`;
- reads stdout in linear time, one line at most `max_message_bytes` long: a longer one is
  dropped, and if it was the answer to a request, that request fails at once with an
  error naming the limit (its id is read from the line's beginning);
- drops lines that are not JSON-RPC, counting them: one warning per server (masked, the
  line shortened), the number in `Transport.garbage_lines`;
- keeps the last `STDERR_TAIL_BYTES` of stderr (read as it comes, so the server never
  blocks on a full pipe, and the disk is not filled), for the error messages;
- on the way out closes stdin, lets the server exit for `EXIT_GRACE_SECONDS`, then stops
  its whole group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from awf_nb.engine.process import ProcessGroup

STDERR_TAIL_BYTES = 64 * 1024
EXIT_GRACE_SECONDS = 2.0  # from closing its stdin to stopping the group (as the SDK does)
GARBAGE_SHOWN_CHARS = 200
_READ_CHUNK = 256 * 1024
# The id of a JSON-RPC message, near its beginning: `"id": 7` or `"id": "abc"`.
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_ID_SEARCHED_BYTES = 4096


@dataclass
class Transport:
    """What the transport learned about the server while it ran."""

    name: str
    max_message_bytes: int
    warn: Callable[[str], None]
    garbage_lines: int = 0
    oversized_messages: int = 0
    stderr_bytes: int = 0
    _stderr: bytearray = field(default_factory=bytearray)
    pgid: int = 0

    def stderr_tail(self, limit: int = STDERR_TAIL_BYTES) -> str:
        """The end of what the server wrote on stderr (at most `limit` bytes of it)."""
        return bytes(self._stderr[-limit:]).decode("utf-8", errors="replace")

    def _keep_stderr(self, chunk: bytes) -> None:
        self.stderr_bytes += len(chunk)
        self._stderr += chunk
        if len(self._stderr) > STDERR_TAIL_BYTES:
            del self._stderr[: len(self._stderr) - STDERR_TAIL_BYTES]

    def _garbage(self, line: bytes) -> None:
        self.garbage_lines += 1
        if self.garbage_lines == 1:
            text = line[:GARBAGE_SHOWN_CHARS].decode("utf-8", errors="replace")
            more = "…" if len(line) > GARBAGE_SHOWN_CHARS else ""
            self.warn(
                f'MCP server "{self.name}" wrote a line on stdout that is not an MCP '
                f"message: {text!r}{more}; such lines are ignored (and counted, not shown)"
            )

    def _oversized(self) -> None:
        self.oversized_messages += 1
        if self.oversized_messages == 1:
            self.warn(
                f'MCP server "{self.name}" sent a message longer than '
                f"{self.max_message_bytes} bytes (max_message_bytes); it was dropped"
            )


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    transport: Transport,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server; yield the (read, write) streams a `ClientSession` takes."""
    from mcp.shared.message import SessionMessage

    group = await ProcessGroup.start([command, *args], cwd=cwd, env=env, stdin=True, contain=True)
    transport.pgid = group.pgid
    process = group.process
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        async with to_session:
            async for line, whole in _lines(process.stdout, transport.max_message_bytes):
                message = _parse(line, transport) if whole else _dropped(line, transport)
                if message is not None:
                    await to_session.send(message)

    async def write_stdin() -> None:
        assert process.stdin is not None
        async with from_session:
            async for session_message in from_session:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    process.stdin.write(data.encode() + b"\n")
                    await process.stdin.drain()
                except (ConnectionError, OSError):
                    return  # the server is gone: the session sees its stdout end

    async def read_stderr() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(_READ_CHUNK):
            transport._keep_stderr(chunk)

    tasks = [
        asyncio.create_task(read_stdout()),
        asyncio.create_task(write_stdin()),
        asyncio.create_task(read_stderr()),
    ]
    try:
        yield read_stream, write_stream
    finally:
        await asyncio.shield(_shutdown(group, tasks))
        await read_stream.aclose()
        await write_stream.aclose()


async def _shutdown(group: ProcessGroup, tasks: list[asyncio.Task[None]]) -> None:
    """Close stdin, give the server EXIT_GRACE_SECONDS to leave, then stop the group."""
    stdin = group.process.stdin
    if stdin is not None:
        with contextlib.suppress(OSError):
            stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(group.leader_exit(), EXIT_GRACE_SECONDS)
    await group.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _lines(stream: asyncio.StreamReader, limit: int) -> AsyncIterator[tuple[bytes, bool]]:
    """(line, True) for each line of `stream`, found by looking at new bytes only (linear
    time); (its beginning, False) for a line longer than `limit`, whose rest is skipped."""
    pending: list[bytes] = []  # the pieces of the line being read
    size = 0
    too_long = False
    while chunk := await stream.read(_READ_CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            start = end + 1
            if too_long or size + len(piece) > limit:
                yield (b"".join(pending) or piece)[:_ID_SEARCHED_BYTES], False
            elif pending:
                pending.append(piece)
                yield b"".join(pending), True
            else:
                yield piece, True
            pending, size, too_long = [], 0, False
        rest = chunk[start:]
        if not rest or too_long:
            continue
        if size + len(rest) > limit:
            too_long = True  # keep its beginning only, for the id
            if not pending:
                pending.append(rest[:_ID_SEARCHED_BYTES])
            continue
        pending.append(rest)
        size += len(rest)


def _parse(line: bytes, transport: Transport) -> Any:
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    if not line.strip():
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError:
        transport._garbage(line)
        return None


def _dropped(head: bytes, transport: Transport) -> Any:
    """A message over the limit was dropped: the error answering its request, if its
    beginning names one — the call fails now, not at its timeout."""
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError

    transport._oversized()
    match = _ID.search(head)
    if match is None or b'"method"' in head:  # a request or notification from the server
        return None
    error = ErrorData(
        code=-32603,
        message=(
            f"its answer is longer than {transport.max_message_bytes} bytes "
            "(max_message_bytes) and was dropped"
        ),
    )
    request_id = json.loads(match.group(1))
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
