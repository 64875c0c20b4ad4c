"""Agent tools: the `ToolSet` an agent step's `tools:` block describes.

`build_toolset(config, cwd=, env=, masker=)` combines the three sources —

- `builtins.BuiltinTools`: AWF's Read, Write, Edit, Bash, Glob, Grep, confined to `cwd`;
- `commands.CommandTools`: shell commands, the model's arguments as environment variables;
- `mcp_client.McpServerTools`: MCP servers over stdio, tools named `<server>_<tool>` —

into one `StepToolSet`, which also answers `needs_confirmation` (the block's `confirm`
list) and carries `max_rounds` and `max_parallel`. Every call is bounded in time: each
source enforces its own limit (the block's `timeout`, else the tool's default), and the set
adds a net a little longer than that over every call. MCP servers start when the set is
entered (`async with`, or `await start()`) and stop on `aclose()`:

    async with build_toolset(step.tools, cwd=cwd, env=env, masker=masker) as tools:
        specs = tools.list()
        result = await tools.call("Read", {"path": "README.md"})

The package does not drive the model loop; the engine does (see awf_nb.engine.ports).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from awf_nb.engine.ports import ToolResult, ToolSpec
from awf_nb.errors import ExecutionError
from awf_nb.secrets import Masker
from awf_nb.tools.builtins import BuiltinTools
from awf_nb.tools.commands import CommandTools
from awf_nb.tools.mcp_client import McpServerTools
from awf_nb.workflow.tools_model import ToolsConfig

__all__ = ["StepToolSet", "build_toolset"]

# The net over a call, beyond its own limit: a command's process group gets its kill grace
# and its output is collected first; only a source failing its own bound meets the net.
CALL_NET_MARGIN_SECONDS = 10.0

Warn = Callable[[str], None]


class StepToolSet:
    """The tools of one agent step: built-ins, command tools and MCP servers together."""

    def __init__(
        self,
        config: ToolsConfig,
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        masker: Masker,
        warn: Warn | None = None,
    ) -> None:
        self.config = config
        self.max_rounds = config.max_rounds
        self.max_parallel = config.max_parallel
        self.masker = masker
        timeout = config.timeout
        self._local: list[BuiltinTools | CommandTools] = [
            BuiltinTools(config.builtin, cwd=cwd, env=env, masker=masker, timeout=timeout),
            CommandTools(config.commands, cwd=cwd, env=env, masker=masker, timeout=timeout),
        ]
        self._servers = [
            McpServerTools(server, cwd=cwd, env=env, masker=masker, timeout=timeout, warn=warn)
            for server in config.mcp
        ]
        self._started: list[McpServerTools] = []
        self._routes: dict[str, BuiltinTools | CommandTools | McpServerTools] = {}
        self._specs: list[ToolSpec] = []
        self._route(self._local)

    async def start(self) -> None:
        """Start the MCP servers (together); `ExecutionError` naming the first that fails.

        The servers already started are stopped again before the error is raised.
        """
        if not self._servers or self._started:
            return
        starts = [asyncio.create_task(server.start()) for server in self._servers]
        outcomes = await asyncio.gather(*starts, return_exceptions=True)
        self._started = [
            server
            for server, outcome in zip(self._servers, outcomes, strict=True)
            if outcome is None
        ]
        failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
        if failure is None:
            try:
                self._route(self._started)
            except ExecutionError as exc:
                failure = exc
        if failure is not None:
            await self.aclose()
            raise failure

    def _route(self, sources: list[BuiltinTools | CommandTools] | list[McpServerTools]) -> None:
        for source in sources:
            for spec in source.list():
                if spec.name in self._routes:
                    origin = (
                        f' (one from MCP server "{source.name}")'
                        if isinstance(source, McpServerTools)
                        else ""
                    )
                    raise ExecutionError(
                        f'two tools are named "{spec.name}"{origin}: rename a command tool '
                        "or an MCP server"
                    )
                self._routes[spec.name] = source
                self._specs.append(spec)

    def list(self) -> list[ToolSpec]:
        """Every tool the model may call (MCP servers' tools once `start` has run)."""
        return list(self._specs)

    def needs_confirmation(self, name: str) -> bool:
        return self.config.confirms(name)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        source = self._routes.get(name)
        if source is None:
            known = ", ".join(self._routes) or "none"
            return ToolResult(f'unknown tool "{name}" (the tools are: {known})', is_error=True)
        if not isinstance(arguments, dict):
            return ToolResult(f"{name}: the arguments must be a JSON object", is_error=True)
        limit = source.time_limit(name)
        try:
            async with asyncio.timeout(limit + CALL_NET_MARGIN_SECONDS):
                result = await source.call(name, arguments)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            result = ToolResult(f"{name}: stopped after {limit:g} s (tools.timeout)", is_error=True)
        except Exception as exc:
            # A bug in one tool is the model's problem to route around, not the end of the step.
            result = ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
        # The sources mask already; this is the net under all of them (error texts included).
        return ToolResult(self.masker.mask(result.text), result.is_error)

    async def aclose(self) -> None:
        """Stop the MCP servers; safe to call more than once."""
        servers, self._started = self._started, []
        # Servers that failed to start stopped themselves; those running stop together.
        await asyncio.gather(*(server.aclose() for server in servers), return_exceptions=True)
        for server in servers:
            self._routes = {n: s for n, s in self._routes.items() if s is not server}
        self._specs = [spec for spec in self._specs if spec.name in self._routes]

    async def __aenter__(self) -> StepToolSet:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def build_toolset(
    config: ToolsConfig | Mapping[str, Any],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    masker: Masker | None = None,
    warn: Warn | None = None,
) -> StepToolSet:
    """The tools of a `tools:` block (a model, or the plain mapping from YAML/JSON).

    `cwd` is the step's working directory (built-ins are confined to it, commands and MCP
    servers run in it), `env` the environment commands get (as `command_env` builds it for
    command steps), `masker` the run's secrets, `warn` where a warning about a tool source
    goes (an MCP server writing garbage, already masked). Enter the result (`async with`)
    to start the MCP servers.
    """
    if not isinstance(config, ToolsConfig):
        config = ToolsConfig.model_validate(dict(config))
    return StepToolSet(config, cwd=cwd, env=env, masker=masker or Masker(), warn=warn)
