"""`mcp_proxy`: a CLI agent step's tools, served to the agent CLI by `awf mcp-serve`.

An agent CLI (claude, gemini, codex, …) runs its own tools inside a turn; the engine
cannot run them for it. With `mcp_proxy: {enable: true}`, the step's `tools:` block is
served to the CLI instead, as an MCP server the CLI starts itself:
`python -m awf_nb.cli mcp-serve --config FILE [--yes]` (from a source checkout, a `-c`
line that finds this checkout: see `_run_awf`). `McpProxy` is the run's
`McpProxyFactory` (see `awf_nb.engine.ports`): for each such step it writes FILE — the
step's tools, the working directory, the command environment — and returns the server
for the CLI providers to pass with their own MCP flags.

FILE holds no secret: the command environment is not in it but served by this process
over a private Unix socket (`EnvChannel`, tools/env_channel.py), which FILE names with a
random token; `awf mcp-serve` fetches it when it starts. FILE is still written owner-only
(0600) in a private directory (0700) — `mcp-proxy/` in the run's own folder of the store,
never in a shared temporary folder — which is removed when the factory is garbage-collected
(with the run that owns it) or, at the latest, when the process exits. A run killed before
that leaves the folder (with nothing secret in it); its resume empties it when it starts
serving again, and removes it at its end. A run without a store uses a private temporary
folder instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import site
import sys
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from awf_nb.engine.ports import McpServerSpec
from awf_nb.errors import AwfError, ExecutionError
from awf_nb.tools.env_channel import EnvChannel
from awf_nb.workflow.tools_model import BUILTIN_TOOLS, SIZE_LIMITS, McpProxyConfig, ToolsConfig

SERVER_NAME = "awf"
PROXY_DIR = "mcp-proxy"  # in the run's folder
_LIMIT_KEYS = ("timeout", "max_parallel", *SIZE_LIMITS)
_TOOLS_KEYS = ("builtin", "commands", "mcp", "confirm", *_LIMIT_KEYS)


def serve_config(
    tools: ToolsConfig | None, proxy: McpProxyConfig, cwd: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """The `awf mcp-serve --config` object for a step: what it serves, where, with what env.

    Raises ExecutionError for what cannot be served: AWF plugins, or nothing at all.
    """
    if proxy.plugin_tools:
        names = ", ".join(entry.plugin for entry in proxy.plugin_tools)
        raise ExecutionError(
            f"mcp_proxy.plugin_tools ({names}): AWF plugins are not supported by awf-nb",
            hint="serve such tools as a command tool or an MCP server under `tools:` instead",
        )
    config: dict[str, Any] = {}
    if tools is not None:
        # Only the keys mcp-serve reads: a `tools:` block may carry unknown keys (warned
        # about by the loader) that mcp-serve would refuse.
        dumped = tools.model_dump(mode="json", include=set(_TOOLS_KEYS))
        config = {key: dumped[key] for key in _TOOLS_KEYS if dumped.get(key)}
        # The limits only when the step sets them: mcp-serve has the same defaults.
        for key in _LIMIT_KEYS:
            if key not in tools.model_fields_set:
                config.pop(key, None)
    if proxy.intercept_builtins and "builtin" not in config:
        config["builtin"] = list(BUILTIN_TOOLS)
    if not any(config.get(key) for key in ("builtin", "commands", "mcp")):
        raise ExecutionError(
            "mcp_proxy: no tools to serve (intercept_builtins is off and the step's "
            "`tools:` block has no builtin, commands or mcp)"
        )
    # Every variable of the command environment is served: agent CLIs start their MCP
    # servers with an environment of their own choosing (codex clears it). Not in the
    # file: `McpProxy` serves it over its channel (the caller adds `env_channel`).
    return {**config, "root_dir": str(cwd)}


class McpProxy:
    """The run's `McpProxyFactory`: one config file per step it serves, cleaned up after."""

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._channel: EnvChannel | None = None

    def __call__(
        self,
        tools: ToolsConfig | None,
        proxy: McpProxyConfig,
        cwd: Path,
        env: Mapping[str, str],
        yes: bool,
        run_dir: Path | None = None,
    ) -> McpServerSpec:
        config = serve_config(tools, proxy, cwd, env)
        if self._channel is None:
            self._channel = EnvChannel()
            weakref.finalize(self, self._channel.close)
        token = self._channel.offer(env)
        config["env_channel"] = {"socket": str(self._channel.path), "token": token}
        path = self._write(config, run_dir)
        _check(path)
        serve = ("mcp-serve", "--config", str(path), *(("--yes",) if yes else ()))
        return McpServerSpec(name=SERVER_NAME, command=sys.executable, args=(*_run_awf(), *serve))

    @property
    def directory(self) -> Path | None:
        """The private folder of the config files (None until the first one is written)."""
        return self._dir

    def close(self) -> None:
        """Remove the config files now (the CLIs that read them must have ended)."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _write(self, config: dict[str, Any], run_dir: Path | None) -> Path:
        if self._dir is None or not self._dir.is_dir():
            if run_dir is not None:
                self._dir = run_dir / PROXY_DIR
                # What a killed run of this one left is stale: its CLIs are gone.
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir.mkdir(mode=0o700, parents=True)
            else:
                self._dir = Path(tempfile.mkdtemp(prefix="awf-mcp-proxy-"))  # 0700
            # Removed with this object (its run is gone) or at exit, whichever comes first.
            weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        text = json.dumps(config, ensure_ascii=False, sort_keys=True)
        # Named by content: a step run again (a loop) reuses its file, not one more.
        path = self._dir / f"serve-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        if path.exists():
            return path
        fd, tmp = tempfile.mkstemp(dir=self._dir, suffix=".tmp")  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(tmp, path)  # atomic: a parallel step never reads half a file
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path


def _check(path: Path) -> None:
    """Refuse at the step's start what `awf mcp-serve` would refuse inside the CLI's turn,
    where the CLI would only say that a server failed to start."""
    from awf_nb.tools.serve import load_serve_config

    try:
        load_serve_config(str(path), fetch_env=False)
    except AwfError as exc:
        raise ExecutionError(f"mcp_proxy: {exc.message}", hint=exc.hint) from None


def _run_awf() -> tuple[str, ...]:
    """The interpreter arguments that run `awf`: `-m awf_nb.cli` when awf-nb is installed,
    else (a source checkout) a `-c` line that puts this checkout first on sys.path — not
    PYTHONPATH, which agent CLIs drop from an MCP server's environment (codex starts it
    with a cleared one, gemini refuses to set PYTHONPATH)."""
    root = str(Path(__file__).resolve().parents[2])
    sites = (*site.getsitepackages(), site.getusersitepackages())
    if root in {str(Path(folder).resolve()) for folder in sites}:
        return ("-m", "awf_nb.cli")
    boot = (
        f"import runpy, sys; sys.path.insert(0, {root!r}); "
        "runpy.run_module('awf_nb.cli', run_name='__main__', alter_sys=True)"
    )
    return ("-c", boot)
