"""The public entry points: load a workflow from YAML text, a file or a name, and list the
workflows on the search path (`awf list`)."""

from __future__ import annotations

import os
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from awf_nb.errors import AwfError, DefinitionError, Problem, UserError
from awf_nb.safe_text import terminal_safe
from awf_nb.workflow import checks
from awf_nb.workflow.loader.convert import _WorkflowBuilder
from awf_nb.workflow.loader.document import _located
from awf_nb.workflow.loader.search import WORKFLOW_SUFFIXES, _display, find_workflow, search_path
from awf_nb.workflow.model import AgentStep, CallWorkflowStep, Workflow
from awf_nb.workflow.yaml_locations import YamlDocument, parse_yaml


def load_workflow(source: str | os.PathLike[str], *, cwd: Path | None = None) -> Workflow:
    """Load and validate a workflow from a file path or a workflow name (spec §1).

    An existing file is loaded directly; anything else is a name looked up on the search
    path (`find_workflow`). Raises `UserError` when nothing is found or the file cannot be
    read, `DefinitionError` (with every problem) when the workflow is invalid.
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    given = Path(os.fspath(source))
    direct = given if given.is_absolute() else base / given
    path = direct if direct.is_file() else find_workflow(os.fspath(source), cwd=base)
    label = os.fspath(given) if path is direct else _display(path, base)
    return load_text(_read_text(path, label), file=label, base_dir=path.parent, path=path)


def load_text(
    text: str,
    *,
    file: str = "<inline>",
    base_dir: Path | None = None,
    path: Path | None = None,
) -> Workflow:
    """Load and validate a workflow given as YAML text (a notebook cell, a test).

    `file` names the text in messages; `base_dir` is where relative paths (`script_file`,
    `prompt_file`, `call_workflow`) resolve; `path` is the file it was read from, if any.
    """
    doc = YamlDocument(file=file)
    parsed, root = parse_yaml(text, doc)
    builder = _WorkflowBuilder(doc)
    workflow = builder.build(root) if parsed else None
    for built in (workflow, builder.partial):
        if built is not None:
            built.source_text = text
            built.source_path = path
            built.source_dir = Path(base_dir) if base_dir is not None else None
            built.locations = doc.locations
    if workflow is not None:
        doc.problems.extend(
            _located(p, doc) for p in checks.check_workflow(workflow, calls_agents=_calls_agents)
        )
    # A message may quote what the file holds (a name, a value): never a character that
    # would act on the terminal showing it.
    problems = sorted((_shown(p) for p in doc.problems), key=lambda p: (p.line, p.column))
    if workflow is None or any(p.severity == "error" for p in problems):
        error = DefinitionError(problems or [doc.problem("invalid workflow", "")])
        # built, but its checks failed; or what could be read of it (None: nothing)
        error.partial = workflow if workflow is not None else builder.partial
        raise error
    workflow.warnings = problems
    return workflow


# Set while a called workflow is loaded to see whether it has agent steps: its own
# call_workflow steps are then not followed (a workflow may call itself back).
_looking_into_a_called_workflow: ContextVar[bool] = ContextVar("looking_into", default=False)


def _calls_agents(step: CallWorkflowStep, base_dir: Path) -> bool:
    """Whether the workflow `step` calls has agent steps (or calls workflows in turn, which
    may). False when that cannot be told before the run: a name made by a template, a
    workflow that cannot be found or loaded (the run reports those)."""
    if "{{" in step.workflow or _looking_into_a_called_workflow.get():
        return False
    token = _looking_into_a_called_workflow.set(True)
    try:
        called = load_workflow(find_workflow(step.workflow, relative_to=base_dir))
    except AwfError:
        return False
    finally:
        _looking_into_a_called_workflow.reset(token)
    return any(isinstance(s, AgentStep | CallWorkflowStep) for s in called.steps.values())


def _shown(problem: Problem) -> Problem:
    hint = None if problem.hint is None else terminal_safe(problem.hint)
    return replace(
        problem,
        message=terminal_safe(problem.message),
        path=terminal_safe(problem.path),
        file=terminal_safe(problem.file),
        hint=hint,
    )


@dataclass(frozen=True)
class WorkflowInfo:
    """One workflow found on the search path, as `awf list` shows it."""

    name: str
    path: Path
    description: str = ""
    version: str | None = None
    error: str | None = None  # why it does not load; None when it is valid

    @property
    def valid(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "description": self.description,
            "version": self.version,
            "valid": self.valid,
            "error": self.error,
        }


def list_workflows(cwd: Path | None = None) -> list[WorkflowInfo]:
    """Every workflow on the search path, the first of each name (as name lookup finds it).

    Files that fail to load are listed with their error rather than skipped silently.
    """
    found: dict[str, WorkflowInfo] = {}
    for directory in search_path(cwd):
        try:
            files = sorted(p for p in directory.iterdir() if p.suffix in WORKFLOW_SUFFIXES)
        except OSError:  # missing or unreadable folders are simply not there
            continue
        for path in files:
            if path.stem not in found and path.is_file():
                found[path.stem] = _describe(path, cwd)
    return sorted(found.values(), key=lambda info: info.name)


def _read_text(path: Path, label: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read workflow {label}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        problem = Problem(
            f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
            file=label,
            line=line,
            column=column,
        )
        raise DefinitionError([problem]) from None


def _describe(path: Path, cwd: Path | None) -> WorkflowInfo:
    label = _display(path, Path(cwd) if cwd else Path.cwd())
    try:
        wf = load_text(_read_text(path, label), file=label, base_dir=path.parent, path=path)
    except DefinitionError as exc:
        errors = [p for p in exc.problems if p.severity == "error"] or exc.problems
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return WorkflowInfo(path.stem, path, _peek_description(path), error=str(errors[0]) + more)
    except UserError as exc:
        return WorkflowInfo(path.stem, path, error=str(exc))
    return WorkflowInfo(path.stem, path, wf.description, wf.version)


def _peek_description(path: Path) -> str:
    """Best-effort description of a file that does not load, for `awf list` (read with the
    same bounds as the file itself: a hostile file cannot hang the listing)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return ""
    parsed, data = parse_yaml(text, YamlDocument(file=str(path)))
    description = data.get("description") if parsed and isinstance(data, dict) else None
    return description if isinstance(description, str) else ""
