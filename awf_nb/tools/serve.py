"""`awf mcp-serve`: a tool set served as an MCP server over stdio.

CLI agents (claude, gemini, codex, …) run their own tools; AWF's `mcp_proxy` gives them
awf's tools instead, through an MCP server awf itself runs: this one. What it serves is a
`tools:` block (built-ins, command tools, MCP servers it proxies), read from a JSON file:

```json
{
  "root_dir": "/path/to/workdir",
  "builtin": ["Read", "Glob", "Grep"],
  "commands": [{"name": "run_tests", "description": "Run the tests",
                "parameters": {"path": {"type": "string"}}, "command": "pytest -q \\"$path\\""}],
  "mcp": [{"name": "notes", "command": "python", "args": ["-m", "my_notes_server"]}],
  "confirm": ["run_tests"],
  "env": {"PROJECT": "demo"}
}
```

Every key is optional. `root_dir` is the working directory (default: the current one);
`env` is added to the environment the commands get. AWF's own keys are understood too:
`intercept_builtins: true` serves all six built-ins when `builtin` is not given, and
`plugin_tools` (AWF plugins) is refused, as awf-nb has no plugins. There is no one to ask
here, so tools listed in `confirm` are refused unless `--yes` is given, as in any headless
run. The protocol (the SDK's low-level `Server`) owns stdout: nothing else is written there.

What a client can make it do is bounded: `max_parallel` calls run at once (the others wait,
at most `--max-waiting-calls` of them, default 256; past that a call is refused at once),
and a request line is at most `--max-request-bytes` (default 16 MiB; a longer one is skipped
as it arrives, never held whole, and a `tools/call` among them is answered with an error
naming the limit). The two are `ServeLimits`, checked as a workflow's limits are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from awf_nb.errors import UserError
from awf_nb.secrets import Masker
from awf_nb.tools import StepToolSet, build_toolset
from awf_nb.workflow.checks import did_you_mean
from awf_nb.workflow.tools_model import BUILTIN_TOOLS, ServeLimits, ToolsConfig

# `env_channel`: {socket, token} — the environment served by the awf run that wrote the
# file (tools/env_channel.py), so no secret is written into it.
_SERVE_KEYS = ("root_dir", "env", "env_channel", "intercept_builtins", "plugin_tools")
# The defaults of --max-request-bytes (one JSON-RPC line from the client) and
# --max-waiting-calls (calls waiting for one of the max_parallel places).
MAX_REQUEST_BYTES = ServeLimits().max_request_bytes
MAX_WAITING_CALLS = ServeLimits().max_waiting_calls
_READ_CHUNK = 256 * 1024
# A tools/call request whose line was too long becomes a call of this (impossible) tool
# name, which is answered with the error; the id is read from the line's beginning.
_OVERSIZED = "\u0000awf: request too long"
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_TOOLS_KEYS = tuple(ToolsConfig.model_fields)


@dataclass
class ServeConfig:
    """What `awf mcp-serve` serves, and where."""

    tools: ToolsConfig
    root_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    limits: ServeLimits = field(default_factory=ServeLimits)


def load_serve_config(
    path: str | None,
    *,
    builtin: str | None = None,
    root_dir: str | None = None,
    limits: Mapping[str, Any] | None = None,
    fetch_env: bool = True,
) -> ServeConfig:
    """The JSON file at `path` (if any) with the command line's `--builtin` and `--dir`,
    and the limits its flags set (`max_waiting_calls`, `max_request_bytes`; None: the
    default). `fetch_env`: ask the awf run named by `env_channel` for the environment
    (False: only check the file)."""
    serve_limits = _serve_limits(limits or {})
    data = _read_json(path) if path else {}
    unknown = [key for key in data if key not in (*_SERVE_KEYS, *_TOOLS_KEYS)]
    if unknown:
        hint = did_you_mean(unknown[0], (*_SERVE_KEYS, *_TOOLS_KEYS))
        raise UserError(f"{path}: unknown key {unknown[0]!r}" + (f" ({hint})" if hint else ""))
    if data.get("plugin_tools"):
        raise UserError(f"{path}: plugin_tools (AWF plugins) are not supported by awf-nb")
    tools = {key: data[key] for key in _TOOLS_KEYS if key in data}
    if builtin:
        names = [name.strip() for name in builtin.split(",") if name.strip()]
        tools["builtin"] = list(BUILTIN_TOOLS) if names == ["all"] else names
    elif data.get("intercept_builtins") and "builtin" not in tools:
        tools["builtin"] = list(BUILTIN_TOOLS)
    try:
        config = ToolsConfig.model_validate(tools)
    except ValidationError as exc:
        where = path or "--builtin"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'tools'}: {_message(err)}"
            for err in exc.errors(include_url=False)
        )
        raise UserError(f"{where}: {problems}") from None
    if not (config.builtin or config.commands or config.mcp):
        raise UserError(
            "nothing to serve: give --builtin NAMES or a --config file with tools",
            hint="e.g. awf mcp-serve --builtin Read,Glob,Grep",
        )
    root = Path(root_dir or data.get("root_dir") or os.getcwd()).expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"the working directory {root} does not exist")
    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise UserError(f"{path}: env must map names to strings")
    env = {str(k): v for k, v in env.items()}
    channel = data.get("env_channel")
    if channel is not None:
        if not isinstance(channel, dict) or not all(
            isinstance(channel.get(key), str) for key in ("socket", "token")
        ):
            raise UserError(f"{path}: env_channel must have a socket and a token")
        if fetch_env:
            from awf_nb.tools.env_channel import fetch_env as fetch

            env = {**fetch(channel["socket"], channel["token"]), **env}
    return ServeConfig(config, root, env, serve_limits)


def _serve_limits(values: Mapping[str, Any]) -> ServeLimits:
    given = {key: value for key, value in values.items() if value is not None}
    try:
        return ServeLimits.model_validate(given)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{str(err['loc'][0]).replace('_', '-')}: {_message(err)}"
            for err in exc.errors(include_url=False)
        )
        raise UserError(problems) from None


def _read_json(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"config file not found: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object")
    return data


def _message(error: Mapping[str, Any]) -> str:
    message = str(error.get("msg", ""))
    return message.removeprefix("Value error, ")


def run_server(config: ServeConfig, *, yes: bool = False) -> int:
    """Serve until the client closes stdin (or SIGTERM); the exit code."""
    if _loop_running():  # `%awf mcp-serve` in a notebook: stdin and stdout are the kernel's
        raise UserError(
            "awf mcp-serve is a program for an MCP client to start; it cannot run inside a "
            "notebook or a running event loop"
        )
    env = {**os.environ, **config.env}
    masker = Masker.from_sources({}, env)
    toolset = build_toolset(
        config.tools, cwd=config.root_dir, env=env, masker=masker, warn=_warner(masker)
    )
    asyncio.run(_serve(toolset, config.limits, yes=yes))
    return 0


def _warner(masker: Masker) -> Any:
    def warn(message: str) -> None:  # stderr: the client (an agent CLI) may show or log it
        print(f"awf mcp-serve: {masker.mask(message)}", file=sys.stderr, flush=True)

    return warn


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _serve(toolset: StepToolSet, limits: ServeLimits, *, yes: bool) -> None:
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if main is not None:
        # SIGTERM (an agent CLI stopping its MCP servers) ends the serving like stdin's end:
        # the MCP servers this one proxies are stopped on the way out.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, main.cancel)
    try:
        async with toolset:
            await _serve_stdio(toolset, limits, yes=yes)
    except asyncio.CancelledError:
        return


async def _serve_stdio(toolset: StepToolSet, limits: ServeLimits, *, yes: bool) -> None:
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from awf_nb._version import __version__
    from awf_nb.tools.mcp_client import _MaskedSdkLogs

    _MaskedSdkLogs.install(toolset.masker)
    places = asyncio.Semaphore(toolset.max_parallel)
    waiting = 0

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name, description=spec.description, input_schema=spec.parameters
                )
                for spec in toolset.list()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal waiting
        name = params.name
        if name == _OVERSIZED:
            text = (
                f"the request is longer than {limits.max_request_bytes} bytes "
                "(--max-request-bytes): it was not read"
            )
            return _result(text, is_error=True)
        if toolset.needs_confirmation(name) and not yes:
            text = (
                f"{name} was refused: it needs the user's confirmation, and awf mcp-serve "
                "cannot ask (start it with --yes to allow it)"
            )
            return _result(text, is_error=True)
        if places.locked() and waiting >= limits.max_waiting_calls:
            text = (
                f"{name} was refused: {limits.max_waiting_calls} calls are already waiting "
                f"(--max-waiting-calls) for one of the {toolset.max_parallel} places "
                "(max_parallel); try again later"
            )
            return _result(text, is_error=True)
        waiting += 1
        try:
            await places.acquire()
        finally:
            waiting -= 1
        try:
            result = await toolset.call(name, dict(params.arguments or {}))
        finally:
            places.release()
        return _result(result.text, is_error=result.is_error)

    server: Server[Any] = Server(
        "awf", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool
    )
    stdin = _BoundedLines(sys.stdin.fileno(), limits.max_request_bytes, _warner(toolset.masker))
    async with stdio_server(stdin=stdin) as (read, write):  # type: ignore[arg-type]
        await server.run(read, write, server.create_initialization_options())


class _BoundedLines:
    """The lines of the client's requests (what `stdio_server` iterates), each at most
    `limit` bytes: a longer one is skipped as it arrives, never held whole. Reads in a
    worker thread, as the SDK's own stdin does (a pipe, a file or a terminal alike)."""

    def __init__(self, fd: int, limit: int, warn: Any) -> None:
        self.fd = fd
        self.limit = limit
        self.warn = warn

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        import anyio.to_thread

        pending: list[bytes] = []
        size = 0
        skipping = False
        head = b""
        while True:
            chunk = await anyio.to_thread.run_sync(
                os.read, self.fd, _READ_CHUNK, abandon_on_cancel=True
            )
            if not chunk:
                return
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                piece = chunk[start:end]
                start = end + 1
                if skipping or size + len(piece) > self.limit:
                    beginning = head or (b"".join(pending) + piece[:4096])[:4096]
                    if replacement := self._oversized(beginning):
                        yield replacement
                else:
                    yield (b"".join(pending) + piece).decode("utf-8", errors="replace")
                pending, size, skipping, head = [], 0, False, b""
            rest = chunk[start:]
            if skipping or not rest:
                continue
            if size + len(rest) > self.limit:
                skipping = True
                head = (b"".join(pending) + rest)[:4096]
                pending = []
                continue
            pending.append(rest)
            size += len(rest)

    def _oversized(self, head: bytes) -> str | None:
        """The line that stands for a request too long to read: a call of `_OVERSIZED`
        (answered with the error) when it was a tools/call with an id; else nothing."""
        self.warn(f"a request longer than {self.limit} bytes was skipped (--max-request-bytes)")
        match = _ID.search(head)
        if match is None or b'"tools/call"' not in head:
            return None
        request = {
            "jsonrpc": "2.0",
            "id": json.loads(match.group(1)),
            "method": "tools/call",
            "params": {"name": _OVERSIZED, "arguments": {}},
        }
        return json.dumps(request)


def _result(text: str, *, is_error: bool) -> Any:
    from mcp import types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )
