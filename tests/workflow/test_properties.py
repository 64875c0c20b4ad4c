"""Property test: whatever YAML text it is given, the loader loads it or says where it is wrong.

Hypothesis builds valid workflows, dumps them to YAML and then damages them — deleting and
renaming keys, changing value types, breaking the indentation, cutting the text, splicing
in random characters — and feeds the result to `load_text`. Every document must either load
or raise `DefinitionError` whose problems all point at a line; any other exception (a raw
pydantic, YAML, Key or Recursion error) fails the test.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awf_nb.errors import DefinitionError
from awf_nb.workflow.loader import load_text

EXAMPLES = 2500
STEP_NAMES = ["build", "test", "review", "chat", "fix", "loop", "fan", "done", "failed"]
INPUT_NAMES = ["topic", "path", "mode", "count"]

names = st.sampled_from(STEP_NAMES)
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
templates = st.sampled_from(
    [
        "echo hi",
        "echo {{.inputs.topic}}",
        "echo {{.inputs.topic | escape}}",
        "{{.states.build.Output}}",
        "{{.states.build.output}}",
        "{{if .inputs.mode}}x{{else}}y{{end}}",
        "{{.error.Message}}",
        "{{loop.index1}}",
        "{{ broken",
    ]
)
conditions = st.sampled_from(
    ["states.build.ExitCode == 0", "inputs.mode in ['a', 'b']", "len(inputs.path) > 2", "a =="]
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(), texts)


@st.composite
def steps(draw: st.DrawFn, name: str, targets: list[str]) -> dict[str, Any]:
    kind = draw(st.sampled_from(["step", "agent", "terminal", "parallel", "for_each", "while"]))
    target = draw(st.sampled_from(targets))
    step: dict[str, Any] = {"type": kind}
    if kind == "step":
        step["command"] = draw(templates)
        if draw(st.booleans()):
            step["transitions"] = [{"when": draw(conditions), "goto": target}, {"goto": target}]
        else:
            step["on_success"] = target
        if draw(st.booleans()):
            step["retry"] = {"max_attempts": draw(st.integers(0, 3)), "backoff": "linear"}
    elif kind == "agent":
        step |= {"provider": "scripted", "prompt": draw(templates), "on_success": target}
        if draw(st.booleans()):
            step["mode"] = "conversation"
        if draw(st.booleans()):
            step["conversation"] = {"continue_from": draw(names)}
    elif kind == "terminal":
        step["status"] = draw(st.sampled_from(["success", "failure"]))
        step["message"] = draw(templates)
    elif kind == "parallel":
        step |= {"parallel": draw(st.lists(names, max_size=3)), "on_success": target}
    else:
        step |= {"body": draw(st.lists(names, max_size=2)), "on_complete": target}
        if kind == "while":
            step["while"] = draw(conditions)
        else:
            step["items"] = draw(st.sampled_from(["a,b", "{{.inputs.path}}", ["x", 1]]))
    if draw(st.booleans()):
        step["timeout"] = draw(st.sampled_from([30, "1m30s", "soon"]))
    return step


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    step_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    wf: dict[str, Any] = {"name": draw(st.sampled_from(["demo", "review"]))}
    if draw(st.booleans()):
        wf["description"] = draw(texts)
    inputs = draw(st.lists(st.sampled_from(INPUT_NAMES), max_size=3, unique=True))
    if inputs:
        wf["inputs"] = [{"name": n, "default": draw(scalars)} for n in inputs]
    states: dict[str, Any] = {"initial": step_names[0]}
    for name in step_names:
        states[name] = draw(steps(name, [*step_names, "done"]))
    states.setdefault("done", {"type": "terminal"})
    wf["states"] = states
    if draw(st.booleans()):
        wf["hooks"] = {"workflow_error": [{"log": draw(templates)}]}
    return wf


# --- damage ------------------------------------------------------------------------------------


def _containers(value: Any) -> list[Any]:
    found = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


@st.composite
def damaged_data(draw: st.DrawFn) -> Any:
    data = copy.deepcopy(draw(workflows()))
    for _ in range(draw(st.integers(0, 3))):
        containers = [c for c in _containers(data) if c]
        if not containers:
            break
        target = draw(st.sampled_from(containers))
        key = draw(
            st.sampled_from(list(target) if isinstance(target, dict) else range(len(target)))
        )
        action = draw(st.sampled_from(["delete", "rename", "retype"]))
        if action == "delete":
            del target[key]
        elif action == "rename" and isinstance(target, dict):
            target[str(key) + draw(st.sampled_from(["s", "_", "X", ""]))] = target.pop(key)
        else:
            target[key] = draw(st.one_of(scalars, st.lists(scalars, max_size=2), st.just({})))
    return data


@st.composite
def damaged_text(draw: st.DrawFn) -> str:
    text = yaml.safe_dump(draw(damaged_data()), sort_keys=False, allow_unicode=True)
    for _ in range(draw(st.integers(0, 2))):
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["indent", "dedent", "cut", "splice", "duplicate", "tab"]))
        if action == "indent":
            lines[i] = " " * draw(st.integers(1, 3)) + lines[i]
        elif action == "dedent":
            lines[i] = lines[i].lstrip(" ")
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "tab":
            lines[i] = "\t" + lines[i]
        text = "".join(lines)
        if action == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        elif action == "splice":
            at = draw(st.integers(0, len(text)))
            junk = draw(st.one_of(st.text(max_size=4), st.binary(max_size=4).map(_latin1)))
            text = text[:at] + junk + text[at:]
    return text


def _latin1(data: bytes) -> str:
    return data.decode("latin-1")


# --- the property ------------------------------------------------------------------------------


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(damaged_text())
def _load_or_reject(outcomes: dict[str, int], text: str) -> None:
    try:
        load_text(text, file="fuzz.yaml")
    except DefinitionError as err:
        assert any(p.severity == "error" for p in err.problems), err.problems
        for problem in err.problems:
            assert problem.line > 0 and problem.column > 0, problem
            assert problem.file == "fuzz.yaml", problem
        outcomes["rejected"] += 1
    else:
        outcomes["loaded"] += 1


def test_any_text_loads_or_is_rejected_with_a_position() -> None:
    outcomes = {"loaded": 0, "rejected": 0}
    _load_or_reject(outcomes)
    total = outcomes["loaded"] + outcomes["rejected"]
    print(f"\nfed {total} YAML documents to load_text: {outcomes}")
    assert total >= 2000
    assert outcomes["loaded"] and outcomes["rejected"]  # both paths were exercised
