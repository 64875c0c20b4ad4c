"""The one way to start a run: `prepare_run(workflow or Resume, RunOptions)`.

Every entry point comes here — `awf run` / `awf resume`, the `%%awf` magic,
`awf_nb.run` / `arun`, and evaluations, which prepare hundreds of runs in one process —
and gets back a `PreparedRun` whose whole configuration was built at once:

1. the workflow (a file, a name, YAML text, a `Workflow`), or the stored run to resume;
2. its inputs resolved and checked, its secrets known (the run's `Masker`);
3. its providers: the registry's or the caller's, recorded to or replayed from a
   cassette (`record`, `replay`, `record_missing`);
4. who answers: replies given up front, the caller's reader, or the frontend's (the
   `Frontend` the entry point chose is opened here, once, with the run's `RunControl`,
   and gives the `Session` that runs it); with a cassette, recorded person messages are
   written or served through the same reader;
5. the simulated user, the limits on top of the workflow's, tools and `mcp_proxy`;
6. a frozen `RunConfig` and its `Runner`, bound to the run's `RunControl`.

Nothing is changed after that, and nothing process-wide is touched (no signal handler,
no global frontend, no logging set-up): what a run needs is in its own objects, so runs
prepared side by side on one event loop do not meet. `prepare_run` is synchronous (it
reads files) and safe to call from a running loop; `await PreparedRun.run()` runs it
there (`PreparedRun.run_sync()` on a loop of its own: `awf run`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine.config import NullSink, RunConfig
from awf_nb.engine.inputs import resolve_inputs
from awf_nb.engine.ports import (
    EventSink,
    InputReader,
    McpProxyFactory,
    McpServerSpec,
    ProviderFactory,
)
from awf_nb.engine.run import Runner
from awf_nb.errors import DefinitionError, UserError
from awf_nb.runs.checks import provider_problems
from awf_nb.runs.options import (
    PathLike,
    Resume,
    RunOptions,
    kept_options,
    resumed_options,
)
from awf_nb.runs.results import ReplayReport, RunResult
from awf_nb.runs.session import FrontendRequest, RunControl, Session
from awf_nb.secrets import MASK, Masker
from awf_nb.store import Store
from awf_nb.traces import Tracer
from awf_nb.workflow.model import Workflow

if TYPE_CHECKING:
    from awf_nb.engine.partner import SimulatedUser
    from awf_nb.engine.state import RunState
    from awf_nb.providers.model_switch import ModelChoice

__all__ = [
    "PreparedRun",
    "default_providers",
    "load",
    "model_choice",
    "prepare_run",
]


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to go: `await prepared.run()` runs it in its frontend's session and
    returns its `RunResult`; `prepared.run_sync()` where the session owns the event loop
    (the terminal: a new loop, SIGINT and SIGTERM).

    `runner` is the engine's run (its `run_id`, live `state`); `control` its Stop and
    Cancel (`RunControl`), which the frontend was given when it opened; `session` what the
    frontend opened for it (the headless `Session` when no frontend was chosen).
    """

    runner: Runner
    session: Session
    control: RunControl
    # The cassette the run replays (a `Replayer`), for its report; None when not replayed.
    replayer: Any = None

    @property
    def run_id(self) -> str:
        return self.runner.run_id

    @property
    def workflow(self) -> Workflow:
        return self.runner.workflow

    @property
    def state(self) -> RunState:
        return self.runner.state

    async def run(self) -> RunResult:
        """Run to the end on the running event loop, shown by its session (a cancellation
        is recorded in the run's state, then re-raised)."""
        return await self.session.run(self._execute)

    def run_sync(self) -> RunResult:
        """Run to the end on a new event loop owned by the session (no loop may be
        running in this thread)."""
        return self.session.run_sync(self._execute)

    def result(self) -> RunResult:
        """The run's result as it stands (a run still going, or cancelled before its end)."""
        return RunResult(self.state, self.runner.config.store, self.replay_report())  # type: ignore[arg-type]

    async def _execute(self) -> RunResult:
        try:
            state = await self.runner.execute()
        finally:
            # The run's last spans sent to the live trace endpoint, off the loop (bounded by
            # the exporter's own timeouts; at once without one): a script may end right
            # after its run.
            sink = self.runner.config.sink
            if isinstance(sink, Tracer):
                await asyncio.to_thread(sink.wait, None)
        return RunResult(state, self.runner.config.store, self.replay_report())  # type: ignore[arg-type]

    def replay_report(self) -> ReplayReport | None:
        """What the run's cassette replayed and what did not match (None: not replayed)."""
        replayer = self.replayer
        if replayer is None:
            return None
        path = str(replayer.cassette.path)
        return ReplayReport(path, tuple(replayer.mismatches), replayer.unused)


def prepare_run(
    workflow: Workflow | PathLike | Resume,
    options: RunOptions | None = None,
    /,
    **fields: Any,
) -> PreparedRun:
    """Build a run's whole configuration and its `Runner`, once.

    `workflow`: a `Workflow`, a file path, a workflow name on the search path, YAML text —
    or `Resume(run_id, from_step=None)` to continue a stored run that failed, was
    cancelled or was interrupted. `options` (or the same fields as keywords, which change
    `options`): see `RunOptions`.

    Raises `UserError` / `DefinitionError` / `InputError` before anything runs: an
    unknown provider, a missing input or environment variable, a cassette that cannot be
    opened, a run that cannot be resumed.
    """
    if options is None:
        options = RunOptions(**fields)
    elif fields:
        options = dataclasses.replace(options, **fields)
    cwd = options.working_dir
    env = dict(os.environ if options.env is None else options.env)
    store = _store(options.storage)
    warnings: list[str] = []
    state = None
    start_step = None
    if isinstance(workflow, Resume):
        if store is None:
            raise UserError("a run can only be resumed from its storage (storage=False)")
        state, wf, values, start_step = _resumed(workflow, options, store, env, warnings)
        # the limits and simulated user it was started with (an eval's) apply again
        options = resumed_options(options, state.run_options)
    else:
        wf = load(workflow, cwd=cwd)
        _check_env(wf, env)
        # A caller's own provider factory may know names the registry does not.
        if options.providers is None and (problems := provider_problems(wf)):
            raise DefinitionError(problems)
        warnings = _check_roles_and_skills(wf, cwd, env)
        given = options.inputs
        values = resolve_inputs(wf, given, ask=options.ask, cwd=cwd, warnings=warnings)
    if options.providers is None:
        _check_simulated_user(options.user)
    masker = Masker.for_run(wf, values, env)
    # A replay calls no model, so it switches none (a bad spec is still an error).
    choice = model_choice(options.model, env) if options.providers is None else None
    providers, cassette, replays = _run_providers(
        options, workflow=wf, masker=masker, model=None if options.replay else choice
    )
    if replays:
        choice = None
    control = RunControl()
    session, reader = _answers(options, wf, store, control, replayed=replays)
    if cassette is not None:
        reader = cassette.reader(reader)  # the person's messages are recorded / replayed too
    config = RunConfig(
        providers=providers,
        sink=_traced(_first(options.sink, session.sink), options, env, store),
        reader=reader,
        store=store,
        env=env,
        cwd=cwd,
        masker=masker,
        load_child=_load_child,
        simulated_user=options.user,
        toolsets=_start_toolset,
        mcp_proxy=_mcp_proxy(),
        yes=options.yes,
        describe_provider=choice.describe if choice is not None else None,
        limits=options.limits,  # type: ignore[arg-type]  # made a Limits by RunOptions
        cost_limit=options.cost_limit,
        # A replay that leaves part of its cassette unused says so when the run ends.
        end_warnings=(cassette.end_warnings,) if replays else (),
        **_breakpoints(options, session, wf, paused=state is not None and bool(state.paused)),
    )
    runner = Runner(wf, values, config, state=state, start_step=start_step, warnings=warnings)
    control.bind(runner)
    if isinstance(config.sink, Tracer) and options.trace_cost is not None:
        config.sink.follow(lambda: runner.state)  # the run's cost, priced when it ends
    if state is None:
        runner.state.defaulted_inputs = [name for name in values if name not in options.inputs]
        kept = kept_options(runner.limits.limits, options.user)
        runner.state.run_options = masker.mask_data(kept)
    return PreparedRun(runner, session, control, cassette if replays else None)


def _breakpoints(
    options: RunOptions, session: Session, workflow: Workflow, *, paused: bool
) -> dict[str, Any]:
    """The run's breakpoints and who answers its pauses: `on_pause`, else the frontend's
    debugger (a person at the terminal, the notebook panel). Breakpoints asked for with
    nobody to answer them are a `UserError`; a workflow's own `breakpoint:` lines count
    when someone can answer (or `breakpoints=True`), so the file still runs in CI."""
    from awf_nb.engine.breakpoints import Breakpoints, CallbackDebugger, Debugger

    debugger: Debugger | None = session.debugger
    if options.on_pause is not None:
        given = options.on_pause
        debugger = given if isinstance(given, Debugger) else CallbackDebugger(given)
    from_file = options.breakpoints if options.breakpoints is not None else debugger is not None
    points = Breakpoints.of(options.break_before, options.break_after, from_file=from_file)
    points.check(workflow.steps)
    if debugger is None and (points.before or points.after or options.breakpoints):
        raise UserError(
            "breakpoints need someone to answer the pause: run in a terminal (awf run), "
            "in a notebook (%%awf), or pass on_pause= (Python)"
        )
    if not points and not paused:
        return {}
    return {"breakpoints": points, "debugger": debugger}


def _traced(
    sink: EventSink | None, options: RunOptions, env: Mapping[str, str], store: Store | None
) -> EventSink:
    """The run's sink, with its traces recorded in front of it (awf_nb/traces): the trace
    file in the run's store folder, the live export when an endpoint is set."""
    from awf_nb.traces import Tracing, file_enabled
    from awf_nb.traces.live import endpoint_from, headers_from

    url = endpoint_from(options.otlp, env)
    folder = store.run_dir if store is not None and file_enabled(options.trace_file, env) else None
    if url is None and folder is None:
        return sink if sink is not None else NullSink()
    tracing = Tracing(
        url=url,
        headers=headers_from(env),
        content=options.trace_content,
        folder=folder,
        tags=options.trace_tags,
        cost=options.trace_cost,
    )
    return Tracer(sink, tracing)


def load(source: Workflow | PathLike, *, cwd: Path | None = None) -> Workflow:
    """A workflow from a file path, a workflow name on the search path, or YAML text."""
    from awf_nb.workflow.loader import load_text, load_workflow

    if isinstance(source, Workflow):
        return source
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("name:")):
        return load_text(source, base_dir=cwd)
    return load_workflow(source, cwd=cwd)


# --- who answers -------------------------------------------------------------------------------


def _answers(
    options: RunOptions,
    workflow: Workflow,
    store: Store | None,
    control: RunControl,
    *,
    replayed: bool,
) -> tuple[Session, InputReader | None]:
    """The frontend's session (opened here, once, with the run's control; the headless
    `Session` without a frontend), and the reader the run gets: the replies given up
    front, else the caller's reader, else the session's (when it may ask the person)."""
    from awf_nb.runs.replies import ScriptedReader

    scripted = ScriptedReader(options.replies) if options.replies is not None else None
    own = _first(scripted, options.reader)
    session = Session()
    if options.frontend is not None:
        asks = options.interactive and own is None
        request = FrontendRequest(workflow, store, asks, replayed, options.interactive)
        session = options.frontend.open(request, control)
    return session, _first(own, session.reader)


def _first(*given: Any) -> Any:
    """The first of `given` that is not None (a sink or reader may be falsy: `__len__`)."""
    return next((item for item in given if item is not None), None)


# --- providers and cassettes -------------------------------------------------------------------


def default_providers(model: ModelChoice | None = None) -> ProviderFactory:
    """A fresh provider factory from the registry (one instance per name, per run), with
    `local` steps on the model `model` chose (providers/model_switch.py)."""
    from awf_nb.providers import provider_factory
    from awf_nb.providers.model_switch import switch_model

    return switch_model(provider_factory(), model)


def model_choice(model: str | None, env: Mapping[str, str]) -> ModelChoice | None:
    """What `local` steps run on: `model` (`--model`, `model=`), else $AWF_MODEL, else the
    bundled model (None). A spec that names nothing is a `UserError` before the run starts."""
    from awf_nb.providers.model_switch import MODEL_VARIABLE, parse_model

    spec = model if model is not None else env.get(MODEL_VARIABLE)
    return None if spec is None or (model is None and not spec.strip()) else parse_model(spec, env)


def _run_providers(
    options: RunOptions, *, workflow: Workflow, masker: Masker, model: ModelChoice | None
) -> tuple[ProviderFactory, Any, bool]:
    """The run's provider factory, the cassette it records to or replays from (None), and
    whether it replays.

    A replay never touches `options.providers` (nor the registry): no model is loaded, no
    server or agent CLI is called. The run's own `masker` masks everything written to a
    cassette. `record_missing` replays its cassette when the file exists, else records it.
    """
    own = options.providers
    record, replay, speed = options.record, options.replay, options.replay_speed
    if options.record_missing is not None:
        if Path(options.record_missing).exists():
            replay = options.record_missing
        else:
            record = options.record_missing
    if record is None and replay is None:
        if speed:
            from awf_nb.providers.cassette import check_speed

            check_speed(speed)
        return own or default_providers(model), None, False
    from awf_nb.providers.cassette import Replayer, open_cassette

    opened = open_cassette(
        record=record, replay=replay, speed=speed, workflow=workflow.name, masker=masker
    )
    if isinstance(opened, Replayer):
        return opened.providers(), opened, True
    assert opened is not None
    return opened.providers(own or default_providers(model)), opened, False


def _check_simulated_user(user: SimulatedUser | None) -> None:
    if user is None:
        return
    from awf_nb.providers import canonical_provider_name

    canonical_provider_name(user.provider)  # an unknown name: UserError with did-you-mean


# --- what the engine is handed -----------------------------------------------------------------


def _store(storage: Store | PathLike | bool | None) -> Store | None:
    if storage is False:
        return None
    if isinstance(storage, Store):
        return storage
    return Store(None if storage in (None, True) else storage)  # type: ignore[arg-type]


def _load_child(name: str, base_dir: Path) -> Workflow:
    from awf_nb.workflow.loader import find_workflow, load_workflow

    return load_workflow(find_workflow(name, relative_to=base_dir))


async def _start_toolset(
    config: Any, cwd: Path, env: Mapping[str, str], masker: Any, warn: Any = None
) -> Any:
    """The run's `ToolSetFactory`: an agent step's tools, MCP servers started."""
    from awf_nb.tools import build_toolset

    tools = build_toolset(config, cwd=cwd, env=env, masker=masker, warn=warn)
    await tools.start()
    return tools


def _mcp_proxy() -> McpProxyFactory:
    """The run's `McpProxyFactory` (`mcp_proxy` on an agent CLI step): its config files
    go when the run's config does (or at exit). The tools package is imported by the first
    step that uses it, not by every run."""
    proxy = None

    def serve(*args: Any) -> McpServerSpec:
        nonlocal proxy
        if proxy is None:
            from awf_nb.tools.proxy import McpProxy

            proxy = McpProxy()
        return proxy(*args)

    return serve


def _check_roles_and_skills(workflow: Workflow, cwd: Path, env: Mapping[str, str]) -> list[str]:
    """Every role and skill the workflow names must be there before anything runs (errors);
    what `awf validate` would warn about is returned, to show once the run starts."""
    from awf_nb.workflow.roles_skills import agent_file_problems

    problems = agent_file_problems(workflow, cwd=cwd, env=env)
    if any(p.severity == "error" for p in problems):
        raise DefinitionError(problems)
    return [f"{p.path}: {p.message}" for p in problems]


def _check_env(workflow: Workflow, env: Mapping[str, str]) -> None:
    missing = [name for name in workflow.env if not env.get(name)]
    if missing:
        raise UserError(
            f"workflow {workflow.name} needs environment variables that are not set: "
            + ", ".join(missing)
        )


# --- resuming ----------------------------------------------------------------------------------


def _resumed(
    resume: Resume, options: RunOptions, store: Store, env: Mapping[str, str], warnings: list[str]
) -> tuple[RunState, Workflow, dict[str, Any], str]:
    """The stored run, its workflow (as it was written), its inputs, and where it goes on."""
    from awf_nb.workflow.loader import load_text, load_workflow

    state = store.load_state(resume.run_id)
    if state.workflow_source:
        path = Path(state.workflow_path) if state.workflow_path else None
        workflow = load_text(
            state.workflow_source,
            file=state.workflow_path or "<inline>",
            base_dir=path.parent if path else None,
            path=path,
        )
    else:
        workflow = load_workflow(state.workflow_path)
    start = resume.from_step or state.current_step or workflow.initial
    if start not in workflow.steps:
        raise UserError(
            f'step "{start}" is not in workflow {workflow.name} '
            f"(steps: {', '.join(workflow.steps)})"
        )
    if state.is_alive_elsewhere():
        raise UserError(
            f"run {state.run_id} is still running (process {state.pid}); "
            "stop it first, or wait for it to finish"
        )
    if state.status == "completed" and resume.from_step is None:
        raise UserError(
            f"run {state.run_id} already completed; use --from STEP to run it again from a step"
        )
    given = options.inputs
    values = dict(state.inputs)
    values.update(given)
    masked = [k for k, v in values.items() if v == MASK and k not in given]
    for name in masked:  # secrets are never stored: take them from the environment again
        declared = workflow.input(name)
        if name in state.defaulted_inputs and declared is not None and declared.default is not None:
            values[name] = declared.default  # written in the (privately kept) workflow text
        elif env.get(name):
            values[name] = env[name]
    still = [k for k in masked if values[k] == MASK]
    if still:
        raise UserError(
            "secret inputs were not stored with the run; give them again with "
            + " ".join(f"-i {k}=…" for k in still)
            + " (or set them as environment variables)"
        )
    if state.shown_status() == "interrupted":  # its process died: say so before going on
        warnings.append(
            f"run {state.run_id} was interrupted at step {state.current_step or start} "
            f"(its process {state.pid} ended without finishing it); resuming at step {start}"
        )
    return state, workflow, values, start
