"""YAML with locations: YAML text -> plain Python data, with the line and column of every
YAML path, and problems located in the file.

This is how awf reads every YAML file a person writes (workflows, eval files, datasets,
scorer files), so their mistakes all read alike: `file:line:col: error: path: message`.

    doc = YamlDocument(file="review.yaml")
    parsed, data = parse_yaml(text, doc)   # data: dicts, lists, scalars
    doc.where("states.review.prompt")      # (line, column), or its nearest ancestor's
    doc.error("prompt is empty", "states.review.prompt")
    doc.problems                           # every problem found, located

The text is composed (`yaml.compose`, safe, on LibYAML when it is installed) into a node
graph so every node keeps its position, then turned into dicts, lists and scalars. What
PyYAML would silently accept (duplicate keys) is reported, and what could hang or crash it
(runaway nesting beyond `MAX_DEPTH`, more than `MAX_NODES` values, aliases expanding past
`MAX_TEXT_CHARS`, recursive aliases) is refused before it can. A scalar YAML resolves to
something other than a string (`1.10`, `yes`) keeps its text as written in
`YamlDocument.scalar_text`, for fields that want a string.

YAML paths are written `states.review.prompt` and `inputs[0]` (`join_path`, `parent_path`).
This module imports only PyYAML and awf's errors: reading a file does not build the
workflow models.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from awf_nb.errors import Problem

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_TEXT_CHARS",
    "YamlDocument",
    "join_path",
    "locate",
    "parent_path",
    "parse_yaml",
    "problem_at",
]

# The C parser is ~10x faster; the pure-Python one is the fallback when libyaml is missing.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# A real workflow nests a handful of levels; these limits only stop hostile or broken input
# before it can exhaust the stack (the C composer segfaults on very deep nesting) or memory.
MAX_DEPTH = 100
MAX_NODES = 200_000
# Text, counted as built: an alias repeating a long string counts each time it is used,
# so "aliases repeating a 1 MB string" cannot turn a small file into gigabytes of work.
MAX_TEXT_CHARS = 16 << 20


# --- YAML paths ------------------------------------------------------------------------------


def join_path(base: str, part: str | int) -> str:
    """`states` + `review` -> `states.review`; `inputs` + 0 -> `inputs[0]`."""
    if isinstance(part, int):
        return f"{base}[{part}]"
    return f"{base}.{part}" if base else part


_LAST_PART = re.compile(r"(\.[^.\[]*|\[\d+\])$")


def parent_path(path: str) -> str:
    """`states.review.prompt` -> `states.review`; `inputs[0]` -> `inputs`."""
    match = _LAST_PART.search(path)
    return path[: match.start()] if match else ""


def locate(locations: dict[str, tuple[int, int]], path: str) -> tuple[int, int]:
    """Line and column of `path`, or of its nearest ancestor present in the file."""
    while True:
        if path in locations:
            return locations[path]
        if not path:
            return (1, 1)
        path = parent_path(path)


# --- one YAML text ---------------------------------------------------------------------------


@dataclass
class YamlDocument:
    """What is learnt about one YAML text: positions, original scalar texts, problems."""

    file: str  # how messages name the text
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
        """A problem about the value at `path`, located where it is in the file."""
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
        """Record an error about the value at `path`."""
        self.problems.append(self.problem(message, path, hint=hint))

    def warn(self, message: str, path: str, hint: str | None = None) -> None:
        """Record a warning about the value at `path`."""
        self.problems.append(self.problem(message, path, severity="warning", hint=hint))


def problem_at(doc: YamlDocument, mark: Any, message: str, hint: str | None = None) -> Problem:
    """An error about the text itself (not a path) at a PyYAML mark; None: the file's start."""
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Problem(message, file=doc.file, line=line, column=column, hint=hint)


class _Abort(Exception):
    """Stop reading the YAML: the problem is already recorded."""


def parse_yaml(text: str, doc: YamlDocument) -> tuple[bool, Any]:
    """YAML text -> (whether there is data, the data); problems and positions go to `doc`.

    Problems that still leave data (a duplicate key) do not stop the loading, so the rest
    of the file is checked too.
    """
    try:
        _check_nesting(text)
        node = yaml.compose(text, Loader=_LOADER)
    except _NestingTooDeep as exc:
        doc.problems.append(problem_at(doc, exc.mark, f"nesting deeper than {MAX_DEPTH} levels"))
        return False, None
    except yaml.MarkedYAMLError as exc:
        if _is_parser_depth_limit(exc):
            doc.problems.append(
                problem_at(doc, exc.problem_mark, f"nesting deeper than {MAX_DEPTH} levels")
            )
        else:
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
        doc.problems.append(problem_at(doc, None, "the workflow file is empty"))
        return False, None
    try:
        return True, _DataBuilder(doc).build(node, "", 0)
    except _Abort:
        return False, None


class _NestingTooDeep(Exception):
    """Nesting deeper than `MAX_DEPTH`, at `mark` (a PyYAML mark)."""

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
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _NestingTooDeep(event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        if _is_parser_depth_limit(exc):
            raise _NestingTooDeep(exc.problem_mark) from None
        raise


# libyaml >= 0.2.6 (PyYAML >= 6.0.4) has a nesting limit of its own (1000 by default) that
# its scanner can reach before the parser hands us the event past our limit: its look-ahead
# runs far into a line of "[[[[...". Its message is translated so the person sees the same
# error whichever PyYAML they have.
_PARSER_DEPTH_LIMIT = "maximum nesting depth"


def _is_parser_depth_limit(exc: yaml.MarkedYAMLError) -> bool:
    return _PARSER_DEPTH_LIMIT in (exc.problem or "")


def _yaml_error_problem(exc: yaml.MarkedYAMLError, doc: YamlDocument) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    message = exc.problem or exc.context or "invalid YAML"
    hint = None
    if exc.context and exc.problem:
        hint = exc.context
        if exc.context_mark is not None and exc.context_mark is not exc.problem_mark:
            hint += f" at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
    return problem_at(doc, mark, f"invalid YAML: {message}", hint)


def _reader_error_problem(exc: yaml.YAMLError, text: str, doc: YamlDocument) -> Problem:
    reason = getattr(exc, "reason", None) or str(exc)
    character = getattr(exc, "character", None)  # the C reader gives a code point
    if isinstance(character, str) and len(character) == 1:
        character = ord(character)
    if isinstance(character, int):
        reason = f"character #x{character:04x}: {reason}"
    position = getattr(exc, "position", 0) or 0
    if _LOADER is not yaml.SafeLoader:  # libyaml counts bytes of the UTF-8 text
        position = len(text.encode("utf-8", "surrogatepass")[:position].decode("utf-8", "ignore"))
    return _position_problem(doc, text, position, reason)


def _position_problem(doc: YamlDocument, text: str, position: int, reason: str) -> Problem:
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

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.nodes = 0
        self.chars = 0
        self.open: set[int] = set()  # collections being built: a repeat is a recursive alias

    def build(self, node: yaml.Node, path: str, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.doc.problems.append(
                problem_at(self.doc, node.start_mark, f"more than {MAX_NODES} YAML values")
            )
            raise _Abort
        if depth > MAX_DEPTH:
            self.doc.problems.append(
                problem_at(self.doc, node.start_mark, f"nesting deeper than {MAX_DEPTH} levels")
            )
            raise _Abort
        self.doc.locations.setdefault(path, _position(node))
        if isinstance(node, yaml.ScalarNode):
            self.chars += len(node.value)
            if self.chars > MAX_TEXT_CHARS:
                message = (
                    f"the workflow's text, with its aliases expanded, is larger than "
                    f"{MAX_TEXT_CHARS >> 20} MiB"
                )
                self.doc.problems.append(problem_at(self.doc, node.start_mark, message))
                raise _Abort
            return self._scalar(node, path)
        if id(node) in self.open:
            self.doc.problems.append(
                problem_at(self.doc, node.start_mark, "a YAML alias must not refer to itself")
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
                    problem_at(
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
                        problem_at(self.doc, source.start_mark, "a merge key (<<) needs a map")
                    )
                    continue
                for key, value in self.build(source, path, depth).items():
                    merged.setdefault(key, value)
        return merged

    def _key(self, node: yaml.Node) -> str | None:
        if isinstance(node, yaml.ScalarNode):
            return str(node.value)  # untyped in PyYAML: a scalar's value is its text
        self.doc.problems.append(
            problem_at(self.doc, node.start_mark, "a key must be a plain value, not a list or map")
        )
        return None


def _position(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1
