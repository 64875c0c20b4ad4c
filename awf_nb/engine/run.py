"""The run loop: pick a step, execute it, route to the next one, checkpoint, repeat.

`Runner` owns one run of one workflow. It knows nothing about terminals, notebooks or
concrete providers: it is handed a `RunConfig` with a provider factory, an input reader, an
event sink and a store. Step kinds are executed by `steps.py`, agent turns by `agent.py`,
conversations by `conversation.py`.

Routing (spec §4): on success, the first true `transitions` entry, else `on_success`; on
failure, `transitions` for command steps, then `continue_on_error` → `on_success`, else
`on_failure` (a step name, or an inline `{message, status}` that fails the run), else the
run fails with `step X: <error>`. Only a terminal step ends a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine import events as ev
from awf_nb.engine.context import LoopFrame, RunContext, command_env
from awf_nb.engine.limits import RunBudget, RunLimitReached
from awf_nb.engine.ports import (
    EventSink,
    InputReader,
    McpProxyFactory,
    Provider,
    ProviderFactory,
    RunStore,
    ToolSetFactory,
)
from awf_nb.engine.process import run_shell
from awf_nb.engine.state import RunState, StepState, Turn, new_run_id, now, process_start_time
from awf_nb.engine.summary import RunSummary, format_duration
from awf_nb.errors import EXIT_SYSTEM, AwfError, internal_error
from awf_nb.secrets import Masker, is_secret_input
from awf_nb.workflow.model import (
    AnyStep,
    CommandStep,
    HookAction,
    InlineFailure,
    TerminalStep,
    Workflow,
)

if TYPE_CHECKING:
    from awf_nb.engine.partner import SimulatedUser

# A runaway transitions cycle must end somewhere; loops have their own max_iterations.
MAX_STEP_EXECUTIONS = 100_000
MAX_CALL_DEPTH = 10


class NullSink:
    def emit(self, event: ev.RunEvent) -> None:
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
        """Close every provider once (aliases may share an instance); never raises."""
        instances, self._instances = self._instances, {}
        unique = {id(provider): provider for provider in instances.values()}
        for provider in unique.values():
            with contextlib.suppress(Exception):
                await provider.aclose()


@dataclass
class RunConfig:
    """Everything a run needs from outside the workflow file."""

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
    # The run's providers: made by the top-level run, passed on to called workflows.
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
    # Asked when the top-level run ends, before its summary: warnings to show (a replay
    # that left part of its cassette unused).
    end_warnings: list[Callable[[RunState], list[str]]] = field(default_factory=list)


class _RunEnds(Exception):
    """Raised inside the loop when the run must end here (inline failure, fatal route).

    `reason` becomes the run's `completion_reason`."""

    def __init__(self, message: str, exit_code: int = 3, reason: str = "step_failed") -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.reason = reason


@dataclass
class StepOutcome:
    state: StepState
    jump: str | None = None  # a loop body routed out of its loop to this step


class TurnInterruption:
    """The span of a turn that Ctrl-C / Stop cuts short: a reply streaming, its tool calls
    running (`Runner.interruptible`).

    `Runner.interrupt` cancels the task running the turn, and leaving the span ends that
    cancellation there (`uncancel`): the turn goes on, marked interrupted (`happened`).
    A cancellation someone else asked for too (the run's, a task group's) goes on up.
    The task itself is cancelled, not a child task made for the span: a turn's rounds
    then cost no task and no extra passes of the event loop.
    """

    __slots__ = ("_run", "_task", "happened")

    def __init__(self, run: Runner) -> None:
        self._run = run
        self._task: asyncio.Task[Any] | None = None
        self.happened = False

    def __enter__(self) -> TurnInterruption:
        self._task = asyncio.current_task()
        self._run._turn_task, self._run._turn_interrupted = self._task, False
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        run, task = self._run, self._task
        run._turn_task = None
        if not run._turn_interrupted or task is None:
            return False
        run._turn_interrupted = False
        if task.uncancel() > 0:  # cancelled by someone else too: that goes on
            return False
        if exc_type is not None and not issubclass(exc_type, asyncio.CancelledError):
            return False  # another error came first: it is what the caller must see
        self.happened = True
        return True  # the CancelledError that interrupt() caused ends here


class Runner:
    def __init__(
        self,
        workflow: Workflow,
        inputs: Mapping[str, Any],
        config: RunConfig,
        *,
        state: RunState | None = None,
        start_step: str | None = None,
    ) -> None:
        self.workflow = workflow
        self.config = config
        self.masker = config.masker
        for item in workflow.inputs:  # a called workflow's own secret inputs
            value = inputs.get(item.name)
            if isinstance(value, str) and is_secret_input(item.name, item.secret):
                self.masker.add(value)
        self.resumed = state is not None
        self.startup_warnings: list[str] = []  # shown once the run has started
        self._error_codes: dict[str, int] = {}  # step -> exit code of its last error
        store = config.store
        self.state = state or RunState(
            run_id=store.new_run_id() if store else new_run_id(),
            workflow_name=workflow.name,
            workflow_path=str(workflow.source_path or ""),
            # Kept exactly as written, so the run can be resumed; the store keeps it in a
            # file of its own, private to the user, and never shows it.
            workflow_source=workflow.source_text,
            parent_run_id=config.parent_run_id,
        )
        self.state.inputs = self.masker.mask_data(dict(inputs))
        self.start_step = start_step or workflow.initial
        # `awf resume` re-opens the conversation of the step it starts at, once; later
        # executions of that step (a loop) start afresh as usual.
        self._restore_step = self.start_step if self.resumed else None
        # When the interrupted session last saved: a step it left running ran until then.
        self._interrupted_at = self.state.saved_at
        self.ctx = RunContext(
            state=self.state,
            inputs=inputs,
            env=config.env,
            cwd=config.cwd,
            base_dir=workflow.base_dir,
        )
        if config.provider_set is None:  # the top-level run: it owns the providers
            config.provider_set = ProviderSet(config.providers)
            self._owns_providers = True
        else:
            self._owns_providers = False
        self._task: asyncio.Task[Any] | None = None
        self._turn_task: asyncio.Task[Any] | None = None
        self._turn_interrupted = False
        self._executions = 0
        self._warned: set[str] = set()
        self.limits = RunBudget(workflow.limits, self.state)
        self._visits: dict[str, StepState] = {}  # each step's state from its previous visit

    # --- public control ---------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def cancel(self) -> None:
        """Cancel the whole run (state persisted, `stopped_by: cancelled` in a conversation)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def interrupt(self) -> str:
        """Ctrl-C / Stop: interrupt the reply being streamed (or its tool calls), else
        cancel the run.

        Returns "turn" or "run" so the frontend can tell the user what happened.
        """
        if self.interrupt_turn():
            return "turn"
        self.cancel()
        return "run"

    def interrupt_turn(self) -> bool:
        """Interrupt the reply being streamed (or its tool calls) and nothing else; False
        when no reply is being streamed (a frontend with a separate "cancel run")."""
        if self._turn_task is None or self._turn_task.done():
            return False
        if not self._turn_interrupted:  # a second press before the first took effect
            self._turn_interrupted = True
            self._turn_task.cancel()
        return True

    def interruptible(self) -> TurnInterruption:
        """`with run.interruptible() as cut:` — the part of a turn Ctrl-C / Stop cuts short
        (`cut.happened` afterwards)."""
        return TurnInterruption(self)

    # --- the loop -----------------------------------------------------------------------------

    async def execute(self) -> RunState:
        """Run to a terminal step. Cancellation is recorded, then re-raised."""
        self._task = asyncio.current_task()
        state = self.state
        state.status = "running"
        state.error = ""
        state.completion_reason = ""
        state.completed_at = None
        same_host = state.host in ("", socket.gethostname())
        state.pid, state.host = os.getpid(), socket.gethostname()
        state.pid_started = process_start_time(state.pid)
        self.emit(ev.RunStarted(self.run_id, self.workflow.name, state.inputs, self.resumed))
        if self.resumed and same_host:  # a group id means nothing on another machine
            self._stop_leftover_commands()
        for warning in self.startup_warnings:
            self.emit(ev.RunWarning(self.run_id, self.masker.mask(warning), ""))
        self.checkpoint(history=True)
        try:
            await self._hooks(self.workflow.hooks.workflow_start, step="")
            try:
                async with asyncio.timeout(self.limits.remaining_time()):
                    await self._drive(self.start_step)
            except TimeoutError:
                raise _RunEnds(self.limits.timeout_message(), reason="limit") from None
            if state.status == "completed":
                await self._hooks(self.workflow.hooks.workflow_end, step="")
        except asyncio.CancelledError:
            state.status = "cancelled"
            state.completion_reason = "cancelled"
            state.error = "run cancelled"
            state.exit_code = 130
            self._finish()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(self._hooks(self.workflow.hooks.workflow_cancel, step=""))
            raise
        except (_RunEnds, AwfError) as exc:
            state.status = "failed"
            state.error = self.masker.mask(exc.message if isinstance(exc, _RunEnds) else str(exc))
            state.exit_code = exc.exit_code
            state.completion_reason = exc.reason if isinstance(exc, _RunEnds) else "step_failed"
            await self._error_hooks()
        except Exception as exc:  # a bug: the run failed (never left "running"); the
            state.status = "failed"  # caller reports it, with the traceback under --debug
            state.error = self.masker.mask(internal_error(exc))
            state.exit_code = EXIT_SYSTEM
            state.completion_reason = "step_failed"
            raise
        finally:
            if state.status in ("completed", "failed"):
                self._finish()
            await self._close_providers()
        return state

    def _stop_leftover_commands(self) -> None:
        """Commands the interrupted run left behind (awf was killed while they ran) are
        stopped before anything runs again, so a resumed step never runs twice at once."""
        from awf_nb.engine.process import kill_leftover_group

        for st in self.state.steps.values():
            if st.process_group:
                if kill_leftover_group(st.process_group):
                    self.emit(
                        ev.RunWarning(
                            self.run_id,
                            f"step {st.name}: its command was still running from the "
                            f"interrupted run (process group {st.process_group}); stopped it",
                            st.name,
                        )
                    )
                st.process_group = 0
            for group in st.process_groups:  # an agent step's tools, servers, CLI
                if kill_leftover_group(group.pgid, tag=group.tag):
                    self.emit(
                        ev.RunWarning(
                            self.run_id,
                            f"step {st.name}: processes it started were still running from "
                            f"the interrupted run (process group {group.pgid}); stopped them",
                            st.name,
                        )
                    )
            st.process_groups = []

    def _finish(self) -> None:
        state = self.state
        state.completed_at = now()
        if self._owns_providers:
            for check in self.config.end_warnings:
                for warning in check(state):
                    self.emit(ev.RunWarning(self.run_id, self.masker.mask(warning), ""))
        self.checkpoint(history=True)
        self.emit(ev.RunFinished(self.run_id, RunSummary.from_state(state)))

    async def _drive(self, start: str) -> None:
        current = start
        while True:
            step = self._step(current)
            if isinstance(step, TerminalStep):
                await self._terminal(step)
                return
            outcome = await self.run_step(step)
            current = outcome.jump or self.route(step, outcome.state)

    async def _terminal(self, step: TerminalStep) -> None:
        state = self.state
        state.current_step = step.name
        st = StepState(name=step.name, status="completed", started_at=now(), completed_at=now())
        message = self.ctx.render(step.message, step=step.name, what="message")
        st.output = message = self.masker.mask(message)
        state.steps[step.name] = st
        state.executed.append(step.name)
        self.ctx.refresh(st)
        state.message = message
        if step.status == "failure":
            raise _RunEnds(
                message or f"workflow ended in failure state {step.name}",
                reason="failure_terminal",
            )
        state.status = "completed"
        state.completion_reason = "terminal"
        state.exit_code = 0

    def _step(self, name: str) -> AnyStep:
        try:
            return self.workflow.steps[name]
        except KeyError:
            raise _RunEnds(f'unknown step "{name}"') from None

    def route(self, step: AnyStep, st: StepState, loop: LoopFrame | None = None) -> str:
        """The name of the next step, or raise `_RunEnds` when the run must fail here."""
        if st.status == "completed":
            target = self._transition(step, st, loop)
            target = target or getattr(step, "on_complete", None) or step.on_success
            if target:
                return target
            raise _RunEnds(
                f"step {step.name}: no next step (add on_success or transitions)",
            )
        if isinstance(step, CommandStep) and step.transitions:
            target = self._transition(step, st, loop)
            if target:
                return target
        if step.continue_on_error and step.on_success:
            return step.on_success
        if isinstance(step.on_failure, str):
            return step.on_failure
        if isinstance(step.on_failure, InlineFailure):
            message = self.ctx.render(
                step.on_failure.message, step=step.name, what="on_failure.message", loop=loop
            )
            raise _RunEnds(self.masker.mask(message or st.error), step.on_failure.status)
        # A failure nobody routes ends the run with its error's exit code: a missing agent
        # CLI is the user's to fix (1), a bad option the workflow's (2), the rest 3.
        raise _RunEnds(f"step {step.name}: {st.error}", self._error_codes.get(step.name, 3))

    def _transition(self, step: AnyStep, st: StepState, loop: LoopFrame | None) -> str | None:
        for transition in step.transitions:
            if transition.when is None or self.ctx.condition(
                transition.when, step=step.name, what="transition", loop=loop
            ):
                return transition.goto
        return None

    # --- executing one step -------------------------------------------------------------------

    async def run_step(self, step: AnyStep, loop: LoopFrame | None = None) -> StepOutcome:
        """Execute one step with its hooks and retries; record and checkpoint its state."""
        from awf_nb.engine import steps

        self._executions += 1
        if self._executions > MAX_STEP_EXECUTIONS:
            raise _RunEnds(f"stopped after {MAX_STEP_EXECUTIONS} step executions (a cycle?)")
        state = self.state
        state.current_step = step.name
        previous = state.steps.get(step.name)
        restoring = step.name == self._restore_step
        if not restoring and (capped := self._visit_cap(step, previous)) is not None:
            return capped
        if previous is not None:
            self._visits[step.name] = previous
            if not restoring and not previous.sums_branches:
                state.earlier_tokens += previous.tokens_used  # that visit's tokens were spent
        st = StepState(name=step.name, status="running", started_at=now())
        if previous is not None and restoring:
            st.visit, st.visits = previous.visit, previous.visits
        elif previous is not None:
            earlier = self.workflow.limits.visits_kept - 1  # with this one, visits_kept
            st.visits = [*previous.visits, previous.as_visit()][-earlier:] if earlier else []
            st.visit = state.visits.get(step.name, previous.visit + 1)
        if restoring:
            self._restore_step = None
            if previous is not None and previous.conversation is not None:
                # A conversation re-opened by resume carries on from what it had: its
                # output is the last reply, its tokens those of the turns so far.
                st.conversation = previous.conversation
                carried = ("output", "response", "tokens_input", "tokens_output", "tokens_used",
                           "tokens_estimated")  # fmt: skip
                for name in carried:
                    setattr(st, name, getattr(previous, name))
                st.earlier_seconds = previous.seconds_until(self._interrupted_at)
        state.steps[step.name] = st
        state.executed.append(step.name)
        self.checkpoint()
        await self._hooks(step.hooks.pre, step=step.name, loop=loop)
        jump: str | None = None
        attempts = (
            step.retry.max_attempts
            if step.retry and step.type in ("command", "agent", "operation")
            else 1
        )
        for attempt in range(1, attempts + 1):
            st.attempt = attempt
            st.status, st.error = "running", ""
            self.emit(
                ev.StepStarted(
                    self.run_id,
                    step.name,
                    step.type,
                    attempt,
                    mode=getattr(step, "mode", ""),
                    detail=self._provider_detail(step, loop),
                )
            )
            t0 = time.monotonic()
            try:
                jump = await steps.execute(self, step, st, loop)
                if st.status == "running":
                    st.status = "completed"
            except asyncio.CancelledError:
                st.status = "cancelled"
                st.error = st.error or "cancelled"
                st.completed_at = now()
                self._step_finished(st, time.monotonic() - t0)
                raise
            except _RunEnds:
                raise
            except RunLimitReached as exc:
                st.status, st.error, st.completed_at = "failed", exc.message, now()
                self.ctx.refresh(st)
                self._step_finished(st, time.monotonic() - t0)
                self.checkpoint()
                raise _RunEnds(exc.message, exc.exit_code, reason="limit") from None
            except AwfError as exc:
                st.status = "failed"
                st.error = self.masker.mask(str(exc).removeprefix(f"step {step.name}: "))
                self._error_codes[step.name] = exc.exit_code
            except Exception as exc:  # a bug: the step failed, and the run ends (execute)
                st.status, st.error = "failed", self.masker.mask(internal_error(exc))
                st.completed_at = now()
                self._step_finished(st, time.monotonic() - t0)
                raise
            st.completed_at = now()
            self.ctx.refresh(st)
            self._step_finished(st, time.monotonic() - t0)
            if st.status != "failed" or attempt == attempts or not self._retryable(step, st):
                break
            delay = _retry_delay(step, attempt + 1)
            self.emit(
                ev.RunWarning(
                    self.run_id,
                    f"step {step.name} failed (attempt {attempt}/{attempts}); "
                    f"retrying in {format_duration(delay)}",
                    step.name,
                )
            )
            await asyncio.sleep(delay)
        await self._hooks(step.hooks.post, step=step.name, loop=loop)
        self.checkpoint()
        return StepOutcome(st, jump)

    def _visit_cap(self, step: AnyStep, previous: StepState | None) -> StepOutcome | None:
        """Count a visit of `step`; past its `limits.max_visits`, go to its `on_failure`
        (the step's state stays its last visit's) or end the run naming the step."""
        limit = self.workflow.limits.max_visits.get(step.name)
        count = self.state.visits.get(step.name, 0)
        if limit is None or count < limit:
            self.state.visits[step.name] = count + 1
            return None
        message = f"step {step.name}: limits.max_visits ({limit}) reached"
        if isinstance(step.on_failure, str):
            where = f"{message}; going to {step.on_failure} (its on_failure)"
            self.emit(ev.RunWarning(self.run_id, where, step.name))
            kept = previous or StepState(name=step.name, status="failed", error=message)
            return StepOutcome(kept, jump=step.on_failure)
        if isinstance(step.on_failure, InlineFailure):
            text = self.ctx.render(
                step.on_failure.message, step=step.name, what="on_failure.message"
            )
            raise _RunEnds(self.masker.mask(text or message), step.on_failure.status, "limit")
        raise _RunEnds(f"run stopped at {message}", RunLimitReached.exit_code, "limit")

    def _retryable(self, step: AnyStep, st: StepState) -> bool:
        codes = step.retry.retryable_exit_codes if step.retry else []
        if isinstance(step, CommandStep) and codes:
            return st.exit_code in codes
        return True

    def _step_finished(self, st: StepState, duration: float) -> None:
        self.emit(
            ev.StepFinished(
                self.run_id,
                st.name,
                st.status,
                duration,
                tokens=st.tokens_used,
                tokens_estimated=st.tokens_estimated,
                error=st.error,
                output=st.output,
            )
        )

    # --- providers, events, persistence ---------------------------------------------------------

    def _provider_detail(self, step: AnyStep, loop: LoopFrame | None) -> str:
        """An agent step's provider for its header: a template rendered (`{{.inputs.
        provider}}` reads `claude`), as the entry point describes it (a switched model)."""
        provider = getattr(step, "provider", "") or ""
        if "{{" in provider:
            try:
                provider = self.ctx.render(provider, step=step.name, what="provider", loop=loop)
            except AwfError:
                return provider  # the step itself reports the template's error
            provider = provider.strip()
        describe = self.config.describe_provider
        return describe(provider) if provider and describe is not None else provider

    def provider(self, name: str) -> Provider:
        assert self.config.provider_set is not None
        return self.config.provider_set.get(name)

    async def _close_providers(self) -> None:
        if self._owns_providers and self.config.provider_set is not None:
            await self.config.provider_set.aclose()

    def emit(self, event: ev.RunEvent) -> None:
        """Hand `event` to the sink, masked: this is the one place every event of the run
        passes, so a secret in any message (a provider's error naming a URL with a key in
        it, a warning, a step's error) never reaches a frontend or a saved output."""
        if type(event) not in _STREAMED:
            event = _masked_event(event, self.masker)
        # try/except rather than contextlib.suppress: this runs once per streamed token.
        try:  # noqa: SIM105
            self.config.sink.emit(event)
        except Exception:  # a broken frontend must not kill the run
            pass

    def warn_once(self, key: str, message: str, step: str = "") -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.emit(ev.RunWarning(self.run_id, message, step))

    def earlier_visit(self, step: str) -> StepState | None:
        """The step's state from its previous visit in this run (a cycle came back)."""
        return self._visits.get(step)

    def checkpoint(self, *, history: bool = False) -> None:
        self.limits.record_time()  # the run's duration, with or without a store
        store = self.config.store
        if store is None:
            return
        self.state.saved_at = now()
        store.save_state(self.state)
        if history:
            store.record_run(self.state)

    def append_transcript(self, record: dict[str, Any]) -> int:
        """Write one transcript line (a killed process keeps it); it reaches the disk with
        the next `checkpoint` or `sync_transcript`."""
        store = self.config.store
        if store is None:
            return -1
        return store.append_transcript(self.run_id, record)

    def append_turn(self, step: str, turn: Turn) -> int:
        """Write a conversation turn of `step` as a transcript line (see `append_transcript`)."""
        store = self.config.store
        if store is None:
            return -1
        return store.append_turn(self.run_id, step, turn)

    def sync_transcript(self) -> None:
        """Force the transcript lines written so far onto the disk: before the person is
        asked anything (a checkpoint does it too)."""
        store = self.config.store
        if store is not None:
            store.sync_transcript(self.run_id)

    # --- hooks --------------------------------------------------------------------------------

    async def _hooks(
        self,
        actions: list[HookAction],
        *,
        step: str,
        loop: LoopFrame | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> None:
        for action in actions:
            where = f"hook of {step}" if step else "workflow hook"
            if action.log is not None:
                text = self.ctx.render(action.log, step=step or "hooks", what=where, error=error)
                self.emit(ev.LogMessage(self.run_id, self.masker.mask(text), step))
                continue
            command = self.ctx.render(
                action.command or "", step=step or "hooks", what=where, loop=loop, error=error
            )
            result = await run_shell(
                command,
                cwd=self.config.cwd,
                env=command_env(self.config.env, self.ctx.inputs, AWF_RUN_ID=self.run_id),
                timeout=300,
            )
            if result.stdout.strip():
                self.emit(
                    ev.LogMessage(self.run_id, self.masker.mask(result.stdout.rstrip()), step)
                )
            if result.exit_code != 0:
                self.emit(
                    ev.RunWarning(
                        self.run_id,
                        f"{where} exited with code {result.exit_code}: "
                        + self.masker.mask(result.stderr.strip()[-500:]),
                        step,
                    )
                )

    async def _error_hooks(self) -> None:
        if not self.workflow.hooks.workflow_error:
            return
        failed = self.state.steps.get(self.state.current_step)
        error = {
            "Message": self.state.error,
            "State": self.state.current_step,
            "ExitCode": failed.exit_code if failed and failed.exit_code is not None else 0,
            "Type": "execution",
        }
        with contextlib.suppress(AwfError):
            await self._hooks(self.workflow.hooks.workflow_error, step="", error=error)


def _retry_delay(step: AnyStep, attempt: int) -> float:
    import random

    policy = step.retry
    if policy is None:
        return 0.0
    delay = policy.delay_before(attempt)
    if policy.jitter:
        delay *= 1 + random.uniform(-policy.jitter, policy.jitter)
    return max(delay, 0.0)


class PrefixSink:
    """Forwards a child workflow's events with its steps named `call_step.child_step`."""

    def __init__(self, sink: EventSink, prefix: str) -> None:
        self._sink = sink
        self._prefix = prefix

    def emit(self, event: ev.RunEvent) -> None:
        if isinstance(event, ev.RunStarted | ev.RunFinished):
            return
        step = getattr(event, "step", None)
        if step is not None:
            event = replace(event, step=f"{self._prefix}.{step}" if step else self._prefix)  # type: ignore[arg-type]
        self._sink.emit(event)


# Streamed pieces are masked as they are streamed (`secrets.StreamMasker` holds back a
# secret split across chunks); masking one piece alone could not see such a secret anyway.
_STREAMED: frozenset[type] = frozenset({ev.AgentText, ev.StepOutput})


def _masked_event(event: ev.RunEvent, masker: Masker) -> ev.RunEvent:
    """`event` with every secret in its text fields replaced by `***` (the same event when
    there is nothing to mask)."""
    changes: dict[str, str] = {}
    for name in getattr(event, "__dataclass_fields__", ()):
        value = getattr(event, name)
        if isinstance(value, str) and value and (masked := masker.mask(value)) != value:
            changes[name] = masked
    return replace(event, **changes) if changes else event  # type: ignore[type-var]
