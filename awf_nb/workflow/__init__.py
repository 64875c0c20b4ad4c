"""The workflow language: what a workflow IS, loaded and checked, with no I/O beyond reading it.

    from awf_nb.workflow import load_workflow, load_text
    wf = load_workflow("code-review")          # a name on the search path, or a file path
    wf.warnings                                # non-fatal findings, with file:line:col

Modules: `model` (pydantic models), `loader` (YAML -> model, finding workflows by name),
`checks` (cross-step checks), `template` (Go text/template), `expr` (conditions). The names
below are imported on first use, so `from awf_nb.workflow import template` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "REMOVED_FIELDS",
    "Workflow",
    "WorkflowInfo",
    "check_workflow",
    "find_workflow",
    "json_schema",
    "list_workflows",
    "load_text",
    "load_workflow",
    "search_path",
]

if TYPE_CHECKING:
    from awf_nb.workflow.checks import check_workflow
    from awf_nb.workflow.loader import (
        REMOVED_FIELDS,
        WorkflowInfo,
        find_workflow,
        json_schema,
        list_workflows,
        load_text,
        load_workflow,
        search_path,
    )
    from awf_nb.workflow.model import Workflow

_HOMES = {"check_workflow": "checks", "Workflow": "model"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'awf_nb.workflow' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(f"awf_nb.workflow.{_HOMES.get(name, 'loader')}")
    return getattr(module, name)
