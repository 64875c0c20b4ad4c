"""Per-step validation through the loader: the model's messages (spec §5) arrive as problems
at the right YAML path, line and column, with pydantic's wording removed."""

from __future__ import annotations

import textwrap

import pytest

from awf_nb.errors import Problem
from tests.support.problems import only, problems_of


def step(body: str, kind: str = "step") -> str:
    """A workflow whose step `s` (line 4) has `body` (each line at 4 spaces) after its type."""
    lines = "\n".join("    " + line for line in textwrap.dedent(body).strip().splitlines())
    return (
        "name: demo\nstates:\n  initial: s\n  s:\n"
        f"    type: {kind}\n{lines}\n"
        "  done:\n    type: terminal\n"
    )


def at(problem: Problem) -> tuple[str, int, int]:
    return problem.path, problem.line, problem.column


# --- command steps -------------------------------------------------------------------------


def test_command_and_script_file_are_mutually_exclusive() -> None:
    problems = problems_of(step("command: make\nscript_file: build.sh\non_success: done"))
    problem = only(problems, "command and script_file are mutually exclusive")
    assert at(problem) == ("states.s", 4, 3)


def test_command_or_script_file_is_required() -> None:
    problems = problems_of(step("dir: /tmp\non_success: done"))
    problem = only(problems, "either command or script_file is required for command-type steps")
    assert at(problem) == ("states.s", 4, 3)


# --- agent steps ---------------------------------------------------------------------------


def test_mode_must_be_single_or_conversation() -> None:
    problems = problems_of(step("provider: local\nmode: chat\nprompt: hi", "agent"))
    problem = only(problems, "mode must be 'single' or 'conversation'")
    assert at(problem) == ("states.s.mode", 7, 5)


def test_prompt_and_prompt_file_are_mutually_exclusive() -> None:
    problems = problems_of(step("provider: local\nprompt: hi\nprompt_file: p.md", "agent"))
    assert at(only(problems, "prompt and prompt_file are mutually exclusive")) == ("states.s", 4, 3)


def test_prompt_or_prompt_file_is_required() -> None:
    problems = problems_of(step("provider: local\non_success: done", "agent"))
    assert at(only(problems, "prompt or prompt_file is required")) == ("states.s", 4, 3)


@pytest.mark.parametrize("prompt", ['""', '"   "', "null"])
def test_prompt_is_required_in_conversation_mode(prompt: str) -> None:
    body = f"provider: local\nmode: conversation\nprompt: {prompt}"
    problems = problems_of(step(body, "agent"))
    assert at(only(problems, "prompt is required in conversation mode")) == ("states.s", 4, 3)


def test_prompt_file_is_not_supported_in_conversation_mode() -> None:
    problems = problems_of(step("provider: local\nmode: conversation\nprompt_file: p.md", "agent"))
    only(problems, "prompt_file is not supported in conversation mode")


def test_output_format() -> None:
    problems = problems_of(step("provider: local\nprompt: hi\noutput_format: yaml", "agent"))
    problem = only(problems, "output_format must be 'json', 'text', or empty")
    assert at(problem) == ("states.s.output_format", 8, 5)


def test_provider_is_required() -> None:
    problems = problems_of(step("prompt: hi", "agent"))
    problem = only(problems, "states.s.provider: required field missing")
    assert at(problem) == ("states.s.provider", 4, 3)  # at the step: the key is not there


def test_empty_provider_is_missing() -> None:
    problems = problems_of(step("provider:\nprompt: hi", "agent"))
    only(problems, "states.s.provider: required field missing")


# --- retry -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_attempts", "0", "max_attempts must be >= 1"),
        ("backoff", "random", "invalid backoff strategy"),
        ("jitter", "1.5", "jitter must be between 0.0 and 1.0"),
        ("multiplier", "-1", "multiplier must be >= 0"),
    ],
)
def test_retry_messages(field: str, value: str, message: str) -> None:
    body = f"command: make\non_success: done\nretry:\n  max_attempts: 3\n  {field}: {value}"
    if field == "max_attempts":
        body = f"command: make\non_success: done\nretry:\n  {field}: {value}"
    problems = problems_of(step(body))
    problem = only(problems, message)
    assert problem.path == f"states.s.retry.{field}"
    assert (problem.line, problem.column) == (10 if field != "max_attempts" else 9, 7)


# --- types and unions ------------------------------------------------------------------------


def test_wrong_type_uses_go_words() -> None:
    problems = problems_of(step("command: make\non_success: done\ntransitions: go"))
    problem = only(problems, "expected list, got string")
    assert at(problem) == ("states.s.transitions", 8, 5)


def test_union_reports_one_message() -> None:
    problems = problems_of(step("command: make\non_success: done\non_failure: [a, b]"))
    problem = only(problems, "expected string or map, got list")
    assert at(problem) == ("states.s.on_failure", 8, 5)


def test_union_member_that_matched_reports_inside() -> None:
    problems = problems_of(step("command: make\non_failure:\n  message: boom\n  status: high"))
    assert [p.message for p in problems if p.severity == "error"] == ["expected int, got string"]
    assert at(problems[0]) == ("states.s.on_failure.status", 9, 7)


def test_enum_value() -> None:
    problems = problems_of(
        step("parallel: [a]\nstrategy: fastest\non_success: done", "parallel")
        + "  a:\n    type: step\n    command: x\n"
    )
    problem = only(
        problems,
        "invalid value 'fastest': expected 'all_succeed', 'any_succeed' or 'best_effort'",
    )
    assert at(problem) == ("states.s.strategy", 7, 5)


def test_bad_duration() -> None:
    problems = problems_of(step("command: make\ntimeout: soon\non_success: done"))
    message = "invalid duration 'soon': use a number of seconds or a Go duration like '1m30s'"
    assert at(only(problems, message)) == ("states.s.timeout", 7, 5)


def test_negative_max_concurrent() -> None:
    problems = problems_of(step("parallel: []\nmax_concurrent: -1\non_success: done", "parallel"))
    assert at(only(problems, "greater than or equal to 0, got -1")) == (
        "states.s.max_concurrent",
        7,
        5,
    )


def test_input_errors_point_into_the_list() -> None:
    text = (
        "name: demo\ninputs:\n  - name: a\n  - name: b\n    type: [text]\n  - default: 3\n"
        "states:\n  initial: s\n  s:\n    type: terminal\n"
    )
    problems = problems_of(text)
    typed = only(problems, "expected string, got list")
    assert at(typed) == ("inputs[1].type", 5, 5)
    missing = only(problems, "inputs[2].name: required field missing")
    assert at(missing) == ("inputs[2].name", 6, 5)


def test_hook_needs_exactly_one_action() -> None:
    problems = problems_of(step("command: make\non_success: done\nhooks:\n  pre:\n    - {}"))
    problem = only(problems, "a hook needs exactly one of 'log' or 'command'")
    assert at(problem) == ("states.s.hooks.pre[0]", 10, 11)


def test_every_mistake_in_one_step_is_reported() -> None:
    body = """
    command: make
    script_file: x.sh
    timeout: soon
    retry: {max_attempts: 0}
    on_success: done
    """
    messages = {p.message for p in problems_of(step(body)) if p.severity == "error"}
    assert messages == {
        "command and script_file are mutually exclusive",
        "invalid duration 'soon': use a number of seconds or a Go duration like '1m30s'",
        "max_attempts must be >= 1",
    }


def test_no_pydantic_wording_leaks() -> None:
    body = "provider: 5\nmode: 7\nprompt: [x]\noptions: nope\ntimeout: {a: 1}"
    for problem in problems_of(step(body, "agent")):
        assert "Value error" not in problem.message
        assert "Input should" not in problem.message
        assert "pydantic" not in problem.message
        assert problem.line > 0
