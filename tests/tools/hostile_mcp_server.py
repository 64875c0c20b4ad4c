"""A misbehaving MCP server, speaking raw JSON-RPC over stdio: run by the tests as
`python THIS_FILE MODE [ARG]`. It offers one tool, `echo`, and misbehaves as MODE says:

- `garbage N`: writes N lines on stdout that are not MCP messages (holding $LEAK) first;
- `silent-call`: never answers `tools/call`;
- `stderr-flood N`: writes N MiB on stderr before answering `initialize`;
- `endless-pages`: `tools/list` always has a next page (each with new tools);
- `huge-result N`: answers `tools/call` with a text of N MiB;
- `long-line N`: writes a line of N MiB with no JSON in it before answering `initialize`;
- `child PIDFILE`: starts `sleep 300` (its pid in PIDFILE) before answering, and leaves it;
- `well`: behaves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "well"
ARG = sys.argv[2] if len(sys.argv) > 2 else ""
OUT = sys.stdout.buffer
MIB = 1024 * 1024


def send(message: dict) -> None:
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def answer(request: dict, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def tool(name: str) -> dict:
    return {
        "name": name,
        "description": f"{name} a text",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }


def main() -> None:
    if MODE == "garbage":
        leak = os.environ.get("LEAK", "")
        for number in range(int(ARG)):
            OUT.write(f"debug line {number}: token={leak} Traceback\n".encode())
        OUT.flush()
    if MODE == "stderr-flood":
        block = b"x" * (MIB - 1) + b"\n"
        for _ in range(int(ARG)):
            sys.stderr.buffer.write(block)
        sys.stderr.buffer.write(b"the end of the flood\n")
        sys.stderr.buffer.flush()
    if MODE == "long-line":
        block = b"y" * MIB
        for _ in range(int(ARG)):
            OUT.write(block)
        OUT.write(b"\n")
        OUT.flush()
    if MODE == "child":
        sleeper = subprocess.Popen(["sleep", "300"])
        with open(ARG, "w") as handle:
            handle.write(str(sleeper.pid))
    page = 0
    for line in sys.stdin.buffer:
        request = json.loads(line)
        method = request.get("method", "")
        if "id" not in request:
            continue  # a notification
        if method == "initialize":
            answer(
                request,
                {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            )
        elif method == "tools/list":
            if MODE == "endless-pages":
                page += 1
                answer(request, {"tools": [tool(f"t{page}")], "nextCursor": f"page-{page}"})
            else:
                answer(request, {"tools": [tool("echo")]})
        elif method == "tools/call":
            if MODE == "silent-call":
                continue
            if MODE == "huge-result":
                text = "z" * (int(ARG) * MIB)
            else:
                text = request["params"].get("arguments", {}).get("text", "")
            answer(request, {"content": [{"type": "text", "text": text}], "isError": False})
        elif method == "ping":
            answer(request, {})
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32601, "message": f"unknown method {method}"},
                }
            )


if __name__ == "__main__":
    main()
