"""The `tools:` scorer: checks over the tool calls a run's agents asked for.

`tool_calls(state)` lists them (what conditions see as `tool_calls`, in order: `name`,
`arguments`, `step`, `result`); `check_tools` checks a `ToolsSpec` against them: `used`,
`not_used`, `sequence` with a `match` mode (`sequence_matches`), `args`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from awf_nb.evals.scorers import EXCERPT_CHARS, ScoreValue

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.evals.model import ToolsSpec


def tool_calls(state: RunState) -> list[dict[str, Any]]:
    """Every tool call the run's agents asked for, in order: `name`, `arguments` (an
    object when they are JSON, else the text), `step`, and `result` (the first
    `EXCERPT_CHARS` of what the tool answered, "" when it never answered)."""
    calls: list[dict[str, Any]] = []
    for name in dict.fromkeys(state.executed):
        step = state.steps.get(name)
        if step is None or step.conversation is None:
            continue
        results = {
            turn.tool_call_id: turn.content
            for turn in step.conversation.turns
            if turn.role == "tool" and turn.tool_call_id
        }
        for turn in step.conversation.turns:
            for call in turn.tool_calls if turn.role == "assistant" else ():
                text = call.get("arguments", "")
                try:
                    arguments: Any = json.loads(text) if isinstance(text, str) else text
                except ValueError:
                    arguments = text
                result = results.get(call.get("id", ""), "")
                calls.append(
                    {
                        "step": name,
                        "name": call.get("name", ""),
                        "arguments": arguments,
                        "result": result[:EXCERPT_CHARS],
                    }
                )
    return calls


def sequence_matches(names: list[str], sequence: list[str], match: str) -> bool:
    """Whether the tool calls' `names` (in order) match `sequence` under `match`:

    - `strict`: the same tools in the same order, nothing else;
    - `in_order`: the sequence's tools in its order, other calls between them allowed;
    - `any_order`: the same tools as often as the sequence, in any order, nothing else;
    - `subset`: every call is of a tool the sequence names (not all of them needed);
    - `superset`: every tool the sequence names was called, in any order, others too.
    """
    from collections import Counter

    if match == "strict":
        return names == sequence
    if match == "in_order":
        rest = iter(names)
        return all(any(name == wanted for name in rest) for wanted in sequence)
    if match == "any_order":
        return Counter(names) == Counter(sequence)
    if match == "subset":
        return set(names) <= set(sequence)
    if match == "superset":
        return set(sequence) <= set(names)
    raise ValueError(f"unknown match mode {match!r}")


def check_tools(spec: ToolsSpec, calls: list[dict[str, Any]]) -> ScoreValue:
    """The `tools:` scorer over the run's tool calls: pass when every check holds; the
    detail says which did not."""
    names = [str(call["name"]) for call in calls]
    problems: list[str] = []
    missing = [tool for tool in spec.used if tool not in names]
    if missing:
        problems.append(f"not used: {', '.join(missing)}")
    forbidden = [tool for tool in spec.not_used if tool in names]
    if forbidden:
        problems.append(f"used, though it must not be: {', '.join(forbidden)}")
    if spec.sequence is not None and not sequence_matches(names, spec.sequence, spec.match):
        problems.append(
            f"the calls [{', '.join(names)}] do not match [{', '.join(spec.sequence)}] "
            f"({spec.match})"
        )
    for tool, wanted in spec.args.items():
        if not any(
            call["name"] == tool
            and isinstance(call["arguments"], dict)
            and all(call["arguments"].get(k) == v for k, v in wanted.items())
            for call in calls
        ):
            shown = json.dumps(wanted, ensure_ascii=False, sort_keys=True)
            problems.append(f"no call of {tool} with arguments {shown}")
    passed = not problems
    return ScoreValue(passed, 1.0 if passed else 0.0, detail="; ".join(problems))
