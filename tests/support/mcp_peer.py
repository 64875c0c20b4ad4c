"""The MCP test peer: tests/support/mcp_test_server.py (a real stdio MCP server with a
`notes` tool set) and the `mcp:` entry that runs it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TEST_SERVER = Path(__file__).with_name("mcp_test_server.py")
# A secret the tools tests hand to the masker, to check that it never shows.
SECRET = "sk-test-0123456789"


def notes_server(name: str = "notes", *args: str, **fields: Any) -> dict[str, Any]:
    """An `mcp:` entry running the test server (`args` go to it, `fields` into the entry)."""
    return {"name": name, "command": sys.executable, "args": [str(TEST_SERVER), *args], **fields}
