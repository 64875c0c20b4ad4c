"""What a run is given from outside the workflow file (`RunConfig`), and the one owner of
its providers' lifetime (`ProviderSet`).

A `RunConfig` is built once, before its `Runner`, and never changed afterwards (it is
frozen): the reader, the sink, the cassette around the providers, the simulated user and
the extra limits are all known when the run is made. The one place that builds it for
every entry point is `awf_nb.runs.prepare_run`; a called workflow gets a copy
(`dataclasses.replace`) that differs only in where it reports and its place in the call
stack.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from awf_nb.engine.ports import (
    EventSink,
    InputReader,
    McpProxyFactory,
    Provider,
    ProviderFactory,
    RunStore,
    ToolSetFactory,
)
from awf_nb.secrets import Masker

if TYPE_CHECKING:
    from awf_nb.engine.breakpoints import Breakpoints, Debugger
    from awf_nb.engine.events import RunEvent
    from awf_nb.engine.limits import CostLimit
    from awf_nb.engine.partner import SimulatedUser
    from awf_nb.engine.state import RunState
    from awf_nb.workflow.model import Limits, Workflow

log = logging.getLogger(__name__)


class NullSink:
    """Shows nothing: the sink of a run nobody watches."""

    def emit(self, event: RunEvent) -> None:
        pass


class ProviderSet:
    """The providers of one run, the single owner of their lifetime: one instance per name,
    shared with the workflows the run calls, closed once when the top-level run ends."""

    def __init__(self, factory: ProviderFactory) -> None:
        self._factory = factory
        self._instances: dict[str, Provider] = {}

    def get(self, name: str) -> Provider:
        if name not in self._instances:
            self._instances[name] = self._factory(name)
        return self._instances[name]

    async def aclose(self) -> None:
        """Close every provider once (aliases may share an instance); never raises: a
        provider that fails to close is logged (`awf_nb.engine.config`, shown by
        `--verbose`; its traceback by `--debug`) and the others are still closed."""
        instances, self._instances = self._instances, {}
        unique = {id(provider): (name, provider) for name, provider in instances.items()}
        for name, provider in unique.values():
            try:
                await provider.aclose()
            except Exception as exc:
                log.info("closing provider %s failed: %s: %s", name, type(exc).__name__, exc)
                log.debug("closing provider %s failed", name, exc_info=exc)


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs from outside the workflow file. Frozen: built once."""

    providers: ProviderFactory
    sink: EventSink = field(default_factory=NullSink)
    reader: InputReader | None = None  # None: headless, conversations end after turn 1
    store: RunStore | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: Path = field(default_factory=Path.cwd)
    masker: Masker = field(default_factory=Masker)
    # call_workflow nesting
    depth: int = 0
    call_stack: tuple[str, ...] = ()
    parent_run_id: str = ""
    load_child: Callable[[str, Path], Workflow] | None = None
    # The providers of the top-level run, passed on to the workflows it calls (None: the
    # run is the top-level one, and makes and closes its own).
    provider_set: ProviderSet | None = None
    # An agent playing the person in conversations (`--simulate-user`), or None.
    simulated_user: SimulatedUser | None = None
    # Builds (and starts) the tool set of an agent step with `tools:` (awf_nb.tools).
    toolsets: ToolSetFactory | None = None
    # `--yes`: tool calls that need confirmation run without asking.
    yes: bool = False
    # How a step's provider reads in its header, when the entry point knows more than its
    # name (`local → ollama:llama3.2` when `--model` switched it); None: the name.
    describe_provider: Callable[[str], str] | None = None
    # Serves a CLI agent step's tools through `awf mcp-serve` (`mcp_proxy`).
    mcp_proxy: McpProxyFactory | None = None
    # Limits on top of the workflow's own `limits:` (the stricter of each applies): what
    # the person starting the run allows it (an evaluation's per-run budget).
    limits: Limits | None = None
    # The most the run may cost (an evaluation's `limits.max_cost`), checked before a turn.
    cost_limit: CostLimit | None = None
    # Asked when the top-level run ends, before its summary: warnings to show (a replay
    # that left part of its cassette unused).
    end_warnings: tuple[Callable[[RunState], list[str]], ...] = ()
    # Where the run pauses, and who answers its pauses (engine/breakpoints.py); None: it
    # never pauses (a pause kept by a killed run is then passed with a warning).
    breakpoints: Breakpoints | None = None
    debugger: Debugger | None = None
