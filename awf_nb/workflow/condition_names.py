"""The names a condition can read, by where it is written, and the check that it reads no
other.

A condition's unknown name is nil when it runs, never an error (spec §7): so a misspelt
name (`responze contains "x"`) or one from another tool's documentation (`turn_count >= 2`)
makes a condition that can never hold, and an exchange silently runs to `max_turns`. The
validator reports each such name with the names the condition can read and a did-you-mean.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from awf_nb.workflow import expr
from awf_nb.workflow.suggest import did_you_mean

# Every condition of a workflow (`when`, `while`, `break_when`, `until`) reads these.
WORKFLOW_NAMES = ("inputs", "states", "env", "context", "workflow")
# Inside a loop (its `while` and `break_when`, the transitions of its body's steps).
LOOP_NAMES = ("loop",)
# What a conversation partner's `prompt` and an exchange's `until` read besides the run's data.
EXCHANGE_NAMES = ("reply", "message", "turn", "tokens")
# Names other documentation gives the exchange's values, and ours.
FOREIGN_NAMES = {"response": "reply", "turn_count": "turn", "tokens_used": "tokens"}


@dataclass(frozen=True)
class UnknownName:
    """A name a condition reads that its scope does not hold."""

    message: str
    hint: str


def unknown_names(source: str, allowed: Sequence[str]) -> list[UnknownName]:
    """One problem per distinct name of `source` that `allowed` does not hold (none for a
    condition that does not parse: its syntax error is reported on its own)."""
    try:
        names = expr.parse(source).names()
    except expr.ExprError:
        return []
    problems: list[UnknownName] = []
    seen: set[str] = set()
    for name, column in names:
        if name in allowed or name in seen:
            continue
        seen.add(name)
        hint = _suggestion(name, allowed)
        problems.append(
            UnknownName(
                f'condition {source!r}: unknown name "{name}" at column {column}; '
                f"here a condition can read {', '.join(allowed)}",
                hint or "a name the condition cannot read is nil: the condition would never hold",
            )
        )
    return problems


def _suggestion(name: str, allowed: Sequence[str]) -> str | None:
    """Another tool's name (`turn_count`), or a close one of ours, or a close misspelling of
    another tool's name (`responze`)."""
    foreign = [key for key, ours in FOREIGN_NAMES.items() if ours in allowed]
    if name not in foreign:
        close = did_you_mean(name, allowed)
        if close is not None:
            return close
        near = difflib.get_close_matches(name, foreign, n=1, cutoff=0.6)
        if not near:
            return None
        name = near[0]
    return f'did you mean "{FOREIGN_NAMES[name]}"? ("{name}" is another tool\'s name for it)'
