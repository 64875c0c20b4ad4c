"""Warnings for untrusted text pasted into shell commands, from the parsed template: the
cases a text search missed, and proof that the documented safe form is safe."""

from __future__ import annotations

import pytest

from tests.support.problems import problems_of


def command_step(command: str) -> str:
    return f"""
name: t
inputs: [{{name: x}}, {{name: n, type: integer, default: 1}}]
states:
  initial: ask
  ask: {{type: agent, provider: scripted, prompt: hi, on_success: run}}
  run: {{type: step, command: {command!r}, on_success: done}}
  done: {{type: terminal}}
"""


def shell_warnings(command: str) -> list[str]:
    return [
        p.message
        for p in problems_of(command_step(command))
        if p.severity == "warning" and "shell command" in p.message
    ]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo {{.inputs.x}}", 'input "x" is interpolated into a shell command without escaping'),
        ('echo "{{.inputs.x | escape}}"', 'input "x" is escaped but inside quotes in a shell command'),
        ("echo '{{escape .inputs.x}}'", 'input "x" is escaped but inside quotes in a shell command'),
        ('echo {{index .inputs "x"}}', "the inputs is interpolated into a shell command without escaping"),
        ('echo {{printf "%s escape" .inputs.x}}', 'input "x" is interpolated into a shell command without escaping'),
        ("git commit -m {{.states.ask.Output}}", 'the output of step "ask" is interpolated into a shell command without escaping'),
        ("{{if .inputs.x}}echo {{.inputs.x}}{{end}}", 'input "x" is interpolated into a shell command without escaping'),
    ],
)  # fmt: skip
def test_unprotected_untrusted_text_is_warned_about(command: str, expected: str) -> None:
    assert shell_warnings(command) == [expected]


@pytest.mark.parametrize(
    "command",
    [
        "echo {{.inputs.x | escape}}",
        "echo {{escape .inputs.x}} and {{.states.ask.Output | escape}}",
        'echo "$x"',
        "echo {{.inputs.n}}",  # an integer input is validated
        "test {{.states.ask.ExitCode}} -eq 0",  # a number
        "{{if .inputs.x}}echo set{{end}}",  # only tested, never printed
    ],
)
def test_safe_forms_are_not_warned_about(command: str) -> None:
    assert shell_warnings(command) == []
