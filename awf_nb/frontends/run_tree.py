"""`awf history --tree`: the runs listed, each fork under the run it was forked from.

A fork records `forked_from: {run, step, turn}` in its state (`awf fork`); the history's
rows do not, so the state of each run listed is read (as many as `-n` lists). A fork whose
original is not among the runs listed is shown at the top level, saying where it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TreeRow", "fork_tree"]


@dataclass(frozen=True)
class TreeRow:
    """One line of the tree: the run, how deep it is (0: not a fork of a listed run), the
    text drawn before its id (`└─ `), and where it was forked (`chat#3`, "" for none)."""

    entry: Any
    depth: int
    prefix: str
    forked_at: str
    forked_from: str


def forked_from(state: Any) -> tuple[str, str]:
    """(the original run, `STEP[#TURN]`) of a fork's state, ("", "") for another run."""
    record = getattr(state, "forked_from", None) or {}
    run = str(record.get("run") or "")
    if not run:
        return "", ""
    at = str(record.get("step") or "")
    if record.get("turn"):
        at += f"#{record['turn']}"
    return run, at


def fork_tree(entries: Sequence[Any], origins: dict[str, tuple[str, str]]) -> list[TreeRow]:
    """`entries` (newest first, as the history lists them) as a tree: each run followed by
    its forks (oldest first), drawn with `├─ ` / `└─ `. `origins`: run id -> (original run,
    where) for the forks among them."""
    listed = {e.run_id for e in entries}
    children: dict[str, list[Any]] = {}
    roots = []
    for entry in entries:
        parent, _ = origins.get(entry.run_id, ("", ""))
        if parent and parent in listed and parent != entry.run_id:
            children.setdefault(parent, []).append(entry)
        else:
            roots.append(entry)
    rows: list[TreeRow] = []
    seen: set[str] = set()

    def add(entry: Any, depth: int, lead: str, last: bool) -> None:
        if entry.run_id in seen:  # a cycle of forks cannot happen, but never loop on one
            return
        seen.add(entry.run_id)
        parent, at = origins.get(entry.run_id, ("", ""))
        prefix = "" if depth == 0 else lead + ("└─ " if last else "├─ ")
        rows.append(TreeRow(entry, depth, prefix, at, parent))
        kids = sorted(children.get(entry.run_id, []), key=lambda e: e.started_at)
        below = "" if depth == 0 else lead + ("   " if last else "│  ")
        for index, kid in enumerate(kids):
            add(kid, depth + 1, below, index == len(kids) - 1)

    for root in roots:
        add(root, 0, "", True)
    return rows
