"""What the tools' bounds cost, and what they prevent, measured in one run.

- Glob: a pattern of many `**` that matches nothing, against one deep path. The recursive
  matcher the built-in had tried every split of the path between the `**` (exponential in
  their number: 10 of them took 48.7 s on one path); the part-by-part matcher keeps a set
  of pattern positions (linear). The old matcher is timed on fewer `**` — it would not end
  on 10 — and the figures show how each grows.
- MCP: a server's 40 MB answer on one line. The SDK's stdio reader re-split everything
  read so far on each read (quadratic: 12 s for 40 MB); awf's looks at the new bytes
  only. Both are fed the same 64 KiB pieces, from memory.

    python benchmarks/tool_bounds.py
"""

from __future__ import annotations

import asyncio
import fnmatch
import time

from awf_nb.tools.mcp_stdio import _lines
from awf_nb.tools.search import GlobPattern

DEPTH = 20
MIB = 1024 * 1024


def recursive_match(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """The matcher the built-in had (backtracking over every split at each `**`)."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(recursive_match(parts[skip:], rest) for skip in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and recursive_match(parts[1:], rest)


def timed(function: object, *args: object) -> float:
    started = time.perf_counter()
    function(*args)  # type: ignore[operator]
    return time.perf_counter() - started


def glob_figures() -> None:
    path = tuple(f"d{level}" for level in range(DEPTH))
    print(f"Glob: a pattern of N '**' then '*.py', against one path {DEPTH} folders deep")
    for stars in (4, 6, 7, 8):
        pattern = ("**",) * stars + ("*.py",)
        print(f"  recursive, {stars:2} '**': {timed(recursive_match, path, pattern):9.4f} s")
    for stars in (10, 14, 100):
        pattern = ("**",) * stars + ("*.py",)
        seconds = timed(GlobPattern(pattern).matches, path)
        print(f"  awf,       {stars:2} '**': {seconds:9.6f} s")


def sdk_split(chunks: list[bytes]) -> int:
    """The SDK's line splitting (mcp.client.stdio.stdout_reader), on text as it does."""
    buffer = ""
    lines = 0
    for chunk in chunks:
        parts = (buffer + chunk.decode()).split("\n")
        buffer = parts.pop()
        lines += len(parts)
    return lines


class _Feed:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = iter(chunks)

    async def read(self, size: int) -> bytes:
        return next(self.chunks, b"")


async def awf_split(chunks: list[bytes]) -> int:
    return len([line async for line in _lines(_Feed(chunks), 64 * MIB)])  # type: ignore[arg-type]


def mcp_figures() -> None:
    size = 40 * MIB
    line = b'{"jsonrpc": "2.0", "id": 1, "result": {"text": "' + b"z" * size + b'"}}\n'
    chunks = [line[i : i + 64 * 1024] for i in range(0, len(line), 64 * 1024)]
    print(f"MCP: one answer of {size // MIB} MiB on one line, read in 64 KiB pieces")
    sdk = timed(sdk_split, chunks)
    awf = timed(lambda: asyncio.run(awf_split(chunks)))
    print(f"  the SDK's reader: {sdk:7.3f} s")
    print(f"  awf's reader:     {awf:7.3f} s   ({sdk / awf:.0f}x faster)")


if __name__ == "__main__":
    glob_figures()
    mcp_figures()
