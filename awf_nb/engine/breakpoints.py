"""Breakpoints: the one owner of pausing a run before or after a step (docs/debugging.md).

Where a run pauses is a `Breakpoints` (`--break-before STEP`, `--break-after STEP`, `*` for
every step; a step's `breakpoint: before | after` when `from_file`). At a pause the
`Debugger` the frontend gave (the terminal's prompt, the notebook's buttons, a Python
callback) is shown a `Pause` and answers with a `PauseAnswer`: continue, step (pause again
before the next step), edit (before: the step's resolved command or prompt; after: its
output), skip (before: mark the step done with the given output, not running it — AWF's
`--mock`), or abort (the run is cancelled, and `awf resume` pauses here again).

A pause is durable: it is written to the run's state (`RunState.paused`) before the person
is asked, so a run killed at a breakpoint pauses there again when it is resumed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from awf_nb.engine import events as ev
from awf_nb.engine.state import now
from awf_nb.errors import UserError

__all__ = [
    "ACTIONS",
    "MAX_ANSWERS",
    "Breakpoints",
    "CallbackDebugger",
    "Debugger",
    "OnPause",
    "Pause",
    "PauseAnswer",
    "PauseStream",
    "When",
]

When = Literal["before", "after"]
Action = Literal["continue", "step", "edit", "skip", "abort"]
ACTIONS: tuple[Action, ...] = ("continue", "step", "edit", "skip", "abort")

# A pause is asked again after an edit (to show the edited value) or an answer that does not
# apply; past this many answers at one pause the run is aborted, so a debugger that keeps
# answering wrongly (a callback in a loop) cannot hold a run forever.
MAX_ANSWERS = 100
# The state a pause shows: each earlier step's output cut to this many characters.
STATE_SHOWN_CHARS = 2_000


class PauseAborted(BaseException):  # not an error: passes `except Exception`
    """The person answered abort at a pause: the run ends cancelled (and resumable), and
    the caller gets its state back rather than a cancellation."""


@dataclass(frozen=True)
class Breakpoints:
    """Where a run pauses: before / after the steps named (`*`: every step), and at the
    steps whose `breakpoint:` says so when `from_file` (an interactive run, or
    `--breakpoints`: a file with breakpoints still runs headless in CI)."""

    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    from_file: bool = False

    @classmethod
    def of(
        cls, before: Iterable[str] = (), after: Iterable[str] = (), *, from_file: bool = False
    ) -> Breakpoints:
        for name in [*before, *after]:
            if not isinstance(name, str) or not name.strip():
                raise UserError(f"a breakpoint names a step (or *), got {name!r}")
        return cls(frozenset(before), frozenset(after), from_file)

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.from_file)

    def hits(self, step: Any, when: When) -> bool:
        """Whether the run pauses `when` (before / after) `step`."""
        names = self.before if when == "before" else self.after
        if "*" in names or step.name in names:
            return True
        return self.from_file and getattr(step, "breakpoint", None) == when

    def check(self, steps: Iterable[str]) -> None:
        """A breakpoint on a step the workflow does not have is a `UserError`."""
        known = set(steps)
        unknown = sorted((self.before | self.after) - known - {"*"})
        if unknown:
            raise UserError(
                f"breakpoint on unknown step {', '.join(unknown)} "
                f"(steps: {', '.join(sorted(known))})"
            )

    def record(self) -> dict[str, Any]:
        """As kept in the run's state, so `awf resume` pauses at the same steps."""
        return {
            "before": sorted(self.before),
            "after": sorted(self.after),
            "from_file": self.from_file,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> Breakpoints:
        record = record or {}
        return cls(
            frozenset(record.get("before", ())),
            frozenset(record.get("after", ())),
            bool(record.get("from_file", False)),
        )

    def __or__(self, other: Breakpoints) -> Breakpoints:
        return Breakpoints(
            self.before | other.before, self.after | other.after, self.from_file or other.from_file
        )


@dataclass(frozen=True)
class Pause:
    """What the person is shown at a pause (every text masked).

    `shows`: what the step is about to do (before: its resolved command or prompt, or what
    it runs) or did (after: its output); `value`: what `edit` changes (before: the resolved
    command or prompt, "" when the step has none; after: the output); `state`: the outputs
    of the steps run so far, which the step reads; `editable`: whether `edit` applies."""

    run_id: str
    step: str
    step_type: str
    when: When
    shows: str = ""
    value: str = ""
    editable: bool = True
    state: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: `paused before step build (command)`."""
        return f"paused {self.when} step {self.step} ({self.step_type})"


@dataclass(frozen=True)
class PauseAnswer:
    """The person's answer at a pause: an action, and for edit / skip the value."""

    action: Action
    value: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise UserError(
                f"unknown pause action {self.action!r}: use one of {', '.join(ACTIONS)}"
            )
        if self.action == "edit" and self.value is None:
            raise UserError("the edit action needs the new value (PauseAnswer('edit', TEXT))")

    @classmethod
    def of(cls, answer: PauseAnswer | str | None) -> PauseAnswer:
        """What a callback may return: a `PauseAnswer`, an action's name, or None
        (continue)."""
        if answer is None:
            return cls("continue")
        if isinstance(answer, PauseAnswer):
            return answer
        if isinstance(answer, str):
            return cls(answer.strip().lower())  # type: ignore[arg-type]
        raise UserError(
            f"a pause callback returns a PauseAnswer, an action name or None, "
            f"not {type(answer).__name__}"
        )


@runtime_checkable
class Debugger(Protocol):
    """Answers a run's pauses (the terminal, the notebook panel, a Python callback).
    Must be cancellable like `InputReader.read`."""

    async def pause(self, pause: Pause) -> PauseAnswer: ...


# What `on_pause=` may be: given a Pause, returns (or resolves to) a PauseAnswer, an
# action's name, or None (continue).
OnPause = Callable[[Pause], "PauseAnswer | str | Awaitable[PauseAnswer | str | None] | None"]


class CallbackDebugger:
    """A `Debugger` made of a Python function (`run(..., on_pause=fn)`): `fn(pause)`
    returns a `PauseAnswer`, an action's name or None (continue); a coroutine function is
    awaited."""

    def __init__(self, callback: OnPause) -> None:
        self.callback = callback

    async def pause(self, pause: Pause) -> PauseAnswer:
        import inspect

        answer = self.callback(pause)
        if inspect.isawaitable(answer):
            answer = await answer
        return PauseAnswer.of(answer)


class PauseStream:
    """A `Debugger` that is an async iterator of the run's pauses:

        pauses = PauseStream()
        run = asyncio.create_task(awf_nb.arun(wf, break_before=["*"], on_pause=pauses))
        pauses.watch(run)                # the iteration ends when the run does
        async for pause in pauses:
            pauses.answer("continue")    # or a PauseAnswer, "step", "skip", "abort"
        result = await run

    Each pause must be answered before the next one is asked for."""

    def __init__(self) -> None:
        import asyncio

        self._pauses: asyncio.Queue[Pause | None] = asyncio.Queue()
        self._waiting: asyncio.Future[PauseAnswer | str | None] | None = None
        self._closed = False

    async def pause(self, pause: Pause) -> PauseAnswer:
        import asyncio

        waiting = asyncio.get_running_loop().create_future()
        self._waiting = waiting
        self._pauses.put_nowait(pause)
        return PauseAnswer.of(await waiting)

    def answer(self, answer: PauseAnswer | str | None) -> None:
        """Answer the pause the iteration gave last (None: continue)."""
        waiting = self._waiting
        if waiting is None or waiting.done():
            raise UserError("no pause is waiting for an answer")
        waiting.set_result(PauseAnswer.of(answer))

    def watch(self, task: Any) -> None:
        """End the iteration when `task` (the run) ends."""
        task.add_done_callback(lambda _task: self.close())

    def close(self) -> None:
        """End the iteration (after the pauses already given)."""
        if not self._closed:
            self._closed = True
            self._pauses.put_nowait(None)

    def __aiter__(self) -> PauseStream:
        return self

    async def __anext__(self) -> Pause:
        if self._waiting is not None and not self._waiting.done():
            raise UserError("answer the last pause (pauses.answer(...)) before the next one")
        item = await self._pauses.get()
        if item is None:
            raise StopAsyncIteration
        return item


class Pauses:
    """The one owner of a run's pauses: asks the debugger at each breakpoint, applies the
    answer to the step's state, and keeps the pause in the run's state while it waits.

    `run` is the `Runner` (through the `StepRun` interface, plus `cancel`)."""

    def __init__(self, run: Any, breakpoints: Breakpoints, debugger: Debugger | None) -> None:
        self.run = run
        self.breakpoints = breakpoints
        self.debugger = debugger
        self.stepping = False  # `step` was answered: pause before the next step
        self._edited: dict[str, str] = {}  # step -> its input as the person edited it

    @classmethod
    def for_run(cls, run: Any) -> Pauses:
        """The pauses of `run`: its config's breakpoints and those its state kept (a
        resumed run pauses where it did), the latter updated for the next resume."""
        points = Breakpoints.from_record(run.state.breakpoints)
        if run.config.breakpoints:
            points = points | run.config.breakpoints
        if points:
            run.state.breakpoints = points.record()
        return cls(run, points, run.config.debugger)

    def may_pause(self) -> bool:
        """Whether the run can stop at a pause (so a notebook cell must not block on it)."""
        if self.debugger is None:
            return False
        points = self.breakpoints
        if points.before or points.after or self.run.state.paused:
            return True
        steps = self.run.workflow.steps.values()
        return points.from_file and any(getattr(s, "breakpoint", None) for s in steps)

    def edited_input(self, step: str) -> str | None:
        """The step's command or prompt as edited at its pause (for every attempt of this
        visit of the step: a retry runs what was edited too), else None."""
        return self._edited.get(step)

    def _wanted(self, step: Any, when: When) -> bool:
        paused_here = self.run.state.paused.get(step.name) == when  # a resumed pause
        if self.debugger is None:
            if paused_here:
                self.run.state.paused.pop(step.name, None)
                self.run.warn(
                    f"step {step.name}: the run was paused {when} it; nobody can answer a "
                    "pause here, so it goes on (resume it in a terminal to pause again)",
                    step.name,
                )
            return False
        return (
            paused_here or (self.stepping and when == "before") or self.breakpoints.hits(step, when)
        )

    async def before(self, step: Any, st: Any, loop: Any) -> bool:
        """Pause before `step` when a breakpoint says so. True: the step was skipped (its
        state filled in with the output the person gave); False: run it."""
        self._edited.pop(step.name, None)  # an edit is for one visit of the step
        if not self._wanted(step, "before"):
            return False
        shows, editable = self._input_of(step, loop)
        value = shows if editable else ""
        answer = await self._ask(step, "before", shows, value, editable)
        if answer.action == "skip":
            self._fill(step, st, answer.value or "")
            st.status, st.completed_at = "completed", now()
            self.run.send(ev.StepFinished, step.name, st.status, 0.0, output=st.output)
            self.run.checkpoint()
            self.run.warn(
                f"step {step.name}: skipped at its breakpoint; its output is the one given",
                step.name,
            )
            return True
        return False

    async def resumed_after(self, step: Any, previous: Any) -> bool:
        """A killed run was paused after this (finished) step: pause there again, rather
        than running it twice. True: the step's state is `previous`, as answered."""
        if self.run.state.paused.get(step.name) != "after":
            return False
        if previous.status not in ("completed", "failed"):
            return False
        await self.after(step, previous)
        self.run.checkpoint()
        return True

    async def after(self, step: Any, st: Any) -> None:
        """Pause after `step` (its state `st` recorded) when a breakpoint says so."""
        if not self._wanted(step, "after"):
            return
        await self._ask(step, "after", st.output, st.output, True, st=st)

    async def _ask(
        self, step: Any, when: When, shows: str, value: str, editable: bool, st: Any = None
    ) -> PauseAnswer:
        """Ask until an answer that goes on (continue, step, skip); an edit is applied and
        the pause shown again with the new value. Abort cancels the run."""
        run, masker = self.run, self.run.masker
        assert self.debugger is not None
        run.state.paused[step.name] = when
        run.checkpoint()  # durable before the wait: a killed run pauses here again
        for _ in range(MAX_ANSWERS):
            pause = Pause(
                run.run_id,
                step.name,
                step.type,
                when,
                shows=masker.mask(shows),
                value=masker.mask(value),
                editable=editable,
                state=self._state_shown(step.name),
            )
            answer = PauseAnswer.of(await self.debugger.pause(pause))
            if answer.action == "abort":
                if st is None:
                    current = run.state.steps.get(step.name)
                    if current is not None:
                        current.status, current.error = "cancelled", "aborted at a breakpoint"
                raise PauseAborted  # the run is cancelled, and stays resumable
            if answer.action == "edit":
                if not editable:
                    run.warn(
                        f"step {step.name}: a {step.type} step has no command or prompt to "
                        "edit before it runs; skip it, or edit its output after it",
                        step.name,
                    )
                    continue
                text = answer.value or ""
                if when == "before":
                    self._edited[step.name] = text
                else:
                    self._fill(step, st, text)
                    run.checkpoint()
                shows = value = text
                continue
            if answer.action == "skip" and when == "after":
                self._fill(step, st, answer.value or "")  # after it ran: as an edit
            self.stepping = answer.action == "step"
            break
        else:
            raise PauseAborted  # MAX_ANSWERS answers and none went on
        run.state.paused.pop(step.name, None)
        run.checkpoint()
        return answer

    def _fill(self, step: Any, st: Any, text: str) -> None:
        """The step's output is `text` (edited or given by skip), masked like any other."""
        from awf_nb.engine.context import json_response

        st.output = self.run.masker.mask(text)
        st.response = json_response(st.output)
        if step.type == "command" and st.exit_code is None:
            st.exit_code = 0
        self.run.ctx.refresh(st)

    def _input_of(self, step: Any, loop: Any) -> tuple[str, bool]:
        """What the step is about to do, resolved: its command or prompt (editable), or a
        line about what it runs."""
        from awf_nb.errors import AwfError

        template = None
        if step.type == "command" and getattr(step, "command", None):
            template, what = step.command, "command"
        elif step.type == "agent" and getattr(step, "prompt", None):
            template, what = step.prompt, "prompt"
        if template is None:
            for name in ("script_file", "prompt_file", "workflow", "operation"):
                if isinstance(getattr(step, name, None), str):
                    return f"{name}: {getattr(step, name)}", False
            return f"a {step.type} step", False
        try:
            return self.run.ctx.render(template, step=step.name, what=what, loop=loop), True
        except AwfError as exc:  # shown as written; the step reports the error when it runs
            return f"{template}\n(cannot be resolved yet: {exc})", False

    def _state_shown(self, current: str) -> dict[str, str]:
        """The outputs of the steps run so far (already masked when stored), cut short."""
        return {
            name: st.output[:STATE_SHOWN_CHARS]
            for name, st in self.run.state.steps.items()
            if name != current and st.status in ("completed", "failed")
        }
