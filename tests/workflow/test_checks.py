"""Cross-step checks (spec §5): references, routing, conditions, templates, reachability."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.errors import Problem
from awf_nb.workflow.checks import check_workflow, execution_order, locate, parent_path
from awf_nb.workflow.loader import load_text, load_workflow
from tests.support.problems import only, problems_of, yml


def messages(problems: list[Problem]) -> list[str]:
    """Every problem's message: a check that something is NOT reported compares the whole
    list, so a reworded message cannot make it pass without checking anything."""
    return [p.message for p in problems]


UNREACHABLE = "step '{}' is unreachable from the initial state 'build'"


def at(problem: Problem) -> tuple[str, int, int, str]:
    return problem.path, problem.line, problem.column, problem.severity


BASE = """
name: demo
inputs:
  - name: topic
  - name: count
    type: integer
states:
  initial: build
  build:
    type: step
    command: make
    on_success: review
  review:
    type: agent
    provider: local
    prompt: Review {{.states.build.Output}}
    on_success: done
  done:
    type: terminal
"""


def test_base_is_clean() -> None:
    assert problems_of(BASE) == []


# --- structure -----------------------------------------------------------------------------


def test_initial_state_not_found() -> None:
    problems = problems_of(BASE.replace("initial: build", "initial: biuld"))
    problem = only(problems, "initial state 'biuld' not found in steps")
    assert at(problem) == ("states.initial", 7, 3, "error")
    assert problem.hint == 'did you mean "build"?'


def test_at_least_one_terminal() -> None:
    text = BASE.replace("  done:\n    type: terminal\n", "").replace("on_success: done", "")
    problem = only(problems_of(text), "at least one terminal state is required")
    assert at(problem) == ("states", 6, 1, "error")


@pytest.mark.parametrize(
    ("old", "new", "message", "path", "line"),
    [
        (
            "on_success: review",
            "on_success: reveiw",
            "step 'build': on_success references unknown state 'reveiw'",
            "states.build.on_success",
            11,
        ),
        (
            "on_success: review",
            "on_success: review\n    on_failure: fixit",
            "step 'build': on_failure references unknown state 'fixit'",
            "states.build.on_failure",
            12,
        ),
        (
            "on_success: review",
            "transitions:\n      - when: inputs.topic == 'x'\n        goto: review\n"
            "      - goto: dnoe",
            "step 'build': transition references unknown state 'dnoe'",
            "states.build.transitions[1].goto",
            14,
        ),
    ],
)
def test_unknown_route_targets(old: str, new: str, message: str, path: str, line: int) -> None:
    problem = only(problems_of(BASE.replace(old, new, 1)), message)
    assert (problem.path, problem.line, problem.severity) == (path, line, "error")


def test_unknown_target_hint() -> None:
    problems = problems_of(BASE.replace("on_success: review", "on_success: reveiw"))
    problem = only(problems, "step 'build': on_success references unknown state 'reveiw'")
    assert problem.hint == 'did you mean "review"?'


LOOPS = """
name: demo
states:
  initial: fan
  fan:
    type: parallel
    parallel: [a, b]
    on_success: each
  a:
    type: step
    command: echo a
  b:
    type: step
    command: echo b
  each:
    type: for_each
    items: [1, 2]
    body: [one]
    on_complete: again
  one:
    type: step
    command: echo {{.loop.Item}}
  again:
    type: while
    while: states.one.ExitCode != 0
    break_when: states.one.Output == "stop"
    body: [one]
    max_iterations: 5
    on_complete: done
  done:
    type: terminal
"""


def test_parallel_and_loops_are_clean() -> None:
    assert problems_of(LOOPS) == []


@pytest.mark.parametrize(
    ("old", "new", "message", "path"),
    [
        (
            "parallel: [a, b]",
            "parallel: [a, c]",
            "step 'fan': parallel branch references unknown state 'c'",
            "states.fan.parallel[1]",
        ),
        (
            "body: [one]\n    on_complete: again",
            "body: [uno]\n    on_complete: again",
            "step 'each': body references unknown state 'uno'",
            "states.each.body[0]",
        ),
        (
            "on_complete: again",
            "on_complete: agian",
            "step 'each': on_complete references unknown state 'agian'",
            "states.each.on_complete",
        ),
    ],
)
def test_unknown_loop_and_parallel_targets(old: str, new: str, message: str, path: str) -> None:
    problem = only(problems_of(LOOPS.replace(old, new, 1)), message)
    assert (problem.path, problem.severity) == (path, "error")
    assert problem.line > 0


def test_command_step_must_route() -> None:
    problems = problems_of(BASE.replace("    on_success: review\n", "", 1))
    problem = only(
        problems, "step 'build': command step must have OnSuccess/OnFailure or Transitions"
    )
    assert at(problem) == ("states.build", 8, 3, "error")


@pytest.mark.parametrize(
    ("routing", "unreachable"),
    [
        ("on_failure: done", ["review"]),
        ("on_failure: {message: boom}", ["review", "done"]),
        ("transitions:\n      - goto: review", []),
    ],
)
def test_command_routing_alternatives(routing: str, unreachable: list[str]) -> None:
    problems = problems_of(BASE.replace("on_success: review", routing, 1))
    # No "command step must have OnSuccess…" error: only what the new routing leaves out.
    assert messages(problems) == [UNREACHABLE.format(name) for name in unreachable]


def test_parallel_branches_and_loop_bodies_need_no_routing() -> None:
    assert messages(problems_of(LOOPS)) == []  # their command steps have no routes


def test_continue_from_unknown_step() -> None:
    text = BASE.replace(
        "    on_success: done",
        "    conversation:\n      continue_from: biuld\n    on_success: done",
    )
    problem = only(
        problems_of(text), "step 'review': continue_from references unknown step 'biuld'"
    )
    assert at(problem) == ("states.review.conversation.continue_from", 17, 7, "error")
    assert problem.hint == 'did you mean "build"?'


def test_max_iterations_limit() -> None:
    for value in (20000, -1):
        problems = problems_of(LOOPS.replace("max_iterations: 5", f"max_iterations: {value}"))
        message = (
            f"max_iterations must be between 1 and 10000 (0 means the default, 100), got {value}"
        )
        assert only(problems, message).path == "states.again.max_iterations"
    assert problems_of(LOOPS.replace("max_iterations: 5", "max_iterations: 0")) == []


# --- conditions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("while: states.one.ExitCode != 0", "while: states.one.ExitCode !=", "states.again.while"),
        ('break_when: states.one.Output == "stop"', "break_when: (a", "states.again.break_when"),
    ],
)
def test_condition_syntax_errors(old: str, new: str, path: str) -> None:
    problems = [p for p in problems_of(LOOPS.replace(old, new)) if p.path == path]
    assert len(problems) == 1
    assert problems[0].message.startswith("invalid condition ")
    assert "at column" in problems[0].message
    assert problems[0].severity == "error"


def test_transition_condition_error_has_its_location() -> None:
    text = BASE.replace(
        "on_success: review", "transitions:\n      - when: inputs.topic = 'x'\n        goto: review"
    )
    [problem] = [p for p in problems_of(text) if p.message.startswith("invalid condition")]
    assert (problem.path, problem.line, problem.column) == (
        "states.build.transitions[0].when",
        12,
        9,
    )
    assert "column 14" in problem.message


# --- template references -------------------------------------------------------------------


def with_command(command: str) -> str:
    return BASE.replace("command: make", f"command: {command}")


def test_undefined_input_in_command_is_an_error() -> None:
    problem = only(
        problems_of(with_command("echo {{.inputs.topc | escape}}")),
        'undefined input "topc" referenced in command',
    )
    assert at(problem) == ("states.build.command", 10, 5, "error")
    assert problem.hint == 'did you mean "topic"?'


def test_undefined_input_in_prompt_is_a_warning() -> None:
    text = BASE.replace("Review {{.states.build.Output}}", "Review {{.inputs.nope}}")
    problem = only(problems_of(text), 'undefined input "nope" referenced in prompt')
    assert at(problem) == ("states.review.prompt", 15, 5, "warning")


def test_undefined_step() -> None:
    problem = only(
        problems_of(with_command("echo {{.states.ghost.Output}}")),
        'undefined step "ghost" referenced in command',
    )
    assert problem.severity == "error"


def test_forward_reference() -> None:
    problem = only(
        problems_of(with_command("echo {{.states.review.Output}}")),
        'forward reference to step "review" in command (referenced step has not executed yet)',
    )
    assert at(problem) == ("states.build.command", 10, 5, "error")


def test_self_reference_is_forward_but_allowed_after_the_step() -> None:
    problems = problems_of(with_command("echo {{.states.build.Output}}"))
    only(
        problems,
        'forward reference to step "build" in command (referenced step has not executed yet)',
    )
    text = BASE.replace(
        "on_success: review",
        "on_success: review\n    on_failure: {message: '{{.states.build.Stderr}}'}",
    )
    assert messages(problems_of(text)) == []


def test_invalid_property_with_the_right_spelling() -> None:
    text = BASE.replace("command: make", "command: make", 1) + (
        "  report:\n    type: step\n    command: echo {{.states.build.output}}\n"
        "    on_success: done\n"
    )
    text = text.replace("on_success: done\n  done:", "on_success: report\n  done:")
    problem = only(
        problems_of(text),
        'invalid state property "output" for step "build" in command, use \'Output\' instead',
    )
    assert at(problem) == ("states.report.command", 21, 5, "error")


@pytest.mark.parametrize(
    ("prop", "right"), [("exit_code", "ExitCode"), ("json", "JSON"), ("tokens_used", "TokensUsed")]
)
def test_snake_case_properties_get_their_spelling(prop: str, right: str) -> None:
    text = BASE.replace("{{.states.build.Output}}", f"{{{{.states.build.{prop}}}}}")
    message = f'invalid state property "{prop}" for step "build" in prompt, use \'{right}\' instead'
    assert only(problems_of(text), message).severity == "warning"  # a prompt: warning only


def test_unknown_property() -> None:
    text = BASE.replace("{{.states.build.Output}}", "{{.states.build.Outptu}}")
    problem = only(problems_of(text), 'invalid state property "Outptu" for step "build" in prompt')
    assert problem.hint == 'did you mean "Output"?'


@pytest.mark.parametrize(
    "ref",
    [
        ".states.build.Conversation.TotalTurns",
        ".states.build.conversation.total_turns",
        ".states.build.Response.items",
        ".states.build.JSON.approved",
        ".states.build.TokensEstimated",
        ".states.build.Error",
        "states.build.Output",  # the namespace function form
    ],
)
def test_valid_state_properties(ref: str) -> None:
    text = BASE.replace("{{.states.build.Output}}", "{{" + ref + "}}")
    assert problems_of(text) == []


def test_missing_state_property() -> None:
    text = BASE.replace("{{.states.build.Output}}", "{{.states.build}}")
    only(
        problems_of(text),
        'missing property for state reference "build" in prompt '
        "(expected .Output, .Stderr, .ExitCode, or .Status)",
    )


def test_parallel_sibling_reference_is_a_warning() -> None:
    text = LOOPS.replace("command: echo b", "command: echo {{.states.a.Output}}")
    problem = only(
        problems_of(text),
        'parallel branch "b" references sibling branch "a" in command (branches run concurrently)',
    )
    assert problem.severity == "warning"


def test_loop_data_in_a_body_and_outside() -> None:
    text = LOOPS.replace("command: echo a", "command: echo {{.loop.Index1}}")
    problem = only(
        problems_of(text),
        "loop reference '{{.loop.Index1}}' used outside of a loop body in command",
    )
    assert problem.severity == "warning"
    body = LOOPS.replace("{{.loop.Item}}", "{{.loop.Item}} {{loop.index1}} {{.loop.Parent.Item}}")
    assert problems_of(body) == []
    bad = LOOPS.replace("{{.loop.Item}}", "{{.loop.Itme}}")
    assert only(problems_of(bad), 'invalid loop property "Itme" in command').severity == "error"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("{{.workflow.id}}", "invalid workflow property \"id\" in command, use 'ID' instead"),
        ("{{.workflow.Nmae}}", 'invalid workflow property "Nmae" in command'),
        (
            "{{.context.working_dir}}",
            "invalid context property \"working_dir\" in command, use 'WorkingDir' instead",
        ),
        ("{{.nothing.here}}", "unknown reference type '{{.nothing.here}}' in command"),
    ],
)
def test_other_namespaces(ref: str, message: str) -> None:
    assert only(problems_of(with_command(f"echo {ref}")), message).severity == "error"


@pytest.mark.parametrize(
    "ref",
    ["{{.workflow.ID}}", "{{.context.WorkingDir}}", "{{context.working_dir}}", "{{.env.HOME}}",
     "{{env.PATH}}", "{{.inputs.count}}", "{{inputs.topic | escape}}"],
)  # fmt: skip
def test_valid_namespace_references(ref: str) -> None:
    assert problems_of(with_command(f"echo {ref}")) == []


HOOKS = """
name: demo
hooks:
  workflow_error:
    - log: "failed at {{.error.State}}: {{.error.Message}} {{error.exit_code}}"
  workflow_end:
    - log: "{{.error.Message}}"
states:
  initial: done
  done:
    type: terminal
"""


def test_error_references_only_in_workflow_error_hooks() -> None:
    problems = problems_of(HOOKS)
    problem = only(
        problems,
        "error reference '{{.error.Message}}' used outside of error hook context in log",
    )
    assert at(problem) == ("hooks.workflow_end[0].log", 6, 7, "error")
    assert len(problems) == 1


def test_invalid_error_property() -> None:
    text = HOOKS.replace("{{.error.State}}", "{{.error.Step}}")
    assert only(problems_of(text), 'invalid error property "Step" in log').severity == "error"


def test_error_reference_in_terminal_message_is_a_warning() -> None:
    text = BASE.replace(
        "    type: terminal", "    type: terminal\n    message: '{{.error.Message}}'"
    )
    problem = only(
        problems_of(text),
        "error reference '{{.error.Message}}' used outside of error hook context in message",
    )
    assert problem.severity == "warning"


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("dir", "'{{.inputs.dir}}'", "states.build.dir"),
        (
            "hooks",
            "{pre: [{command: 'echo {{.inputs.dir}}'}]}",
            "states.build.hooks.pre[0].command",
        ),
        ("hooks", "{post: [{log: '{{.inputs.dir}}'}]}", "states.build.hooks.post[0].log"),
    ],
)
def test_dirs_and_hooks_are_checked_strictly(field: str, value: str, path: str) -> None:
    text = BASE.replace("command: make", f"command: make\n    {field}: {value}")
    problem = only(
        problems_of(text), f'undefined input "dir" referenced in {path.rsplit(".", 1)[-1]}'
    )
    assert (problem.path, problem.severity) == (path, "error")


def test_script_file_is_checked() -> None:
    text = BASE.replace("command: make", "script_file: scripts/{{.inputs.nope}}.sh")
    only(problems_of(text), 'undefined input "nope" referenced in script_file')


def test_loop_items_and_max_iterations_are_checked() -> None:
    text = LOOPS.replace("items: [1, 2]", "items: '{{.inputs.files}}'").replace(
        "max_iterations: 5", "max_iterations: '{{.inputs.limit}}'"
    )
    problems = problems_of(text)
    assert only(problems, 'undefined input "files" referenced in items').severity == "error"
    assert only(problems, 'undefined input "limit" referenced in max_iterations').path == (
        "states.again.max_iterations"
    )


def test_options_and_call_inputs_are_checked_leniently() -> None:
    text = BASE.replace(
        "    prompt: Review", "    options:\n      model: '{{.inputs.model}}'\n    prompt: Review"
    )
    problem = only(problems_of(text), 'undefined input "model" referenced in options')
    assert at(problem) == ("states.review.options.model", 16, 7, "warning")


def test_template_syntax_error_in_a_command_is_an_error() -> None:
    problems = problems_of(with_command("'echo {{.inputs.topic'"))
    [problem] = [p for p in problems if p.message.startswith("failed to parse template")]
    assert problem.message == (
        "failed to parse template in command: unclosed action (line 1, column 6 of the template)"
    )
    assert at(problem) == ("states.build.command", 10, 5, "error")


def test_template_syntax_error_in_a_prompt_is_a_warning() -> None:
    text = BASE.replace("Review {{.states.build.Output}}", "Review {{if}}")
    [problem] = problems_of(text)
    assert problem.message.startswith("failed to parse template in prompt: ")
    assert problem.severity == "warning"


def test_each_problem_is_reported_once_per_field() -> None:
    problems = problems_of(with_command("echo {{.inputs.x}} {{.inputs.x}}"))
    assert len([p for p in problems if p.message.startswith('undefined input "x"')]) == 1


# --- shell escaping (beyond AWF) -----------------------------------------------------------


def test_unescaped_input_in_command_warns() -> None:
    problem = only(
        problems_of(with_command("echo {{.inputs.topic}}")),
        'input "topic" is interpolated into a shell command without escaping',
    )
    assert at(problem) == ("states.build.command", 10, 5, "warning")
    assert problem.hint == 'use "$topic" or {{.inputs.topic | escape}}'


@pytest.mark.parametrize(
    "command",
    [
        'echo "$topic"',
        "echo {{.inputs.topic | escape}}",
        "echo {{escape .inputs.topic}}",
        "echo {{inputs.topic | escape}}",
        "echo {{- if .inputs.topic}} yes{{end}}",
        "echo {{.inputs.count}}",  # an integer input cannot inject anything
    ],
)
def test_safe_uses_of_inputs_do_not_warn(command: str) -> None:
    assert messages(problems_of(with_command(f"'{command}'"))) == []


def test_unescaped_input_in_hook_command_warns() -> None:
    text = BASE.replace(
        "command: make", "command: make\n    hooks: {post: [{command: 'say {{.inputs.topic}}'}]}"
    )
    problem = only(
        problems_of(text), 'input "topic" is interpolated into a shell command without escaping'
    )
    assert problem.path == "states.build.hooks.post[0].command"


# --- reachability (beyond AWF) -------------------------------------------------------------


def test_unreachable_step_warns() -> None:
    text = BASE + "  orphan:\n    type: step\n    command: x\n    on_success: done\n"
    problem = only(problems_of(text), "step 'orphan' is unreachable from the initial state 'build'")
    assert at(problem) == ("states.orphan", 19, 3, "warning")


def test_step_that_cannot_reach_a_terminal_warns() -> None:
    text = BASE.replace("on_success: done", "on_success: review2") + (
        "  review2:\n    type: agent\n    provider: local\n    prompt: again\n"
        "    on_success: review\n"
    )
    problems = problems_of(text)
    never = [p.message for p in problems if "can never reach a terminal state" in p.message]
    assert sorted(never) == [
        f"step '{name}' can never reach a terminal state" for name in ("build", "review", "review2")
    ]  # not 'done': a terminal state is an end


def test_inline_failure_counts_as_an_end() -> None:
    text = BASE.replace("    on_success: done", "    on_failure: {message: no}")
    assert messages(problems_of(text)) == [UNREACHABLE.format("done")]


def test_execution_order_is_breadth_first() -> None:
    wf = load_text(yml(LOOPS))
    assert execution_order(wf) == ["fan", "a", "b", "each", "one", "again", "done"]


def test_check_workflow_can_be_called_on_a_loaded_workflow() -> None:
    wf = load_text(yml(BASE))
    wf.steps["build"].on_success = "nowhere"
    [problem] = [p for p in check_workflow(wf) if p.severity == "error"]
    assert problem.message == "step 'build': on_success references unknown state 'nowhere'"
    assert (problem.line, problem.column) == (11, 5)


def test_locate_falls_back_to_the_nearest_ancestor() -> None:
    locations = {"": (1, 1), "states": (3, 1), "states.a": (4, 3), "inputs[0]": (2, 5)}
    assert locate(locations, "states.a.prompt") == (4, 3)
    assert locate(locations, "inputs[0].name") == (2, 5)
    assert locate(locations, "nothing.at.all") == (1, 1)
    assert locate({}, "x") == (1, 1)
    assert parent_path("states.a[2].b") == "states.a[2]"


# --- agent steps that repeat without limits -----------------------------------------------

CYCLE_HINT = "add limits: {max_agent_turns: N, max_tokens: N, timeout: 30m}"


def repeating(problems: list[Problem]) -> list[tuple[str, str]]:
    """The "… and the workflow sets no limits" warnings: (path, message)."""
    return [(p.path, p.message) for p in problems if "sets no limits" in p.message]


def agent(name: str, routes: str = "") -> str:
    """An agent step named `name` in a `states:` mapping, with `routes` (YAML lines)."""
    lines = [f"  {name}:", "    type: agent", "    provider: local", "    prompt: go"]
    lines += [f"    {line}" for line in routes.splitlines()]
    return "\n".join(lines) + "\n"


def test_a_parallel_branch_in_no_cycle_is_not_warned_about() -> None:
    text = (
        "name: fan\nstates:\n  initial: fan\n"
        "  fan:\n    type: parallel\n    parallel: [left, right]\n    on_success: done\n"
        + agent("left")
        + agent("right")
        + "  done: {type: terminal}\n"
    )
    assert problems_of(text) == []


def test_a_parallel_step_in_a_cycle_warns_about_its_agent_branches() -> None:
    text = (
        "name: fan\nstates:\n  initial: fan\n"
        "  fan:\n    type: parallel\n    parallel: [left, right]\n    transitions:\n"
        "      - {when: 'states.left.Output == \"done\"', goto: done}\n      - {goto: fan}\n"
        + agent("left")
        + "  right: {type: step, command: echo right}\n"
        + "  done: {type: terminal}\n"
    )
    problems = problems_of(text)
    problem = only(
        problems,
        "step 'left' is an agent step in a cycle and the workflow sets no limits: nothing "
        "bounds how many times its agent is asked, and nothing bounds its tokens or time",
    )
    assert (problem.path, problem.severity, problem.hint) == ("states.left", "warning", CYCLE_HINT)
    assert len(repeating(problems)) == 1  # the command branch is no agent


REVIEW_CYCLE = (
    "name: loop\nstates:\n  initial: write\n"
    + agent("write", "on_success: review")
    + agent(
        "review",
        "transitions:\n  - {when: 'states.review.Output == \"ok\"', goto: done}\n  - {goto: write}",
    )
    + "  done: {type: terminal}\n"
)


def test_a_transitions_cycle_warns_and_limits_silence_it() -> None:
    assert [path for path, _ in repeating(problems_of(REVIEW_CYCLE))] == [
        "states.write",
        "states.review",
    ]
    limited = REVIEW_CYCLE.replace("states:\n", "limits: {max_agent_turns: 10}\nstates:\n", 1)
    assert problems_of(limited) == []


FOR_EACH = (
    "name: loop\nstates:\n  initial: each\n"
    "  each:\n    type: for_each\n    items: [a, b]\n    body: [ask]\n    on_complete: done\n"
    + agent("ask")
    + "  done: {type: terminal}\n"
)


def test_a_while_loop_body_warns_a_for_each_body_does_not() -> None:
    assert problems_of(FOR_EACH) == []
    looped = FOR_EACH.replace(
        "type: for_each\n    items: [a, b]", "type: while\n    while: 'states.ask.Output != \"x\"'"
    )
    assert repeating(problems_of(looped)) == [
        (
            "states.ask",
            "step 'ask' is an agent step in the body of while loop 'each' and the workflow "
            "sets no limits: only its max_iterations bounds how many times its agent is "
            "asked, and nothing bounds its tokens or time",
        )
    ]


def test_a_for_each_body_step_routing_back_into_the_body_is_a_cycle() -> None:
    text = (
        "name: loop\nstates:\n  initial: each\n"
        "  each:\n    type: for_each\n    items: [a, b]\n    body: [write, review]\n"
        "    on_complete: done\n"
        + agent("write", "on_success: review")
        + agent(
            "review",
            "transitions:\n  - {when: 'states.review.Output == \"ok\"', goto: each}\n"
            "  - {goto: write}",
        )
        + "  done: {type: terminal}\n"
    )
    assert [path for path, _ in repeating(problems_of(text))] == ["states.write", "states.review"]


CALLER = """
name: caller
states:
  initial: call
  call:
    type: call_workflow
    workflow: helper
    transitions:
      - {when: 'states.call.Output == "done"', goto: done}
      - {goto: call}
  done: {type: terminal}
"""


def caller(tmp_path: Path, helper_step: str, text: str = CALLER) -> Path:
    """caller.yaml (`text`) and the helper.yaml it calls, whose first step is `helper_step`."""
    helper = "name: helper\nstates:\n  initial: one\n" + helper_step + "  done: {type: terminal}\n"
    (tmp_path / "helper.yaml").write_text(helper)
    (tmp_path / "caller.yaml").write_text(yml(text))
    return tmp_path / "caller.yaml"


def test_a_call_in_a_cycle_warns_when_the_called_workflow_has_agents(tmp_path: Path) -> None:
    path = caller(tmp_path, agent("one", "on_success: done"))
    assert repeating(load_workflow(path).warnings) == [
        (
            "states.call",
            "step 'call' calls workflow 'helper', which has agent steps, in a cycle and the "
            "workflow sets no limits: nothing bounds how many times its agents are asked, and "
            "nothing bounds its tokens or time",
        )
    ]


def test_a_call_in_a_cycle_of_a_workflow_without_agents_is_not_warned_about(
    tmp_path: Path,
) -> None:
    path = caller(tmp_path, "  one: {type: step, command: echo, on_success: done}\n")
    assert load_workflow(path).warnings == []


def test_a_call_made_once_is_not_warned_about(tmp_path: Path) -> None:
    once = CALLER.replace(
        "    transitions:\n      - {when: 'states.call.Output == \"done\"', goto: done}\n"
        "      - {goto: call}\n",
        "    on_success: done\n",
    )
    path = caller(tmp_path, agent("one", "on_success: done"), once)
    assert load_workflow(path).warnings == []


def test_a_workflow_calling_itself_in_a_cycle_is_checked_without_recursing(
    tmp_path: Path,
) -> None:
    (tmp_path / "caller.yaml").write_text(
        yml(CALLER.replace("workflow: helper", "workflow: caller"))
    )
    [(_, message)] = repeating(load_workflow(tmp_path / "caller.yaml").warnings)
    assert "calls workflow 'caller', which has agent steps" in message


# --- the person in parallel branches --------------------------------------------------------

CHATS_IN_PARALLEL = """
name: two-chats
states:
  initial: both
  both:
    type: parallel
    parallel: [left, right]
    on_success: done
  left:
    type: agent
    provider: local
    mode: conversation
    prompt: hello
  right:
    type: agent
    provider: local
    mode: conversation
    prompt: hello
    conversation:
      with: {provider: local, name: reviewer}
      max_turns: 2
  done: {type: terminal}
"""

PERSON_IN_BRANCH = (
    "step 'left': a conversation with the person cannot run inside parallel step 'both': "
    "branches run at the same time and the person can answer only one conversation at once"
)


def test_a_conversation_with_the_person_in_a_parallel_branch_is_rejected() -> None:
    problems = problems_of(CHATS_IN_PARALLEL)
    assert [p.message for p in problems] == [PERSON_IN_BRANCH]  # agent-to-agent is fine
    assert at(problems[0]) == ("states.left.mode", 11, 5, "error")
    assert problems[0].hint == (
        "move the step out of the parallel step, or give it a partner (conversation.with) "
        "so that no person is needed"
    )


def test_an_explicit_person_partner_in_a_branch_is_rejected_too() -> None:
    text = CHATS_IN_PARALLEL.replace(
        "    prompt: hello\n  right:",
        "    prompt: hello\n    conversation: {with: person}\n  right:",
    )
    assert [p.message for p in problems_of(text)] == [PERSON_IN_BRANCH]


def test_a_person_conversation_in_a_loop_inside_a_branch_is_rejected() -> None:
    text = CHATS_IN_PARALLEL.replace("parallel: [left, right]", "parallel: [each, right]").replace(
        "  left:\n", "  each:\n    type: for_each\n    items: [1, 2]\n    body: [left]\n  left:\n"
    )
    assert [p.message for p in problems_of(text)] == [PERSON_IN_BRANCH]


def test_a_person_conversation_in_a_nested_parallel_step_names_the_inner_one() -> None:
    text = CHATS_IN_PARALLEL.replace("parallel: [left, right]", "parallel: [inner, right]").replace(
        "  left:\n", "  inner:\n    type: parallel\n    parallel: [left]\n  left:\n"
    )
    assert [p.message for p in problems_of(text)] == [
        PERSON_IN_BRANCH.replace("parallel step 'both'", "parallel step 'inner'")
    ]


def test_a_person_conversation_outside_parallel_steps_is_fine() -> None:
    text = (
        CHATS_IN_PARALLEL.replace("parallel: [left, right]", "parallel: [right]")
        .replace("    on_success: done\n  left:", "    on_success: left\n  left:")
        .replace("    prompt: hello\n  right:", "    prompt: hello\n    on_success: done\n  right:")
    )
    assert problems_of(text) == []
