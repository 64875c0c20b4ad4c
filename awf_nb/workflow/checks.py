"""Load-time checks that need the whole workflow (spec §5), with AWF's message texts.

`model.py` validates each step on its own; this module looks across steps: the initial step
and the terminals exist, every route (`on_success`, `transitions`, `body`, …) names a step,
conditions parse, template references point at declared inputs and at steps that have run
by then, and — beyond AWF, as warnings — unreachable steps, dead ends, and inputs pasted
into shell commands without escaping.

Problems found only in agent prompts, options and terminal messages are warnings, so every
file AWF accepts is still accepted. Each problem carries the YAML path of the field it is
about, located with `Workflow.locations`.

Why one module: every check reads the same facts about the workflow, computed once by
`_Checker` (execution order, loop bodies, parallel branches, which steps have run by a
given step); split apart, each part would recompute them or receive them all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from awf_nb.errors import Problem
from awf_nb.workflow import expr, template
from awf_nb.workflow.condition_names import (
    EXCHANGE_NAMES,
    LOOP_NAMES,
    WORKFLOW_NAMES,
    unknown_names,
)
from awf_nb.workflow.model import (
    STATE_PROPERTIES,
    AgentStep,
    AnyStep,
    CallWorkflowStep,
    CommandStep,
    ForEachStep,
    HookAction,
    LoopBase,
    ParallelStep,
    TerminalStep,
    WhileStep,
    Workflow,
)
from awf_nb.workflow.suggest import did_you_mean
from awf_nb.workflow.yaml_locations import join_path, locate, parent_path

__all__ = [
    "check_workflow",
    "did_you_mean",
    "execution_order",
    "join_path",
    "locate",
    "parent_path",
]

Severity = Literal["error", "warning"]

# Hard cap of loop iterations (spec §4); 0 means "the default" (100), as in AWF.
MAX_ITERATIONS = 10_000

# What `{{.states.NAME.X}}` may read. `Error` is in every step's view too; `conversation`
# (lowercase) is accepted because the seed docs spell it that way.
_STATE_PROPERTIES = (*STATE_PROPERTIES, "Error")
_STATE_ALIASES = {"conversation"}
_WORKFLOW_PROPERTIES = ("ID", "Name", "CurrentState", "StartedAt", "Duration")
_CONTEXT_PROPERTIES = ("WorkingDir", "User", "Hostname")
_ERROR_PROPERTIES = ("Message", "State", "ExitCode", "Type")
_LOOP_PROPERTIES = ("Item", "Index", "Index1", "First", "Last", "Length", "Parent")


# --- the checks ----------------------------------------------------------------------------


# Whether the workflow a call_workflow step calls has agent steps (or calls workflows in
# turn, which may); False when that cannot be told before the run. The loader gives one
# that loads the called workflow (this module comes before the loader).
CallsAgents = Callable[[CallWorkflowStep, Path], bool]


def _cannot_tell(step: CallWorkflowStep, base_dir: Path) -> bool:
    return False


def check_workflow(wf: Workflow, *, calls_agents: CallsAgents = _cannot_tell) -> list[Problem]:
    """Every cross-step problem of `wf` (errors and warnings), in file order.

    `calls_agents` tells whether a called workflow has agent steps (a call in a loop with no
    `limits` is then warned about like an agent step); without it, calls are not followed."""
    checker = _Checker(wf, calls_agents)
    checker.run()
    return sorted(checker.problems, key=lambda p: (p.line, p.column))


def execution_order(wf: Workflow) -> list[str]:
    """Steps in breadth-first order from `initial` (what "forward reference" means).

    Parallel branches and loop bodies come right after their step, then its routes.
    """
    order: list[str] = []
    seen: set[str] = set()
    queue = deque([wf.initial])
    while queue:
        name = queue.popleft()
        if name in seen or name not in wf.steps:
            continue
        seen.add(name)
        order.append(name)
        queue.extend(n for n in wf.steps[name].successors() if n not in seen)
    return order


@dataclass(frozen=True)
class _Field:
    """One template field to check: where it is and how strict to be about it."""

    source: str
    path: str
    field: str  # the name AWF's messages use ("command", "dir", "prompt", …)
    step: str | None  # None for workflow hooks: no forward-reference check there
    severity: Severity
    error_refs: bool = False  # `{{.error.*}}` allowed (workflow_error hooks)
    forward_check: bool = True
    after_step: bool = False  # rendered once the step ran: it may read its own state
    shell: bool = False  # a command run by the shell: warn about unescaped inputs
    exchange: bool = False  # a conversation partner's field: `.reply`, `.message`, … exist


class _Checker:
    def __init__(self, wf: Workflow, calls_agents: CallsAgents = _cannot_tell) -> None:
        self.wf = wf
        self.calls_agents = calls_agents
        self.problems: list[Problem] = []
        self.order = execution_order(wf)
        self.index = {name: i for i, name in enumerate(self.order)}
        self.inputs = {i.name for i in wf.inputs}
        self.branch_of = {
            branch: name
            for name, step in wf.steps.items()
            if isinstance(step, ParallelStep)
            for branch in step.parallel
        }
        self.in_body = {
            name for step in wf.steps.values() if isinstance(step, LoopBase) for name in step.body
        }
        self.body_of = {
            body: name
            for name, step in wf.steps.items()
            if isinstance(step, LoopBase)
            for body in step.body
        }

    def run(self) -> None:
        self.check_input_types()
        self.check_initial()
        self.check_terminals()
        for name, step in self.wf.steps.items():
            self.check_routes(name, step)
            self.check_step(name, step)
        for item in self.template_fields():
            self.check_template(item)
        self.check_reachability()
        self.check_agent_cycles()
        self.check_person_in_branches()
        self.check_visit_limits()

    # -- reporting

    def report(
        self, message: str, path: str, severity: Severity = "error", hint: str | None = None
    ) -> None:
        line, column = locate(self.wf.locations, path)
        self.problems.append(
            Problem(message, path=path, line=line, column=column, severity=severity, hint=hint)
        )

    # -- structure

    def check_input_types(self) -> None:
        known = ("string", "integer", "boolean", "number", "array", "object")
        for i, item in enumerate(self.wf.inputs):
            if item.type not in known:
                self.report(
                    f'input {item.name}: unknown type "{item.type}"; its value is used as text',
                    join_path(join_path("inputs", i), "type"),
                    severity="warning",
                    hint=did_you_mean(item.type, known) or f"known types: {', '.join(known)}",
                )

    def check_initial(self) -> None:
        if self.wf.initial not in self.wf.steps:
            self.report(
                f"initial state '{self.wf.initial}' not found in steps",
                "states.initial",
                hint=did_you_mean(self.wf.initial, self.wf.steps),
            )

    def check_terminals(self) -> None:
        if not any(isinstance(s, TerminalStep) for s in self.wf.steps.values()):
            self.report("at least one terminal state is required", "states")

    def check_routes(self, name: str, step: AnyStep) -> None:
        path = join_path("states", name)
        routes: list[tuple[str, str, str]] = []
        if step.on_success:
            routes.append(("on_success", step.on_success, join_path(path, "on_success")))
        if isinstance(step.on_failure, str):
            routes.append(("on_failure", step.on_failure, join_path(path, "on_failure")))
        for i, transition in enumerate(step.transitions):
            where = join_path(join_path(join_path(path, "transitions"), i), "goto")
            routes.append(("transition", transition.goto, where))
        if isinstance(step, LoopBase):
            if step.on_complete:
                routes.append(("on_complete", step.on_complete, join_path(path, "on_complete")))
            routes.extend(
                ("body", target, join_path(join_path(path, "body"), i))
                for i, target in enumerate(step.body)
            )
        if isinstance(step, ParallelStep):
            routes.extend(
                ("parallel branch", target, join_path(join_path(path, "parallel"), i))
                for i, target in enumerate(step.parallel)
            )
        for what, target, where in routes:
            if target not in self.wf.steps:
                self.report(
                    f"step '{name}': {what} references unknown state '{target}'",
                    where,
                    hint=did_you_mean(target, self.wf.steps),
                )

    def check_step(self, name: str, step: AnyStep) -> None:
        path = join_path("states", name)
        if isinstance(step, CommandStep) and name not in self.branch_of:
            routed = step.on_success or step.on_failure or step.transitions
            if not routed and name not in self.in_body:
                self.report(
                    f"step '{name}': command step must have OnSuccess/OnFailure or Transitions",
                    path,
                )
        if isinstance(step, AgentStep) and step.conversation is not None:
            target = step.conversation.continue_from
            if target and target not in self.wf.steps:
                self.report(
                    f"step '{name}': continue_from references unknown step '{target}'",
                    join_path(join_path(path, "conversation"), "continue_from"),
                    hint=did_you_mean(target, self.wf.steps),
                )
            if step.conversation.until:
                until_path = join_path(join_path(path, "conversation"), "until")
                scope = (*EXCHANGE_NAMES, *WORKFLOW_NAMES)
                self.check_condition(step.conversation.until, until_path, scope)
        if isinstance(step, LoopBase):
            self.check_loop(step, path)
        # a step of a loop's body is routed with the loop's frame (`loop.Index`)
        in_loop = (*WORKFLOW_NAMES, *LOOP_NAMES) if self.inside_loop(name) else WORKFLOW_NAMES
        for i, transition in enumerate(step.transitions):
            if transition.when:
                where = join_path(join_path(path, "transitions"), i)
                self.check_condition(transition.when, join_path(where, "when"), in_loop)

    def check_loop(self, step: LoopBase, path: str) -> None:
        scope = (*WORKFLOW_NAMES, *LOOP_NAMES)
        if isinstance(step, WhileStep):
            self.check_condition(step.while_, join_path(path, "while"), scope)
        if step.break_when:
            self.check_condition(step.break_when, join_path(path, "break_when"), scope)
        limit = step.max_iterations
        if isinstance(limit, int) and not 0 <= limit <= MAX_ITERATIONS:
            self.report(
                f"max_iterations must be between 1 and {MAX_ITERATIONS} "
                f"(0 means the default, 100), got {limit}",
                join_path(path, "max_iterations"),
            )

    def inside_loop(self, name: str) -> bool:
        """Whether `name` runs in a loop's body, itself or as a branch of a step that does."""
        seen: set[str] = set()
        while name not in seen:
            seen.add(name)
            if name in self.in_body:
                return True
            if name not in self.branch_of:
                return False
            name = self.branch_of[name]
        return False

    def check_condition(self, source: str, path: str, scope: tuple[str, ...]) -> None:
        """The condition parses and reads only names its `scope` holds."""
        try:
            expr.parse(source)
        except expr.ExprSyntaxError as exc:
            self.report(f"invalid condition {source!r}: {exc}", path)
            return
        for problem in unknown_names(source, scope):
            self.report(problem.message, path, hint=problem.hint)

    # -- templates

    def template_fields(self) -> Iterator[_Field]:
        for name, step in self.wf.steps.items():
            yield from self.step_fields(name, step)
        for hook_name in ("workflow_start", "workflow_end", "workflow_error", "workflow_cancel"):
            actions: list[HookAction] = getattr(self.wf.hooks, hook_name)
            yield from _hook_fields(
                actions,
                join_path("hooks", hook_name),
                step=None,
                error_refs=hook_name == "workflow_error",
            )

    def step_fields(self, name: str, step: AnyStep) -> Iterator[_Field]:
        path = join_path("states", name)

        def strict(value: str | None, key: str, *, shell: bool = False) -> Iterator[_Field]:
            if value:
                yield _Field(value, join_path(path, key), key, name, "error", shell=shell)

        def lenient(value: Any, key: str, *, after_step: bool = False) -> Iterator[_Field]:
            for sub_path, text in _strings(value, join_path(path, key)):
                yield _Field(text, sub_path, key, name, "warning", after_step=after_step)

        if isinstance(step, CommandStep):
            yield from strict(step.command, "command", shell=True)
            yield from strict(step.dir, "dir")
            yield from strict(step.script_file, "script_file")
        elif isinstance(step, AgentStep):
            for key in ("provider", "prompt", "prompt_file", "system_prompt", "options", "role"):
                yield from lenient(getattr(step, key), key)
            partner = step.conversation.partner if step.conversation else None
            if partner is not None:
                for key in (
                    "provider",
                    "prompt",
                    "system_prompt",
                    "options",
                    "replies",
                    "role",
                    "command",
                ):
                    key = f"conversation.with.{key}"
                    for sub_path, text in _strings(
                        getattr(partner, key.rsplit(".", 1)[1]), join_path(path, key)
                    ):
                        yield _Field(text, sub_path, key, name, "warning", exchange=True)
        elif isinstance(step, TerminalStep):
            yield from lenient(step.message, "message")
        elif isinstance(step, CallWorkflowStep):
            yield from lenient(step.workflow, "workflow")
            yield from lenient(step.inputs, "inputs")
        if isinstance(step, ForEachStep) and isinstance(step.items, str):
            yield from strict(step.items, "items")
        if isinstance(step, LoopBase) and isinstance(step.max_iterations, str):
            yield from strict(step.max_iterations, "max_iterations")
        if not isinstance(step.on_failure, str | None):
            yield from lenient(step.on_failure.message, "on_failure.message", after_step=True)
        for kind in ("pre", "post"):
            actions = getattr(step.hooks, kind)
            yield from _hook_fields(actions, join_path(join_path(path, "hooks"), kind), step=name)

    def check_template(self, item: _Field) -> None:
        if "{{" not in item.source:
            return
        try:
            parsed = template.parse(item.source, name=item.field)
        except template.TemplateSyntaxError as exc:
            where = f" (line {exc.line}, column {exc.column} of the template)"
            self.report(
                f"failed to parse template in {item.field}: {exc.reason}{where}",
                item.path,
                item.severity,
            )
            return
        except template.TemplateError as exc:
            self.report(
                f"failed to parse template in {item.field}: {exc}", item.path, item.severity
            )
            return
        seen: set[str] = set()
        for ref in parsed.references():
            for message, severity, hint in self.reference_problems(ref, item):
                if message not in seen:
                    seen.add(message)
                    self.report(message, item.path, severity, hint)
        if item.shell:
            self.check_shell_escaping(parsed, item)

    def reference_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        """What is wrong with one `{{.namespace.…}}` reference (AWF's texts)."""
        namespace = ref.path[0]
        if namespace in _FREE_NAMESPACES:
            return  # env vars and awf's own data are only known at run time
        if item.exchange and namespace in EXCHANGE_VARIABLES:
            return
        check = _NAMESPACE_CHECKS.get(namespace)
        if check is None:
            yield (f"unknown reference type {_raw(ref)!r} in {item.field}", item.severity, None)
        elif len(ref.path) > 1:
            yield from check(self, ref, item)

    def input_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        name = ref.path[1]
        if name not in self.inputs:
            hint = did_you_mean(name, self.inputs)
            yield f'undefined input "{name}" referenced in {item.field}', item.severity, hint

    def state_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        target, field = ref.path[1], item.field
        if target not in self.wf.steps:
            hint = did_you_mean(target, self.wf.steps)
            yield f'undefined step "{target}" referenced in {field}', item.severity, hint
            return
        current = item.step
        if current is not None and item.forward_check and current in self.index:
            parent = self.branch_of.get(current)
            if parent is not None and self.branch_of.get(target) == parent:
                yield (
                    f'parallel branch "{current}" references sibling branch "{target}" in '
                    f"{field} (branches run concurrently)",
                    "warning",
                    None,
                )
                return
            own_state = item.after_step and target == current
            if not own_state and self.index.get(target, -1) >= self.index[current]:
                yield (
                    f'forward reference to step "{target}" in {field} '
                    "(referenced step has not executed yet)",
                    item.severity,
                    None,
                )
                return
        if len(ref.path) < 3:
            yield (
                f'missing property for state reference "{target}" in {field} '
                "(expected .Output, .Stderr, .ExitCode, or .Status)",
                item.severity,
                None,
            )
            return
        prop = ref.path[2]
        if prop in _STATE_PROPERTIES or prop in _STATE_ALIASES:
            return
        message = f'invalid state property "{prop}" for step "{target}" in {field}'
        yield from _property_problem(message, prop, _STATE_PROPERTIES, item.severity)

    def workflow_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        prop = ref.path[1]
        if prop not in _WORKFLOW_PROPERTIES:
            message = f'invalid workflow property "{prop}" in {item.field}'
            yield from _property_problem(message, prop, _WORKFLOW_PROPERTIES, item.severity)

    def context_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        yield from _namespace_property(ref, item, "context", _CONTEXT_PROPERTIES)

    def error_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        if not item.error_refs:
            yield (
                f"error reference {_raw(ref)!r} used outside of error hook context in {item.field}",
                item.severity,
                "error data exists only in workflow_error hooks",
            )
            return
        yield from _namespace_property(ref, item, "error", _ERROR_PROPERTIES)

    def loop_problems(
        self, ref: template.FieldRef, item: _Field
    ) -> Iterator[tuple[str, Severity, str | None]]:
        if item.step is not None and item.step not in self.in_body:
            yield (
                f"loop reference {_raw(ref)!r} used outside of a loop body in {item.field}",
                "warning",
                "loop data exists only inside a for_each or while body",
            )
            return
        yield from _namespace_property(ref, item, "loop", _LOOP_PROPERTIES)

    def check_shell_escaping(self, parsed: template.Template, item: _Field) -> None:
        """Beyond AWF: warn when untrusted text (an input, a step's output) is pasted into
        a shell command unprotected (see template/shell_safety.py)."""
        warned: set[tuple[str, ...]] = set()
        for finding in parsed.unsafe_shell_actions():
            path = finding.ref.path
            if path[0] == "inputs" and len(path) > 1:
                declared = next((i for i in self.wf.inputs if i.name == path[1]), None)
                if declared is not None and declared.type in ("integer", "boolean", "number"):
                    continue  # validated: nothing to inject
            what = _untrusted_what(path)
            if path[:2] in warned:
                continue
            warned.add(path[:2])
            written = ".".join(path[:3]) if path[0] == "states" else ".".join(path[:2])
            if finding.reason == "quoted":
                message = f"{what} is escaped but inside quotes in a shell command"
                hint = f"put {{{{.{written} | escape}}}} outside the quotes: it quotes itself"
            else:
                message = f"{what} is interpolated into a shell command without escaping"
                env = path[1] if path[0] == "inputs" and len(path) > 1 else ""
                safe = f'"${env}" or ' if env.isidentifier() else ""
                hint = f"use {safe}{{{{.{written} | escape}}}}"
            self.report(message, item.path, "warning", hint=hint)

    # -- graph (beyond AWF: warnings)

    def check_reachability(self) -> None:
        if self.wf.initial not in self.wf.steps:
            return  # already an error; everything would look unreachable
        reachable = set(self.order)
        for name in self.wf.steps:
            if name not in reachable:
                self.report(
                    f"step '{name}' is unreachable from the initial state '{self.wf.initial}'",
                    join_path("states", name),
                    "warning",
                )
        finishing = self.steps_reaching_an_end()
        for name in self.order:
            if name not in finishing:
                self.report(
                    f"step '{name}' can never reach a terminal state",
                    join_path("states", name),
                    "warning",
                )

    def check_agent_cycles(self) -> None:
        """Warn when an agent step (or a call of a workflow with agent steps) can run again
        and again and no run-level `limits` bound it: a route leads back to it (or to the
        parallel step or loop it runs in), or it is in the body of a `while` loop. A
        `for_each` body runs once per item, and a parallel branch once per visit of its
        parallel step: neither is a cycle of its own."""
        if self.wf.limits.any:
            return
        for name in self.order:
            step = self.wf.steps[name]
            if not isinstance(step, AgentStep | CallWorkflowStep):
                continue
            repeats = self.repetition(name)
            if repeats is None:
                continue
            if isinstance(step, AgentStep):
                what, whose = "is an agent step", "its agent is"
            elif self.calls_agents(step, self.wf.base_dir):
                what = f"calls workflow '{step.workflow}', which has agent steps,"
                whose = "its agents are"
            else:
                continue
            where, bound = repeats
            self.report(
                f"step '{name}' {what} {where} and the workflow sets no limits: "
                f"{bound} how many times {whose} asked, and nothing bounds its tokens or time",
                join_path("states", name),
                "warning",
                hint="add limits: {max_agent_turns: N, max_tokens: N, timeout: 30m}",
            )

    def repetition(self, name: str) -> tuple[str, str] | None:
        """How step `name` can run again and again — (where it is, what bounds it) — or
        None when it runs at most once per visit of something that does not repeat."""
        current, seen = name, set()
        while current not in seen:
            seen.add(current)
            if self.in_cycle(current):
                return "in a cycle", "nothing bounds"
            loop = self.body_of.get(current)
            if loop is not None and isinstance(self.wf.steps[loop], WhileStep):
                return f"in the body of while loop '{loop}'", "only its max_iterations bounds"
            container = loop or self.branch_of.get(current)
            if container is None:
                return None
            current = container
        return None

    def check_visit_limits(self) -> None:
        """`limits.max_visits` names steps that exist (not terminals: they end the run)."""
        for name in self.wf.limits.max_visits:
            where = join_path(join_path("limits", "max_visits"), name)
            if name not in self.wf.steps:
                self.report(
                    f"limits.max_visits references unknown step '{name}'",
                    where,
                    hint=did_you_mean(name, self.wf.steps),
                )

    def in_cycle(self, start: str) -> bool:
        """Whether some route from `start` leads back to it."""
        seen: set[str] = set()
        stack = list(self.next_steps(start))
        while stack:
            name = stack.pop()
            if name == start:
                return True
            if name in seen or name not in self.wf.steps:
                continue
            seen.add(name)
            stack.extend(self.next_steps(name))
        return False

    def next_steps(self, name: str) -> Iterator[str]:
        """The steps that can run after `name` (what it runs inside included).

        A parallel branch's own routes are ignored at run time: it hands control back to
        its parallel step, whose routes are followed next (not its branches again). A
        loop body step's route to its loop starts the loop's next iteration, which the
        loop bounds; its other routes are followed."""
        if name in self.branch_of:
            yield from self.routes_after(self.branch_of[name])
            return
        loop = self.body_of.get(name)
        yield from (n for n in self.wf.steps[name].successors() if n != loop)

    def routes_after(self, name: str) -> Iterator[str]:
        """Where a parallel step goes once its branches are done: its own routes (those of
        the outermost parallel step, when it is itself a branch)."""
        seen = {name}
        while name in self.branch_of and self.branch_of[name] not in seen:
            name = self.branch_of[name]
            seen.add(name)
        step = self.wf.steps[name]
        branches = set(step.parallel) if isinstance(step, ParallelStep) else set()
        yield from (n for n in step.successors() if n not in branches)

    def check_person_in_branches(self) -> None:
        """A conversation with the person cannot run in a parallel branch: branches run at
        the same time, and the person has one keyboard (two `> ` prompts at once would
        each wait for the line the other took)."""
        for name, step in self.wf.steps.items():
            if not isinstance(step, AgentStep) or step.mode != "conversation":
                continue
            if step.conversation is not None and step.conversation.partner is not None:
                continue  # agents talking to each other need no one at the keyboard
            parallel = self.enclosing(name, self.branch_of)
            if parallel is None:
                continue
            path = join_path("states", name)
            mode = join_path(path, "mode")
            self.report(
                f"step '{name}': a conversation with the person cannot run inside "
                f"parallel step '{parallel}': branches run at the same time and the person "
                "can answer only one conversation at once",
                mode if mode in self.wf.locations else path,
                hint="move the step out of the parallel step, or give it a partner "
                "(conversation.with) so that no person is needed",
            )

    def enclosing(self, name: str, owners: dict[str, str]) -> str | None:
        """The nearest parallel step (`owners` = `branch_of`) or loop (`body_of`) that runs
        `name` inside it, through loop bodies and parallel branches; None if none does."""
        inside = {**self.branch_of, **self.body_of}
        seen: set[str] = set()
        while name not in seen:
            seen.add(name)
            if name in owners:
                return owners[name]
            if name not in inside:
                return None
            name = inside[name]
        return None

    def steps_reaching_an_end(self) -> set[str]:
        """Steps from which some route leads to a terminal (or an inline failure)."""
        incoming: dict[str, set[str]] = {name: set() for name in self.wf.steps}
        done: deque[str] = deque()
        for name, step in self.wf.steps.items():
            if isinstance(step, TerminalStep) or not isinstance(step.on_failure, str | None):
                done.append(name)
            for target in step.successors():
                incoming.setdefault(target, set()).add(name)
            # A branch or body step hands control back to its parallel / loop step.
            if name in self.branch_of:
                incoming[self.branch_of[name]].add(name)
        for name, step in self.wf.steps.items():
            if isinstance(step, LoopBase):
                for body in step.body:
                    incoming.setdefault(step.name or name, set()).add(body)
        finishing: set[str] = set()
        while done:
            name = done.popleft()
            if name in finishing:
                continue
            finishing.add(name)
            done.extend(incoming.get(name, ()))
        return finishing


def _hook_fields(
    actions: list[HookAction], path: str, *, step: str | None, error_refs: bool = False
) -> Iterator[_Field]:
    for i, action in enumerate(actions):
        for key in ("command", "log"):
            value = getattr(action, key)
            if value:
                yield _Field(
                    value,
                    join_path(join_path(path, i), key),
                    key,
                    step,
                    "error",
                    error_refs=error_refs,
                    forward_check=False,
                    shell=key == "command",
                )


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside a value (provider options, call inputs), with its YAML path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _strings(child, join_path(path, str(key)))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _strings(child, join_path(path, i))


_NAMESPACE_CHECKS = {
    "inputs": _Checker.input_problems,
    "states": _Checker.state_problems,
    "workflow": _Checker.workflow_problems,
    "context": _Checker.context_problems,
    "error": _Checker.error_problems,
    "loop": _Checker.loop_problems,
}
_FREE_NAMESPACES = ("env", "awf")
# What a conversation partner's `prompt` (and `until`) can read besides the run's data.
EXCHANGE_VARIABLES = EXCHANGE_NAMES


def _raw(ref: template.FieldRef) -> str:
    """The reference as the user wrote it, near enough: `{{.error.Message}}`."""
    return "{{" + ("" if ref.function_form else ".") + ref.dotted + "}}"


def _normalized(name: str) -> str:
    return name.replace("_", "").lower()


def _property_problem(
    message: str, prop: str, allowed: tuple[str, ...], severity: Severity
) -> Iterator[tuple[str, Severity, str | None]]:
    """AWF's "use 'Output' instead" for a wrong spelling, else a did-you-mean hint."""
    spelled = next((p for p in allowed if _normalized(p) == _normalized(prop)), None)
    if spelled is not None:
        yield f"{message}, use '{spelled}' instead", severity, None
    else:
        yield message, severity, did_you_mean(prop, allowed)


def _namespace_property(
    ref: template.FieldRef, item: _Field, namespace: str, allowed: tuple[str, ...]
) -> Iterator[tuple[str, Severity, str | None]]:
    prop = ref.path[1]
    if prop in allowed:
        return
    if ref.function_form and any(_normalized(p) == _normalized(prop) for p in allowed):
        return  # `{{loop.index1}}`: the function forms spell keys in snake_case
    message = f'invalid {namespace} property "{prop}" in {item.field}'
    yield from _property_problem(message, prop, allowed, item.severity)


def _untrusted_what(path: tuple[str, ...]) -> str:
    if path[0] == "inputs" and len(path) > 1:
        return f'input "{path[1]}"'
    if path[0] == "inputs":
        return "the inputs"
    if path[0] == "states" and len(path) > 1:
        return f'the output of step "{path[1]}"'
    if path[0] == "loop":
        return "the loop item"
    return ".".join(path)
