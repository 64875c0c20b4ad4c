"""Turn workflow YAML into a validated `Workflow`, with file:line:col on every problem.

The pipeline, one way:

1. YAML text -> node graph (`yaml.compose`, safe) so every node keeps its position;
2. nodes -> plain Python data plus a map YAML path -> (line, column), refusing what PyYAML
   would silently accept (duplicate keys) and what could hang or crash it (runaway nesting,
   alias bombs, recursive aliases);
3. plain data -> the pydantic models of `model.py`, one step at a time, so that every
   mistake in the file is reported (not just the first) at the YAML path where it is;
4. `checks.check_workflow` for what needs the whole workflow (references, reachability,
   templates, conditions).

Unknown keys are warnings with a did-you-mean suggestion (AWF ignores them); the conversation
fields removed in AWF v0.7 are errors that say how to migrate. Errors raise
`DefinitionError` with every problem found; a workflow with warnings only is returned with
its `warnings` filled. Finding workflows by name (the search path of spec §1) lives here too.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from awf_nb.errors import DefinitionError, Problem, UserError
from awf_nb.workflow import checks
from awf_nb.workflow.checks import did_you_mean, join_path, locate, parent_path
from awf_nb.workflow.model import (
    STEP_CLASSES,
    STEP_KINDS,
    Input,
    Workflow,
    WorkflowHooks,
    canonical_kind,
    parse_duration,
)

__all__ = [
    "REMOVED_FIELDS",
    "WorkflowInfo",
    "find_workflow",
    "json_schema",
    "list_workflows",
    "load_text",
    "load_workflow",
    "search_path",
]

# The C parser is ~10x faster; the pure-Python one is the fallback when libyaml is missing.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A real workflow nests a handful of levels; these limits only stop hostile or broken input
# before it can exhaust the stack (the C composer segfaults on very deep nesting) or memory.
MAX_DEPTH = 100
MAX_NODES = 200_000

WORKFLOW_SUFFIXES = (".yaml", ".yml")

# Removed in AWF v0.7 (F083): using one is an error that says what to do instead.
REMOVED_FIELDS: dict[str, str] = {
    "initial_prompt": "use `prompt`: it is the first user message",
    "conversation.max_turns": "the user drives the number of turns; `mode: single` is one turn",
    "conversation.max_context_tokens": (
        "context window management is done by the provider (`options`)"
    ),
    "conversation.strategy": "removed: no automatic truncation at step level",
    "conversation.stop_condition": "removed: the user types exit/quit or an empty line",
    "conversation.inject_context": "compose prompts with `{{.states.*}}` interpolation",
}

_TOP_LEVEL_KEYS = (
    "name",
    "version",
    "description",
    "author",
    "tags",
    "inputs",
    "env",
    "states",
    "hooks",
)


# --- public API ----------------------------------------------------------------------------


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
    doc = _Document(file=file)
    parsed, root = _parse_yaml(text, doc)
    workflow = _WorkflowBuilder(doc).build(root) if parsed else None
    if workflow is not None:
        workflow.source_text = text
        workflow.source_path = path
        workflow.source_dir = Path(base_dir) if base_dir is not None else None
        workflow.locations = doc.locations
        doc.problems.extend(_located(p, doc) for p in checks.check_workflow(workflow))
    problems = sorted(doc.problems, key=lambda p: (p.line, p.column))
    if workflow is None or any(p.severity == "error" for p in problems):
        raise DefinitionError(problems or [doc.problem("invalid workflow", "")])
    workflow.warnings = problems
    return workflow


def search_path(cwd: Path | None = None) -> list[Path]:
    """The folders searched for workflow names, in order (spec §1)."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    dirs = [base / entry for entry in os.environ.get("AWF_WORKFLOWS_PATH", "").split(":") if entry]
    dirs += [base / ".awf" / "workflows", base / "workflows"]
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    dirs.append(Path(config_home) / "awf" / "workflows")
    unique: dict[Path, None] = {}
    for directory in dirs:
        unique.setdefault(Path(os.path.normpath(directory)), None)
    return list(unique)


def find_workflow(
    name: str | os.PathLike[str], *, cwd: Path | None = None, relative_to: Path | None = None
) -> Path:
    """Resolve a workflow name to its file: `NAME.yaml`, then `NAME.yml`, in each folder.

    `relative_to` (the calling workflow's folder, for `call_workflow`) is searched first.
    Names that climb out of the search folders (`..`, absolute paths elsewhere) are refused.
    """
    text = os.fspath(name)
    dirs = ([Path(relative_to)] if relative_to is not None else []) + search_path(cwd)
    if not text.strip():
        raise UserError("workflow name is empty")
    if ".." in Path(text).parts:
        raise UserError(f'workflow "{text}": a workflow name must not contain ".."')
    if Path(text).is_absolute():
        return _absolute_in_search_dirs(Path(text), dirs)
    for directory in dirs:
        for candidate in _candidates(directory / text):
            if candidate.is_file():
                return candidate
    searched = ", ".join(_display(d, Path(cwd) if cwd else Path.cwd()) for d in dirs)
    raise UserError(f'workflow "{text}" not found (searched: {searched})')


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


# --- files and names -----------------------------------------------------------------------


def _candidates(base: Path) -> list[Path]:
    if base.suffix in WORKFLOW_SUFFIXES:
        return [base]
    return [base.with_name(base.name + suffix) for suffix in WORKFLOW_SUFFIXES]


def _absolute_in_search_dirs(path: Path, dirs: list[Path]) -> Path:
    resolved = path.resolve()
    for directory in dirs:
        if resolved.is_relative_to(directory.resolve()):
            for candidate in _candidates(path):
                if candidate.is_file():
                    return candidate
            raise UserError(f'workflow "{path}" not found')
    raise UserError(
        f'workflow "{path}": an absolute path must be inside a workflow folder '
        "(give the file path to `awf`, or put the file on AWF_WORKFLOWS_PATH)"
    )


def _display(path: Path, cwd: Path) -> str:
    try:
        return os.fspath(path.relative_to(cwd))
    except ValueError:
        return os.fspath(path)


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
    """Best-effort description of a file that does not load, for `awf list`."""
    try:
        _check_nesting(text := path.read_text(encoding="utf-8"))
        data = yaml.load(text, Loader=_Loader)
    except (OSError, UnicodeError, yaml.YAMLError, RecursionError, _NestingTooDeep):
        return ""
    description = data.get("description") if isinstance(data, dict) else None
    return description if isinstance(description, str) else ""


# --- problems and positions ----------------------------------------------------------------


@dataclass
class _Document:
    """What we learn about one YAML text: positions, original scalar texts, problems."""

    file: str
    locations: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Source text of scalars that YAML resolved to something other than a string (`1.10`,
    # `yes`): Go's YAML decoder gives a string field the text as written, so we do too.
    scalar_text: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def where(self, path: str) -> tuple[int, int]:
        """Position of `path`, or of its nearest ancestor that exists in the file."""
        return locate(self.locations, path)

    def problem(
        self, message: str, path: str, *, severity: str = "error", hint: str | None = None
    ) -> Problem:
        line, column = self.where(path)
        return Problem(
            message,
            path=path,
            file=self.file,
            line=line,
            column=column,
            severity="warning" if severity == "warning" else "error",
            hint=hint,
        )

    def error(self, message: str, path: str, hint: str | None = None) -> None:
        self.problems.append(self.problem(message, path, hint=hint))

    def warn(self, message: str, path: str, hint: str | None = None) -> None:
        self.problems.append(self.problem(message, path, severity="warning", hint=hint))

    def has_errors(self) -> bool:
        return any(p.severity == "error" for p in self.problems)


def _located(problem: Problem, doc: _Document) -> Problem:
    """Fill in the file and position of a problem reported by `checks` without them."""
    if problem.file and problem.line:
        return problem
    line, column = (problem.line, problem.column) if problem.line else doc.where(problem.path)
    return replace(problem, file=problem.file or doc.file, line=line, column=column)


def go_type(value: Any) -> str:
    """The type word a Go programmer (and AWF's messages) would use for a YAML value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


# --- YAML text -> plain data ---------------------------------------------------------------


class _Abort(Exception):
    """Stop reading the YAML: the problem is already recorded."""


def _parse_yaml(text: str, doc: _Document) -> tuple[bool, Any]:
    """YAML text -> (whether there is data, the data); problems go to `doc`.

    Problems that still leave data (a duplicate key) do not stop the loading, so the rest
    of the file is checked too.
    """
    try:
        _check_nesting(text)
        node = yaml.compose(text, Loader=_Loader)
    except _NestingTooDeep as exc:
        doc.problems.append(_at_mark(doc, exc.mark, f"nesting deeper than {MAX_DEPTH} levels"))
        return False, None
    except yaml.MarkedYAMLError as exc:
        doc.problems.append(_yaml_error_problem(exc, doc))
        return False, None
    except yaml.YAMLError as exc:  # ReaderError: a character YAML does not allow
        doc.problems.append(_reader_error_problem(exc, text, doc))
        return False, None
    except UnicodeEncodeError as exc:  # a lone surrogate: the C parser reads UTF-8
        doc.problems.append(
            _position_problem(
                doc, text, exc.start, f"character #x{ord(text[exc.start]):04x}: {exc.reason}"
            )
        )
        return False, None
    except RecursionError:
        doc.error(f"nesting deeper than {MAX_DEPTH} levels", "")
        return False, None
    if node is None:
        doc.problems.append(_at_mark(doc, None, "the workflow file is empty"))
        return False, None
    try:
        return True, _DataBuilder(doc).build(node, "", 0)
    except _Abort:
        return False, None


class _NestingTooDeep(Exception):
    def __init__(self, mark: Any) -> None:
        self.mark = mark


def _check_nesting(text: str) -> None:
    """Refuse runaway nesting before the (recursive) composer sees it.

    Each level of nesting needs one indicator character, so counting them bounds the depth
    cheaply; only texts that could be too deep pay for a scan of the (iterative) event stream.
    """
    bound = sum(text.count(c) for c in "[{-:?")
    if bound <= MAX_DEPTH:
        return
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _NestingTooDeep(event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _at_mark(doc: _Document, mark: Any, message: str, hint: str | None = None) -> Problem:
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Problem(message, file=doc.file, line=line, column=column, hint=hint)


def _yaml_error_problem(exc: yaml.MarkedYAMLError, doc: _Document) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    message = exc.problem or exc.context or "invalid YAML"
    hint = None
    if exc.context and exc.problem:
        hint = exc.context
        if exc.context_mark is not None and exc.context_mark is not exc.problem_mark:
            hint += f" at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
    return _at_mark(doc, mark, f"invalid YAML: {message}", hint)


def _reader_error_problem(exc: yaml.YAMLError, text: str, doc: _Document) -> Problem:
    reason = getattr(exc, "reason", None) or str(exc)
    character = getattr(exc, "character", None)  # the C reader gives a code point
    if isinstance(character, str) and len(character) == 1:
        character = ord(character)
    if isinstance(character, int):
        reason = f"character #x{character:04x}: {reason}"
    position = getattr(exc, "position", 0) or 0
    if _Loader is not yaml.SafeLoader:  # libyaml counts bytes of the UTF-8 text
        position = len(text.encode("utf-8", "surrogatepass")[:position].decode("utf-8", "ignore"))
    return _position_problem(doc, text, position, reason)


def _position_problem(doc: _Document, text: str, position: int, reason: str) -> Problem:
    """A problem at a character offset of the text (errors raised before there are marks)."""
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return Problem(f"invalid YAML: {reason}", file=doc.file, line=line, column=column)


_TAG = "tag:yaml.org,2002:"
_SAFE = yaml.constructor.SafeConstructor()
_SCALARS: dict[str, Callable[[yaml.ScalarNode], Any]] = {
    _TAG + "null": lambda node: None,
    _TAG + "bool": _SAFE.construct_yaml_bool,
    _TAG + "int": _SAFE.construct_yaml_int,
    _TAG + "float": _SAFE.construct_yaml_float,
}


class _DataBuilder:
    """Node graph -> plain dicts/lists/scalars, recording the position of every path."""

    def __init__(self, doc: _Document) -> None:
        self.doc = doc
        self.nodes = 0
        self.open: set[int] = set()  # collections being built: a repeat is a recursive alias

    def build(self, node: yaml.Node, path: str, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.doc.problems.append(
                _at_mark(self.doc, node.start_mark, f"more than {MAX_NODES} YAML values")
            )
            raise _Abort
        if depth > MAX_DEPTH:
            self.doc.problems.append(
                _at_mark(self.doc, node.start_mark, f"nesting deeper than {MAX_DEPTH} levels")
            )
            raise _Abort
        self.doc.locations.setdefault(path, _position(node))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if id(node) in self.open:
            self.doc.problems.append(
                _at_mark(self.doc, node.start_mark, "a YAML alias must not refer to itself")
            )
            raise _Abort
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [
                    self.build(item, join_path(path, i), depth + 1)
                    for i, item in enumerate(node.value)
                ]
            return self._mapping(node, path, depth)
        finally:
            self.open.discard(id(node))

    def _scalar(self, node: yaml.ScalarNode, path: str) -> Any:
        construct = _SCALARS.get(node.tag)
        if construct is None:
            return node.value  # strings, timestamps and custom tags: the text as written
        try:
            value = construct(node)
        except (ValueError, TypeError):
            return node.value
        if value is not None:
            self.doc.scalar_text[path] = node.value
        return value

    def _mapping(self, node: yaml.MappingNode, path: str, depth: int) -> dict[str, Any]:
        merges = [value for key, value in node.value if key.tag == _TAG + "merge"]
        # Merged keys first, so the map's own keys (and their positions) override them.
        result = self._merge(merges, path, depth) if merges else {}
        first_seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _TAG + "merge":
                continue
            key = self._key(key_node)
            if key is None:
                continue
            if key in first_seen:
                line = first_seen[key].start_mark.line + 1
                self.doc.problems.append(
                    _at_mark(
                        self.doc,
                        key_node.start_mark,
                        f'duplicate key "{key}" (first defined at line {line})',
                    )
                )
                continue
            first_seen[key] = key_node
            child = join_path(path, key)
            self.doc.locations[child] = _position(key_node)
            result[key] = self.build(value_node, child, depth + 1)
        return result

    def _merge(self, merges: list[yaml.Node], path: str, depth: int) -> dict[str, Any]:
        """`<<: *base` (or a list of them): the merged keys, the first map winning."""
        merged: dict[str, Any] = {}
        for value_node in merges:
            sources = (
                value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            )
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    self.doc.problems.append(
                        _at_mark(self.doc, source.start_mark, "a merge key (<<) needs a map")
                    )
                    continue
                for key, value in self.build(source, path, depth).items():
                    merged.setdefault(key, value)
        return merged

    def _key(self, node: yaml.Node) -> str | None:
        if isinstance(node, yaml.ScalarNode):
            return node.value
        self.doc.problems.append(
            _at_mark(self.doc, node.start_mark, "a key must be a plain value, not a list or map")
        )
        return None


def _position(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


# --- plain data -> models ------------------------------------------------------------------


class _WorkflowBuilder:
    """Validates the plain data piece by piece so every mistake is reported where it is."""

    def __init__(self, doc: _Document) -> None:
        self.doc = doc
        # False once a part had to be left out (a step that is not a map, inputs that are
        # not a list): the cross-step checks would then only report echoes of that problem.
        self.complete = True

    def build(self, root: Any) -> Workflow | None:
        doc = self.doc
        if root is None:  # `---` alone, or only `~`
            doc.problems.append(_at_mark(doc, None, "the workflow file is empty"))
            return None
        if not isinstance(root, dict):
            doc.error(f"a workflow must be a map, got {go_type(root)}", "")
            return None
        data = {k: v for k, v in root.items() if k != "states"}
        if data.get("name") is None or data.get("name") == "":
            doc.error("name: required field missing", "name")
            data.pop("name", None)
        if "inputs" in data and data["inputs"] is not None and not isinstance(data["inputs"], list):
            doc.error("inputs must be a list", "inputs")
            del data["inputs"]
            self.complete = False
        _UnknownKeys(doc).check_top_level(data)
        if "version" in doc.scalar_text:  # `version: 1.10` is "1.10", not the float 1.1
            data["version"] = doc.scalar_text["version"]
        states = self._states(root.get("states"))
        data["initial"] = self._initial(states)
        data["steps"] = self._steps(states)
        workflow = _validate(Workflow, data, "", doc, renames={"initial": "states.initial"})
        return workflow if self.complete else None

    def _states(self, states: Any) -> dict[str, Any]:
        if states is None:
            return {}
        if not isinstance(states, dict):
            self.doc.error(f"states: expected map, got {go_type(states)}", "states")
            self.complete = False
            return {}
        return dict(states)

    def _initial(self, states: dict[str, Any]) -> str | None:
        initial = states.pop("initial", None)
        if initial is None or initial == "":
            self.doc.error("states.initial: required field missing", "states.initial")
            self.complete = False
            return None
        if isinstance(initial, str):
            return initial
        text = self.doc.scalar_text.get("states.initial")
        if text is None:
            self.doc.error(f"expected string, got {go_type(initial)}", "states.initial")
            self.complete = False
        return text

    def _steps(self, states: dict[str, Any]) -> dict[str, Any]:
        steps: dict[str, Any] = {}
        for name, raw in states.items():
            step = self._step(name, raw, join_path("states", name))
            if step is None:
                self.complete = False
            else:
                steps[name] = step
        return steps

    def _step(self, name: str, raw: Any, path: str) -> BaseModel | None:
        doc = self.doc
        if not isinstance(raw, dict):
            doc.error(f'state "{name}": expected map, got {go_type(raw)}', path)
            return None
        type_path = join_path(path, "type")
        type_name = raw.get("type")
        if type_name is None or type_name == "":
            doc.error(f"{type_path}: required field missing", type_path)
            return None
        kind = canonical_kind(doc.scalar_text.get(type_path, type_name))
        if kind is None:
            shown = doc.scalar_text.get(type_path, type_name)
            doc.error(f"{type_path}: unknown step type: {_plain(shown)}", type_path)
            return None
        data = dict(raw)
        if kind == "agent":
            _removed_fields(data, path, doc)
        step_class = STEP_CLASSES[kind]
        _UnknownKeys(doc).check(data, step_class, path, ignore=("name",))
        data["name"] = name
        return _validate(step_class, data, path, doc)


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _removed_fields(step: dict[str, Any], path: str, doc: _Document) -> None:
    """Report (and drop) the conversation fields AWF v0.7 removed, anywhere in an agent step."""
    for key_path, container, key in _walk_keys(step, path):
        if key == "initial_prompt":
            doc.error(_removed_message("initial_prompt"), key_path)
            del container[key]
    conversation = step.get("conversation")
    if isinstance(conversation, dict):
        for key in list(conversation):
            removed = f"conversation.{key}"
            if removed in REMOVED_FIELDS:
                doc.error(
                    _removed_message(removed), join_path(join_path(path, "conversation"), key)
                )
                del conversation[key]


def _removed_message(removed: str) -> str:
    return f"{removed} was removed in AWF v0.7: {REMOVED_FIELDS[removed]}"


def _walk_keys(data: Any, path: str) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every (path, map, key) under `data`, collected first so callers may delete keys."""
    found: list[tuple[str, dict[str, Any], str]] = []
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                found.append((join_path(where, key), value, key))
                stack.append((child, join_path(where, key)))
        elif isinstance(value, list):
            stack.extend((child, join_path(where, i)) for i, child in enumerate(value))
    return iter(found)


# --- unknown keys --------------------------------------------------------------------------


class _UnknownKeys:
    """Warn about (and drop) keys the models do not know, with a did-you-mean suggestion."""

    def __init__(self, doc: _Document) -> None:
        self.doc = doc

    def check_top_level(self, data: dict[str, Any]) -> None:
        for key in [k for k in data if k not in _TOP_LEVEL_KEYS]:
            self._unknown(key, key, _TOP_LEVEL_KEYS)
            del data[key]
        if isinstance(data.get("inputs"), list):
            for i, item in enumerate(data["inputs"]):
                if isinstance(item, dict):
                    self.check(item, Input, join_path("inputs", i))
        if isinstance(data.get("hooks"), dict):
            self.check(data["hooks"], WorkflowHooks, "hooks")

    def check(
        self, data: dict[str, Any], model: type[BaseModel], path: str, ignore: tuple[str, ...] = ()
    ) -> None:
        fields = _yaml_fields(model)
        known = [k for k in fields if k not in ignore]
        for key in list(data):
            if key not in known:
                self._unknown(key, join_path(path, key), known)
                del data[key]
                continue
            nested, many = fields[key]
            value = data[key]
            if nested is None:
                continue
            if many and isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, dict):
                        self.check(item, nested, join_path(join_path(path, key), i))
            elif not many and isinstance(value, dict):
                self.check(value, nested, join_path(path, key))

    def _unknown(self, key: str, path: str, known: typing.Iterable[str]) -> None:
        hint = did_you_mean(key, known)
        if key == "initial" and "states" in known:
            hint = "did you mean states.initial?"
        self.doc.warn(f'unknown key "{key}"', path, hint=hint)


_FIELD_CACHE: dict[type[BaseModel], dict[str, tuple[type[BaseModel] | None, bool]]] = {}


def _yaml_fields(model: type[BaseModel]) -> dict[str, tuple[type[BaseModel] | None, bool]]:
    """YAML key -> (nested model or None, whether it is a list of them), per model class."""
    cached = _FIELD_CACHE.get(model)
    if cached is None:
        cached = {}
        for name, info in model.model_fields.items():
            cached[info.alias or name] = _nested_model(info.annotation)
        _FIELD_CACHE[model] = cached
    return cached


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    origin = typing.get_origin(annotation)
    if origin is list:
        inner, _ = _nested_model(typing.get_args(annotation)[0])
        return inner, inner is not None
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            inner, many = _nested_model(arg)
            if inner is not None:
                return inner, many
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


# --- pydantic errors -> problems -----------------------------------------------------------

_TYPE_WORDS = {
    "string_type": "string",
    "int_type": "int",
    "int_parsing": "int",
    "int_from_float": "int",
    "float_type": "float",
    "float_parsing": "float",
    "bool_type": "bool",
    "bool_parsing": "bool",
    "list_type": "list",
    "dict_type": "map",
    "model_type": "map",
    "model_attributes_type": "map",
}

_MAX_FIX_ROUNDS = 3

M = typing.TypeVar("M", bound=BaseModel)


def _validate(
    model: type[M],
    data: dict[str, Any],
    path: str,
    doc: _Document,
    renames: dict[str, str] | None = None,
) -> M | None:
    """Validate `data` as `model`; record each error at its YAML path.

    Before giving up, apply what Go's YAML decoder does (AWF compatibility): a scalar in a
    string field is its text as written (`version: 1.10` -> "1.10"), and a null value is the
    field's default (`description:` with nothing after it).
    """
    for attempt in range(_MAX_FIX_ROUNDS):
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            last = attempt == _MAX_FIX_ROUNDS - 1
            if last or not _apply_go_decoding(errors, data, path, doc, renames):
                _report(errors, data, path, doc, renames)
                _report_model_rules(model, errors, data, path, doc)
                return None
    return None


def _report_model_rules(
    model: type[BaseModel], errors: list[Any], data: dict[str, Any], path: str, doc: _Document
) -> None:
    """Also report the model's own rules (`command and script_file are mutually exclusive`).

    pydantic only checks them once every field is valid, so check again without the fields
    that failed: a file with five mistakes then shows five problems, not three.
    """
    failed = {err["loc"][0] for err in errors if err["loc"]}
    if not failed or any(not err["loc"] for err in errors):
        return
    rest = {key: value for key, value in data.items() if key not in failed}
    try:
        model.model_validate(rest)
    except ValidationError as exc:
        rules = [err for err in exc.errors(include_url=False) if not err["loc"]]
        _report(rules, rest, path, doc, None)


def _apply_go_decoding(
    errors: list[Any],
    data: dict[str, Any],
    path: str,
    doc: _Document,
    renames: dict[str, str] | None,
) -> bool:
    fixed = False
    for err in errors:
        if err["type"] not in _TYPE_WORDS and err["type"] != "literal_error":
            continue
        yaml_path, parent, key = _resolve_loc(err["loc"], data, path, renames, missing=False)
        if parent is None:
            continue
        if err["input"] is None and isinstance(parent, dict) and key in parent:
            del parent[key]
            fixed = True
        elif err["type"] == "string_type" and yaml_path in doc.scalar_text:
            parent[key] = doc.scalar_text.pop(yaml_path)
            fixed = True
    return fixed


def _resolve_loc(
    loc: tuple[Any, ...], data: Any, base: str, renames: dict[str, str] | None, *, missing: bool
) -> tuple[str, Any, Any]:
    """Map pydantic's `loc` to (YAML path, container, key) by walking the data.

    Elements that are not keys of the data (union tags like 'str' or 'InlineFailure') are
    skipped; for a missing field the last element names the key that is not there.
    """
    cursor, path, parent, key = data, base, None, None
    for i, part in enumerate(loc):
        if isinstance(cursor, dict) and part in cursor:
            shown = (renames or {}).get(part) if cursor is data else None
            path = shown if shown else join_path(path, part)
            parent, key, cursor = cursor, part, cursor[part]
        elif isinstance(cursor, list) and isinstance(part, int) and 0 <= part < len(cursor):
            path = join_path(path, part)
            parent, key, cursor = cursor, part, cursor[part]
        elif missing and i == len(loc) - 1 and isinstance(cursor, dict):
            shown = (renames or {}).get(part) if cursor is data else None
            path = shown if shown else join_path(path, str(part))
            parent, key = None, None
    return path, parent, key


def _report(
    errors: list[Any],
    data: dict[str, Any],
    path: str,
    doc: _Document,
    renames: dict[str, str] | None,
) -> None:
    already = {p.path for p in doc.problems if p.severity == "error"}
    expected: dict[str, list[str]] = {}
    got: dict[str, str] = {}
    messages: dict[str, list[str]] = {}
    for err in errors:
        missing = err["type"] == "missing"
        yaml_path, _, _ = _resolve_loc(err["loc"], data, path, renames, missing=missing)
        if yaml_path in already or (missing and parent_path(yaml_path) in already):
            continue  # the loader already said something more precise there
        word = _TYPE_WORDS.get(err["type"])
        if word is not None:
            expected.setdefault(yaml_path, []).append(word)
            got[yaml_path] = go_type(err["input"])
        else:
            text = _message(err, yaml_path)
            if text not in messages.setdefault(yaml_path, []):
                messages[yaml_path].append(text)
    reported = set(messages)
    for yaml_path, words in expected.items():
        # In a union (`on_failure: name | {message, status}`) the branch that matched the
        # value's shape reports deeper down or a precise message; the others are noise.
        if yaml_path in reported or any(_is_below(p, yaml_path) for p in [*expected, *reported]):
            continue
        options = " or ".join(dict.fromkeys(words))
        doc.error(f"expected {options}, got {got[yaml_path]}", yaml_path)
    for yaml_path, texts in messages.items():
        for text in texts:
            doc.error(text, yaml_path)


def _is_below(path: str, ancestor: str) -> bool:
    return path.startswith(ancestor + ".") or path.startswith(ancestor + "[")


def _message(err: Any, yaml_path: str) -> str:
    kind = err["type"]
    if kind == "missing":
        return f"{yaml_path}: required field missing"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"invalid value {_shown(err['input'])}: expected {err['ctx']['expected']}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return f"{err['msg'].removeprefix('Input should be ')}, got {_shown(err['input'])}"
    return str(err["msg"])


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else _plain(value)


# --- JSON Schema of the YAML as written ------------------------------------------------------

_DURATION_PATTERN = r"^\s*(\d+(\.\d+)?|((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+)\s*$"


def json_schema() -> dict[str, Any]:
    """A JSON Schema (2020-12) of workflow files as written, for editors (`awf schema`).

    Generated from the models, then reshaped to the YAML: `states` holds `initial` and the
    steps (a step's schema is chosen by its `type`), durations accept `"1m30s"`, and the
    loader's bookkeeping fields are left out. Unknown keys are refused here (the loader
    only warns) so an editor underlines typos.
    """
    ref = "#/$defs/{model}"
    top = Workflow.model_json_schema(ref_template=ref)
    defs: dict[str, Any] = top.pop("$defs", {})
    spellings: dict[str, list[str]] = {}
    for spelling, kind in STEP_KINDS.items():
        spellings.setdefault(kind, []).append(spelling)
    branches = []
    for kind, step_class in STEP_CLASSES.items():
        schema = step_class.model_json_schema(ref_template=ref)
        defs.update(schema.pop("$defs", {}))
        schema["properties"].pop("name", None)
        schema["properties"]["type"] = {"type": "string", "enum": spellings[kind]}
        schema["required"] = sorted({*schema.get("required", ()), "type"} - {"name"})
        defs[step_class.__name__] = schema
        condition = {"properties": {"type": {"enum": spellings[kind]}}, "required": ["type"]}
        branches.append({"if": condition, "then": {"$ref": ref.format(model=step_class.__name__)}})
    defs["Step"] = {
        "type": "object",
        "description": "A step; its `type` decides which fields apply.",
        "properties": {"type": {"type": "string", "enum": list(STEP_KINDS)}},
        "required": ["type"],
        "allOf": branches,
    }
    for model in _models():
        _reshape_model_schema(defs[model.__name__], model)
    properties = top["properties"]
    internal_fields = ("source_path", "source_dir", "source_text", "warnings", "locations")
    for internal in ("initial", "steps", *internal_fields):
        properties.pop(internal, None)
    properties["version"] = {"type": ["string", "number"]}
    properties["states"] = {
        "type": "object",
        "description": "`initial` names the first step; every other key is a step.",
        "properties": {"initial": {"type": "string"}},
        "required": ["initial"],
        "additionalProperties": {"$ref": ref.format(model="Step")},
    }
    top["required"] = ["name", "states"]
    top["additionalProperties"] = False
    top.update(
        title="AWF workflow",
        description="A workflow file for awf-nb and AWF: a state machine of shell and LLM steps.",
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **top,
        "$defs": dict(sorted(defs.items())),
    }


def _models() -> list[type[BaseModel]]:
    """Every model class reachable from `Workflow` and the step classes."""
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [*STEP_CLASSES.values(), Input, WorkflowHooks]
    while pending:
        model = pending.pop()
        if model in found:
            continue
        found.append(model)
        for nested, _ in _yaml_fields(model).values():
            if nested is not None:
                pending.append(nested)
    return found


def _reshape_model_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    schema["additionalProperties"] = False
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in schema.get("properties", {}):
            continue
        if any(getattr(m, "func", None) is parse_duration for m in info.metadata):
            schema["properties"][key] = {
                "anyOf": [
                    {"type": "number", "minimum": 0},
                    {"type": "string", "pattern": _DURATION_PATTERN},
                    {"type": "null"},
                ],
                "description": "seconds, or a Go duration such as '30s' or '1m30s'",
            }
