"""Workflow problems for loader and check tests: every problem of a text, and the one
problem with a given message."""

from __future__ import annotations

import textwrap

from awf_nb.errors import DefinitionError, Problem
from awf_nb.workflow.loader import load_text


def yml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def problems_of(text: str) -> list[Problem]:
    """Every problem of a workflow text, whether it loads (warnings) or not."""
    try:
        return load_text(yml(text), file="wf.yaml").warnings
    except DefinitionError as err:
        return err.problems


def only(problems: list[Problem], message: str) -> Problem:
    """The single problem whose message is `message` (fails when there are 0 or 2+)."""
    found = [p for p in problems if p.message == message]
    assert len(found) == 1, f"{message!r} not found once in:\n" + "\n".join(map(str, problems))
    return found[0]
