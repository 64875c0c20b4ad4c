"""The run loop: pick a step, execute it, route to the next one, checkpoint, repeat.

`Runner` owns one run of one workflow. It knows nothing about terminals, notebooks or
concrete providers: it is handed a `RunConfig` with a provider factory, an input reader, an
event sink and a store. Step kinds are executed by `steps.py`, agent turns by `agent.py`,
conversations by `conversation.py`.

Routing (spec §4): on success, the first true `transitions` entry, else `on_success`; on
failure, `transitions` for command steps, then `continue_on_error` → `on_success`, else
`on_failure` (a step name, or an inline `{message, status}` that fails the run), else the
run fails with `step X: <error>`. Only a terminal step ends a run.

Why one module: `Runner` is one object — the loop, a step's execution with its retries and
the checkpoints between them share the run's state; what can live apart already does
(steps, hooks, limits, pauses at breakpoints in `breakpoints.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from awf_nb.engine import events as ev
from awf_nb.engine import steps
from awf_nb.engine.breakpoints import PauseAborted, Pauses
from awf_nb.engine.config import ProviderSet, RunConfig
from awf_nb.engine.context import LoopFrame, RunContext
from awf_nb.engine.hooks import run_error_hooks, run_hooks
from awf_nb.engine.interruption import TurnInterruption
from awf_nb.engine.limits import RunBudget, RunLimitReached, stricter
from awf_nb.engine.ports import Provider
from awf_nb.engine.runtime import RunEnds, StepOutcome
from awf_nb.engine.sinks import EventMasker, PrefixSink
from awf_nb.engine.state import RunState, StepState, Turn, new_run_id, now, process_start_time
from awf_nb.engine.summary import RunSummary, format_duration
from awf_nb.errors import EXIT_SYSTEM, AwfError, internal_error
from awf_nb.secrets import is_secret_input
from awf_nb.workflow.model import (
    AnyStep,
    CommandStep,
    InlineFailure,
    TerminalStep,
    Workflow,
)

log = logging.getLogger(__name__)

# A runaway transitions cycle must end somewhere; loops have their own max_iterations.
MAX_STEP_EXECUTIONS = 100_000


class Runner:
    def __init__(
        self,
        workflow: Workflow,
        inputs: Mapping[str, Any],
        config: RunConfig,
        *,
        state: RunState | None = None,
        start_step: str | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        """`warnings`: what to tell the person once the run has started (inputs that
        were defaulted oddly, a resume after a crash)."""
        self.workflow = workflow
        self.config = config
        self.masker = config.masker
        for item in workflow.inputs:  # a called workflow's own secret inputs
            value = inputs.get(item.name)
            if isinstance(value, str) and is_secret_input(item.name, item.secret):
                self.masker.add(value)
        self.resumed = state is not None
        self.startup_warnings = tuple(warnings)  # shown once the run has started
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
        # The top-level run makes (and closes) the providers; the runs it calls share them.
        self._owns_providers = config.provider_set is None
        self.provider_set = config.provider_set or ProviderSet(config.providers)
        self._task: asyncio.Task[Any] | None = None
        self._turn_task: asyncio.Task[Any] | None = None
        self._turn_interrupted = False
        self._executions = 0
        self._warned: set[str] = set()
        self.limits = RunBudget(
            stricter(workflow.limits, config.limits), self.state, config.cost_limit
        )
        self._sink = config.sink
        self._sink_failures = 0
        self._mask_event = EventMasker(self.masker)
        self._visits: dict[str, StepState] = {}  # each step's state from its previous visit
        self.pauses = Pauses.for_run(self)  # breakpoints: the one owner of pausing
        self.edited_input = self.pauses.edited_input  # StepRun: a command / prompt edited

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
            self.warn(warning)
        self.checkpoint(history=True)
        try:
            await run_hooks(self, self.workflow.hooks.workflow_start, step="")
            try:
                async with asyncio.timeout(self.limits.remaining_time()):
                    await self._drive(self.start_step)
            except TimeoutError:
                raise RunEnds(self.limits.timeout_message(), reason="limit") from None
            # read again: the steps have moved the status on from "running"
            if self.state.status == "completed":
                await run_hooks(self, self.workflow.hooks.workflow_end, step="")
        except (asyncio.CancelledError, PauseAborted) as exc:
            aborted = isinstance(exc, PauseAborted)
            state.status = "cancelled"
            state.completion_reason = "cancelled"
            state.error = "run aborted at a breakpoint" if aborted else "run cancelled"
            state.exit_code = 130
            self._finish()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(run_hooks(self, self.workflow.hooks.workflow_cancel, step=""))
            # An abort is the person's answer, not a cancellation of the caller's task: the
            # top-level run returns its state; a called workflow passes it on to its parent.
            if not aborted or self.config.depth > 0:
                raise
        except (RunEnds, AwfError) as exc:
            state.status = "failed"
            state.error = self.masker.mask(exc.message if isinstance(exc, RunEnds) else str(exc))
            state.exit_code = exc.exit_code
            state.completion_reason = exc.reason if isinstance(exc, RunEnds) else "step_failed"
            await run_error_hooks(self)
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
                    self.warn(
                        f"step {st.name}: its command was still running from the "
                        f"interrupted run (process group {st.process_group}); stopped it",
                        st.name,
                    )
                st.process_group = 0
            for group in st.process_groups:  # an agent step's tools, servers, CLI
                if kill_leftover_group(group.pgid, tag=group.tag):
                    self.warn(
                        f"step {st.name}: processes it started were still running from "
                        f"the interrupted run (process group {group.pgid}); stopped them",
                        st.name,
                    )
            st.process_groups = []

    def _finish(self) -> None:
        state = self.state
        state.completed_at = now()
        if self._owns_providers:
            for check in self.config.end_warnings:
                for warning in check(state):
                    self.warn(warning)
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
            raise RunEnds(
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
            raise RunEnds(f'unknown step "{name}"') from None

    def route(self, step: AnyStep, st: StepState, loop: LoopFrame | None = None) -> str:
        """The name of the next step, or raise `RunEnds` when the run must fail here."""
        if st.status == "completed":
            target = self._transition(step, st, loop)
            target = target or getattr(step, "on_complete", None) or step.on_success
            if target:
                return target
            raise RunEnds(
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
            raise RunEnds(self.masker.mask(message or st.error), step.on_failure.status)
        # A failure nobody routes ends the run with its error's exit code: a missing agent
        # CLI is the user's to fix (1), a bad option the workflow's (2), the rest 3.
        raise RunEnds(f"step {step.name}: {st.error}", self._error_codes.get(step.name, 3))

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
        self._executions += 1
        if self._executions > MAX_STEP_EXECUTIONS:
            raise RunEnds(f"stopped after {MAX_STEP_EXECUTIONS} step executions (a cycle?)")
        state = self.state
        state.current_step = step.name
        previous = state.steps.get(step.name)
        restoring = step.name == self._restore_step
        if restoring and previous is not None and await self.pauses.resumed_after(step, previous):
            self._restore_step = None  # killed while paused after it: not run again
            return StepOutcome(previous, None)
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
        if await self.pauses.before(step, st, loop):  # skipped: the output was given
            return StepOutcome(st, None)
        await run_hooks(self, step.hooks.pre, step=step.name, loop=loop)
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
            except RunEnds:
                raise
            except RunLimitReached as exc:
                st.status, st.error, st.completed_at = "failed", exc.message, now()
                self.ctx.refresh(st)
                self._step_finished(st, time.monotonic() - t0)
                self.checkpoint()
                raise RunEnds(exc.message, exc.exit_code, reason="limit") from None
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
        await run_hooks(self, step.hooks.post, step=step.name, loop=loop)
        self.checkpoint()
        await self.pauses.after(step, st)
        return StepOutcome(st, jump)

    def _visit_cap(self, step: AnyStep, previous: StepState | None) -> StepOutcome | None:
        """Count a visit of `step`; past its `limits.max_visits`, go to its `on_failure`
        (the step's state stays its last visit's) or end the run naming the step."""
        limit = self.limits.limits.max_visits.get(step.name)
        count = self.state.visits.get(step.name, 0)
        if limit is None or count < limit:
            self.state.visits[step.name] = count + 1
            return None
        message = f"step {step.name}: limits.max_visits ({limit}) reached"
        if isinstance(step.on_failure, str):
            where = f"{message}; going to {step.on_failure} (its on_failure)"
            self.warn(where, step.name)
            kept = previous or StepState(name=step.name, status="failed", error=message)
            return StepOutcome(kept, jump=step.on_failure)
        if isinstance(step.on_failure, InlineFailure):
            text = self.ctx.render(
                step.on_failure.message, step=step.name, what="on_failure.message"
            )
            raise RunEnds(self.masker.mask(text or message), step.on_failure.status, "limit")
        raise RunEnds(f"run stopped at {message}", RunLimitReached.exit_code, "limit")

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
        return self.provider_set.get(name)

    async def _close_providers(self) -> None:
        if self._owns_providers:
            await self.provider_set.aclose()

    def emit(self, event: ev.RunEvent) -> None:
        """Show `event` to the frontend, every secret in it masked (`sinks.EventMasker`).

        A frontend that raises must not end the run: the first failure is logged as a
        warning (the traceback at debug level), the run goes on, and the frontend keeps
        getting the events after it (it may fail on one kind of event only).
        """
        event = self._mask_event(event)
        # try/except rather than contextlib.suppress: this runs once per streamed token.
        try:
            self._sink.emit(event)
        except Exception as exc:
            self._sink_failed(exc, event)

    def _sink_failed(self, exc: Exception, event: ev.RunEvent) -> None:
        self._sink_failures += 1
        if self._sink_failures > 1:
            return
        name = type(self._sink).__name__
        what = self.masker.mask(f"{type(exc).__name__}: {exc}")
        log.warning(
            "run %s: the frontend (%s) failed to show an event (%s: %s); the run goes on "
            "(later failures are not reported)",
            self.run_id, name, type(event).__name__, what,
        )  # fmt: skip
        if log.isEnabledFor(logging.DEBUG):
            trace = "".join(traceback.format_exception(exc))
            log.debug("run %s: the frontend's error:\n%s", self.run_id, self.masker.mask(trace))

    def send(self, kind: type[ev.RunEvent], *fields: Any, **named: Any) -> None:
        """`emit(kind(run_id, *fields, **named))`: an event of this run (masked)."""
        self.emit(kind(self.run_id, *fields, **named))

    def warn(self, message: str, step: str = "") -> None:
        self.emit(ev.RunWarning(self.run_id, message, step))

    def warn_once(self, key: str, message: str, step: str = "") -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.warn(message, step)

    async def call_workflow(
        self,
        workflow: Workflow,
        inputs: Mapping[str, Any],
        *,
        step: str,
        stack: tuple[str, ...],
        resume: tuple[str, str] | None = None,
    ) -> RunState:
        """Run `workflow` as a child of this run and return its final state.

        Everything this run was given (providers, reader, store, tools, `--yes`, …) goes on
        to the child; only where it reports (this run's frontend, its steps named
        `step.child_step`) and its place in the call stack differ. Its own `limits:` apply
        to it; the ones given on top of this run's are this run's alone. `resume`: a stored
        child run (a fork made inside it) and the step it goes on from.
        """
        child_config = dataclasses.replace(
            self.config,
            sink=PrefixSink(self, step),
            masker=self.masker,
            depth=self.config.depth + 1,
            call_stack=stack,
            parent_run_id=self.run_id,
            provider_set=self.provider_set,
            limits=None,
        )
        state, start = None, None
        if resume is not None and self.config.store is not None:  # a fork inside the child
            state, start = self.config.store.load_state(resume[0]), resume[1]
        child = Runner(workflow, inputs, child_config, state=state, start_step=start)
        if step in self.state.steps:  # recorded before it runs: a fork can find it
            self.state.steps[step].child_run = child.run_id
        return await child.execute()

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


def _retry_delay(step: AnyStep, attempt: int) -> float:
    import random

    policy = step.retry
    if policy is None:
        return 0.0
    delay = policy.delay_before(attempt)
    if policy.jitter:
        delay *= 1 + random.uniform(-policy.jitter, policy.jitter)
    return max(delay, 0.0)
