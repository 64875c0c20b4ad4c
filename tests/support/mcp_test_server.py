"""A small MCP server written with the official SDK, run by the tests as `python THIS_FILE`.

Modes (first argument): none serves the tools below; `exit` writes a line on stderr and
exits before answering; `mute` never answers. `--pidfile PATH` records its process id.
"""

from __future__ import annotations

import os
import sys
import time

if "--pidfile" in sys.argv:
    with open(sys.argv[sys.argv.index("--pidfile") + 1], "w") as handle:
        handle.write(str(os.getpid()))

if "exit" in sys.argv[1:]:
    print("test server: cannot open the notes database", file=sys.stderr)
    sys.exit(3)

if "mute" in sys.argv[1:]:
    time.sleep(600)
    sys.exit(0)

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("test-notes")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("it failed on purpose")


@server.tool()
def environment(name: str) -> str:
    """The value of an environment variable of the server."""
    return os.environ.get(name, "")


@server.tool()
async def wait(seconds: float) -> str:
    """Sleep, then say so."""
    await anyio.sleep(seconds)
    return "waited"


if __name__ == "__main__":
    server.run()
