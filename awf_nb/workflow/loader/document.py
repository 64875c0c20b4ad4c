"""How the loader words values and positions in its problems (the document itself, positions
and problems of one YAML text, is `awf_nb.workflow.yaml_locations.YamlDocument`)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from awf_nb.errors import Problem
from awf_nb.workflow.kinds import type_word
from awf_nb.workflow.yaml_locations import YamlDocument


def _located(problem: Problem, doc: YamlDocument) -> Problem:
    """Fill in the file and position of a problem reported by `checks` without them."""
    if problem.file and problem.line:
        return problem
    line, column = (problem.line, problem.column) if problem.line else doc.where(problem.path)
    return replace(problem, file=problem.file or doc.file, line=line, column=column)


def go_type(value: Any) -> str:
    """The type word a Go programmer (and AWF's messages) would use for a YAML value."""
    return type_word(value, none="null")


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)
