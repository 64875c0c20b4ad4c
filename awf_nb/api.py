"""The Python API: `load`, `arun`, `run`, `RunResult` — and the run set-up the CLI and the
notebook share (`prepare_run`, `prepare_resume`).

    result = awf_nb.run("workflows/code-review.yaml", inputs={"target": "src"})
    result = await awf_nb.arun(yaml_text, replies=["yes", ""])
    result = awf_nb.run("chat.yaml", record="chat.cassette.jsonl")   # then replay="…"
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine.exchange import ExchangeTurn, run_exchange
from awf_nb.engine.inputs import AskFunction, resolve_inputs
from awf_nb.engine.partner import SimulatedUser
from awf_nb.engine.ports import (
    EventSink,
    InputReader,
    McpProxyFactory,
    McpServerSpec,
    ProviderFactory,
)
from awf_nb.engine.run import RunConfig, Runner
from awf_nb.engine.state import RunState, StepState
from awf_nb.errors import AwfError, DefinitionError, UserError
from awf_nb.frontends.connect import Show
from awf_nb.secrets import Masker
from awf_nb.store import Store
from awf_nb.workflow.model import Workflow

if TYPE_CHECKING:
    from awf_nb.providers.model_switch import ModelChoice

MASK = "***"


def load(source: str | os.PathLike[str] | Workflow, *, cwd: Path | None = None) -> Workflow:
    """A workflow from a file path, a workflow name on the search path, or YAML text."""
    from awf_nb.workflow.loader import load_text, load_workflow

    if isinstance(source, Workflow):
        return source
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("name:")):
        return load_text(source, base_dir=cwd)
    return load_workflow(source, cwd=cwd)


def _load_child(name: str, base_dir: Path) -> Workflow:
    from awf_nb.workflow.loader import find_workflow, load_workflow

    return load_workflow(find_workflow(name, relative_to=base_dir))


def _store(storage: Store | str | os.PathLike[str] | bool | None) -> Store | None:
    if storage is False:
        return None
    if isinstance(storage, Store):
        return storage
    return Store(None if storage in (None, True) else storage)  # type: ignore[arg-type]


def _providers(providers: ProviderFactory | None, model: ModelChoice | None) -> ProviderFactory:
    """A caller's own factory as it is; else the registry's, with `local` steps on the
    model `--model` / $AWF_MODEL chose (providers/model_switch.py)."""
    if providers is not None:
        return providers
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
    providers: ProviderFactory | None,
    *,
    workflow: Workflow,
    masker: Masker,
    record: str | os.PathLike[str] | None,
    replay: str | os.PathLike[str] | None,
    speed: float,
    model: ModelChoice | None = None,
) -> ProviderFactory:
    """The run's provider factory: recorded to a cassette, or replaced by one's replay.

    A replay never touches `providers` (nor the registry): no model is loaded, no server or
    agent CLI is called. The run's own `masker` masks everything written to a cassette.
    """
    if record is None and replay is None:
        if speed:
            from awf_nb.providers.cassette import check_speed

            check_speed(speed)
        return _providers(providers, model)
    from awf_nb.providers.cassette import Replayer, open_cassette

    opened = open_cassette(
        record=record, replay=replay, speed=speed, workflow=workflow.name, masker=masker
    )
    if isinstance(opened, Replayer):
        return opened.providers()
    assert opened is not None
    return opened.providers(_providers(providers, model))


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


def _run_config(
    workflow: Workflow,
    masker: Masker,
    providers: ProviderFactory | None,
    reader: InputReader | None,
    sink: EventSink | None,
    store: Store | None,
    env: Mapping[str, str],
    cwd: Path,
    user: SimulatedUser | None,
    yes: bool,
    *,
    record: str | os.PathLike[str] | None,
    replay: str | os.PathLike[str] | None,
    replay_speed: float,
    model: str | None = None,
) -> RunConfig:
    """What a new run and a resumed one are both given: providers (recorded or replayed,
    `local` switched to `model`), the person's side, the store, tools and `mcp_proxy`."""
    # A replay calls no model, so it switches none (a bad spec is still an error).
    choice = model_choice(model, env) if providers is None else None
    if replay is not None:
        choice = None
    config = RunConfig(
        providers=_run_providers(
            providers, workflow=workflow, masker=masker, record=record, replay=replay,
            speed=replay_speed, model=choice,
        ),
        reader=reader,
        store=store,
        env=env,
        cwd=cwd,
        masker=masker,
        load_child=_load_child,
        simulated_user=user,
        toolsets=_start_toolset,
        mcp_proxy=_mcp_proxy(),
        yes=yes,
        describe_provider=choice.describe if choice is not None else None,
    )  # fmt: skip
    if sink is not None:
        config.sink = sink
    return config


def use_cassette_input(runner: Runner) -> None:
    """Record the person's messages too, or serve the recorded ones first.

    Call it once a frontend has given the runner its input reader (`connect`): the reader
    is only known then. Does nothing for a run without a cassette; calling it twice is
    harmless.
    """
    if "awf_nb.providers.cassette" not in sys.modules:
        return  # no cassette can exist before its module is loaded: not worth importing it
    from awf_nb.providers.cassette import Replayer, cassette_of

    cassette = cassette_of(runner.config.providers)
    if cassette is not None:
        runner.config.reader = cassette.reader(runner.config.reader)
    if isinstance(cassette, Replayer) and cassette.end_warnings not in runner.config.end_warnings:
        runner.config.end_warnings.append(cassette.end_warnings)


def prepare_run(
    workflow: Workflow,
    inputs: Mapping[str, Any] | None = None,
    *,
    reader: InputReader | None = None,
    sink: EventSink | None = None,
    store: Store | None = None,
    providers: ProviderFactory | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    ask: AskFunction | None = None,
    user: SimulatedUser | None = None,
    record: str | os.PathLike[str] | None = None,
    replay: str | os.PathLike[str] | None = None,
    replay_speed: float = 0.0,
    yes: bool = False,
    model: str | None = None,
) -> Runner:
    """Validate inputs and build a `Runner` ready to `await runner.execute()`.

    `user`: an agent that plays the person in every conversation the person would answer.
    `yes=True` runs tool calls that ask for confirmation without asking.
    `record=PATH` writes a cassette of the run; `replay=PATH` serves its provider turns
    (and person messages) from one, `replay_speed` times the recorded delays (0: at once).
    `model="ollama:llama3.2"` (else $AWF_MODEL) runs `provider: local` steps on that model.
    """
    cwd = (cwd or Path.cwd()).resolve()
    env = dict(os.environ if env is None else env)
    _check_env(workflow, env)
    if providers is None:  # a caller's own factory may know names the registry does not
        from awf_nb.providers import provider_problems

        if problems := provider_problems(workflow):
            raise DefinitionError(problems)
        _check_simulated_user(user)
    warnings = _check_roles_and_skills(workflow, cwd, env)
    resolved = resolve_inputs(workflow, inputs or {}, ask=ask, cwd=cwd, warnings=warnings)
    masker = Masker.for_run(workflow, resolved, env)
    config = _run_config(
        workflow, masker, providers, reader, sink, store, env, cwd, user, yes,
        record=record, replay=replay, replay_speed=replay_speed, model=model,
    )  # fmt: skip
    runner = Runner(workflow, resolved, config)
    use_cassette_input(runner)
    runner.state.defaulted_inputs = [name for name in resolved if name not in (inputs or {})]
    runner.startup_warnings.extend(warnings)
    return runner


def _check_roles_and_skills(workflow: Workflow, cwd: Path, env: Mapping[str, str]) -> list[str]:
    """Every role and skill the workflow names must be there before anything runs (errors);
    what `awf validate` would warn about is returned, to show once the run starts."""
    from awf_nb.workflow.roles_skills import agent_file_problems

    problems = agent_file_problems(workflow, cwd=cwd, env=env)
    if any(p.severity == "error" for p in problems):
        raise DefinitionError(problems)
    return [f"{p.path}: {p.message}" for p in problems]


def _transcript(store: Any, run_id: str) -> list[dict[str, Any]] | None:
    """The run's transcript records, or None when the run is not stored."""
    reader = getattr(store, "read_transcript", None)
    return reader(run_id) if reader is not None else None


def status_json(state: RunState, store: Any) -> str:
    """`awf status --json`: the run's state, with its conversation in order (`exchange`)."""
    data = json.loads(state.to_json())
    records = _transcript(store, state.run_id)
    data["exchange"] = [turn.as_dict() for turn in run_exchange(state, records)]
    return json.dumps(data, indent=2)


def _check_simulated_user(user: SimulatedUser | None) -> None:
    if user is None:
        return
    from awf_nb.providers import canonical_provider_name

    canonical_provider_name(user.provider)  # an unknown name: UserError with did-you-mean


def simulated_user(
    persona: str | None, *, provider: str | None = None, max_turns: int | None = None
) -> SimulatedUser | None:
    """The simulated user `--simulate-user TEXT|@FILE [--user-provider P] [--max-turns N]`
    asks for (None without a persona); `@FILE` reads the persona from a file."""
    if persona is None:
        if provider is not None or max_turns is not None:
            raise UserError("--user-provider and --max-turns need --simulate-user")
        return None
    if persona.startswith("@"):
        from awf_nb.workflow.files import read_text_capped

        path = Path(persona[1:]).expanduser()
        try:
            persona = read_text_capped(path)
        except OSError as exc:
            raise UserError(
                f"--simulate-user {persona}: cannot read {path}: {exc.strerror or exc}"
            ) from None
    if not persona.strip():
        raise UserError("--simulate-user: the persona is empty; say who the user is")
    turns = 5 if max_turns is None else max_turns
    if not 1 <= turns <= 1000:
        raise UserError(f"--max-turns must be between 1 and 1000, got {turns}")
    return SimulatedUser(persona=persona, provider=provider or "local", max_turns=turns)


def _check_env(workflow: Workflow, env: Mapping[str, str]) -> None:
    missing = [name for name in workflow.env if not env.get(name)]
    if missing:
        raise UserError(
            f"workflow {workflow.name} needs environment variables that are not set: "
            + ", ".join(missing)
        )


def prepare_resume(
    run_id: str,
    *,
    store: Store,
    from_step: str | None = None,
    inputs: Mapping[str, Any] | None = None,
    reader: InputReader | None = None,
    sink: EventSink | None = None,
    providers: ProviderFactory | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    user: SimulatedUser | None = None,
    record: str | os.PathLike[str] | None = None,
    replay: str | os.PathLike[str] | None = None,
    replay_speed: float = 0.0,
    yes: bool = False,
    model: str | None = None,
) -> Runner:
    """A `Runner` that continues a failed, cancelled or interrupted run from a step
    (`record`, `replay`, `replay_speed`, `model`: as for `prepare_run`)."""
    from awf_nb.workflow.loader import load_text, load_workflow

    state = store.load_state(run_id)
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
    start = from_step or state.current_step or workflow.initial
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
    if state.status == "completed" and from_step is None:
        raise UserError(
            f"run {state.run_id} already completed; use --from STEP to run it again from a step"
        )
    env = dict(os.environ if env is None else env)
    values = dict(state.inputs)
    values.update(inputs or {})
    masked = [k for k, v in values.items() if v == MASK and k not in (inputs or {})]
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
    masker = Masker.for_run(workflow, values, env)
    config = _run_config(
        workflow, masker, providers, reader, sink, store, env, (cwd or Path.cwd()).resolve(),
        user, yes, record=record, replay=replay, replay_speed=replay_speed, model=model,
    )  # fmt: skip
    runner = Runner(workflow, values, config, state=state, start_step=start)
    use_cassette_input(runner)
    if state.shown_status() == "interrupted":  # its process died: say so before going on
        runner.startup_warnings.append(
            f"run {state.run_id} was interrupted at step {state.current_step or start} "
            f"(its process {state.pid} ended without finishing it); resuming at step {start}"
        )
    return runner


@dataclass
class RunResult:
    """What a finished run produced. `steps["chat"].conversation.turns` etc.; the whole
    conversation in order as `exchange`, and why the run ended as `completion_reason`."""

    state: RunState
    store: Store | None = field(default=None, repr=False)  # where its transcript is

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def ok(self) -> bool:
        return self.state.status == "completed"

    @property
    def error(self) -> str:
        return self.state.error

    @property
    def message(self) -> str:
        return self.state.message

    @property
    def exit_code(self) -> int:
        return self.state.exit_code

    @property
    def steps(self) -> dict[str, StepState]:
        return self.state.steps

    @property
    def outputs(self) -> dict[str, str]:
        """Each executed step's `Output`."""
        return {name: step.output for name, step in self.state.steps.items()}

    @property
    def tokens(self) -> int:
        """The run's tokens: every reply's input + output tokens, both sides of every
        conversation, as the summary and `awf status` show them."""
        return self.state.total_tokens

    @property
    def tokens_estimated(self) -> bool:
        """Whether some of `tokens` are the len/4 estimate (a provider reported no usage)."""
        return self.state.tokens_estimated

    @property
    def completion_reason(self) -> str:
        """`terminal`, `failure_terminal`, `step_failed`, `limit` or `cancelled`."""
        return self.state.completion_reason

    @property
    def exchange(self) -> list[ExchangeTurn]:
        """Every message of the run in order: speaker, step, turn, text, tokens, start
        time, duration (engine/exchange.py)."""
        return run_exchange(self.state, _transcript(self.store, self.state.run_id))

    @property
    def duration(self) -> float:
        """Seconds spent running, summed over resumes (not the time it sat interrupted)."""
        return self.state.duration

    def raise_for_status(self) -> RunResult:
        if not self.ok:
            from awf_nb.errors import ExecutionError

            raise ExecutionError(f"workflow {self.state.workflow_name} {self.status}: {self.error}")
        return self

    def summary(self) -> str:
        """What the run did, as text: outcome, figures, each step, how to continue."""
        from awf_nb.engine.summary import RunSummary

        return RunSummary.from_state(self.state).to_text()

    def __repr__(self) -> str:
        return f"<RunResult {self.state.workflow_name} {self.status} run={self.run_id}>"

    def to_json(self) -> str:
        return self.state.to_json()

    def as_dict(self) -> dict[str, Any]:
        return json.loads(self.state.to_json())


async def arun(
    workflow: str | os.PathLike[str] | Workflow,
    inputs: Mapping[str, Any] | None = None,
    *,
    replies: Iterable[str] | None = None,
    reader: InputReader | None = None,
    sink: EventSink | None = None,
    show: Show = "auto",
    storage: Store | str | os.PathLike[str] | bool | None = None,
    providers: ProviderFactory | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    user: SimulatedUser | None = None,
    record: str | os.PathLike[str] | None = None,
    replay: str | os.PathLike[str] | None = None,
    replay_speed: float = 0.0,
    yes: bool = False,
    model: str | None = None,
) -> RunResult:
    """Run a workflow on the running event loop and return its result.

    `show` picks how the run is shown (`frontends.connect.pick_frontend`): "auto" (the
    default) shows it where someone can see it — the live panel in a notebook, streamed
    replies and progress in a terminal — and nothing in a script whose output is not a
    terminal; True always shows it, False never. A `sink` of your own replaces all that.

    `replies` answers conversation turns in order (then end of input). In a terminal where
    a person types (stdin and stderr are terminals, and `show` is not False), a
    conversation asks at a `> ` prompt; otherwise, without `replies` or `reader`, it ends
    after its first reply. (To chat in a notebook, use the `%%awf` magic.)
    `user=awf_nb.SimulatedUser(persona=..., provider="local", max_turns=5)` lets an agent
    play the person in every conversation, for testing a conversational workflow.
    Runs are stored (state file, transcript, history) unless `storage=False`.

    `record=PATH` writes every provider turn and person message to a cassette (secrets
    masked); `replay=PATH` runs again from one without calling any provider, answering the
    conversation with the recorded messages first. `replay_speed` multiplies the recorded
    delays: 0 (the default) replays at once, 1 at the original pace.
    `yes=True` runs tool calls listed in a step's `tools.confirm` without asking (a run
    with nobody to ask refuses them otherwise).
    `model="ollama:llama3.2"` runs every `provider: local` step on that model instead of
    the bundled one (default: $AWF_MODEL; the forms are in docs/providers.md).
    """
    base = Path(cwd) if cwd is not None else None
    wf = load(workflow, cwd=base)
    runner = prepare_run(
        wf,
        inputs,
        reader=reader,
        sink=sink,
        store=_store(storage),
        providers=providers,
        cwd=base,
        env=env,
        user=user,
        record=record,
        replay=replay,
        replay_speed=replay_speed,
        yes=yes,
        model=model,
    )
    if sink is None:
        _show(runner, show, replies=None if replies is None else list(replies), reader=reader)
    elif reader is None and replies is not None:
        from awf_nb.frontends.scripted import ScriptedReader

        runner.config.reader = ScriptedReader(replies)
    use_cassette_input(runner)
    return RunResult(await runner.execute(), runner.config.store)  # type: ignore[arg-type]


def _show(runner: Runner, show: Show, *, replies: list[str] | None, reader: Any) -> None:
    """Connect the frontend `show` picks; a caller's own `reader` keeps answering."""
    from awf_nb.frontends.connect import connect, pick_frontend

    frontend = pick_frontend(show)
    person_types = frontend == "terminal" and sys.stdin.isatty() and reader is None
    shown = connect(runner, frontend, replies=replies, interactive=person_types)
    if reader is not None:
        runner.config.reader = reader
    if frontend == "notebook":
        from awf_nb.frontends.notebook.panel import RunPanel, display_panel

        assert isinstance(shown, RunPanel)
        display_panel(shown)
        loop = asyncio.get_running_loop()
        shown.attach(stop=runner.interrupt_turn, cancel=runner.cancel, loop=loop)


def run(
    workflow: str | os.PathLike[str] | Workflow,
    inputs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> RunResult:
    """Synchronous `arun`. Inside a running event loop (a notebook), use `await arun(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(workflow, inputs, **kwargs))
    raise AwfError(
        "awf_nb.run() cannot be used inside a running event loop",
        hint="use `await awf_nb.arun(...)` instead (or the %%awf magic in a notebook)",
    )
