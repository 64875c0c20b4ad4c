"""Datasets: the cases of an eval, read from .jsonl, .csv, .json (a list) or .yaml (a list).

A case is one row, a map of columns. Its id is the `id` column when the row has one, else
its row number (1-based). Every column is reachable in templates as `{{.case.NAME}}` and in
conditions as `case.NAME`. A row may carry `replies` (a list of messages; in a CSV, a JSON
array) instead of a simulated user: scripted person messages, for deterministic cases.

Reading is bounded: at most `max_rows` rows and `max_bytes` bytes (defaults in `model.py`,
set per eval with `dataset: {path, max_rows, max_bytes}`). Problems name the file and the
line (or item) of the row, so a bad dataset is fixed where it is wrong.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awf_nb.errors import DefinitionError, Problem, UserError
from awf_nb.evals.model import DEFAULT_MAX_BYTES, DEFAULT_MAX_ROWS
from awf_nb.workflow.files import open_regular
from awf_nb.workflow.yaml_locations import MAX_DEPTH

DATASET_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".json", ".yaml", ".yml")
MAX_ID_CHARS = 200
# A case's file name part, at most (the rest of the name, "-EPOCH.cassette.jsonl", fits
# in what is left of the 255 bytes file systems allow).
MAX_STEM_BYTES = 200
ID_COLUMN = "id"
REPLIES_COLUMN = "replies"
MAX_REPLIES = 1000


@dataclass(frozen=True)
class Case:
    """One row of the dataset."""

    id: str
    row: dict[str, Any] = field(default_factory=dict)
    replies: tuple[str, ...] | None = None  # scripted person messages, when the row has them
    line: int = 0  # where the row is in its file (1-based; 0: not from a file)

    @property
    def file_stem(self) -> str:
        """The id as a file name part: anything but letters, digits, `.`, `_`, `-` is
        %-encoded, so an id can never name a path outside the cassette folder. A name
        past `MAX_STEM_BYTES` (200 CJK characters are 1,800 bytes encoded; file systems
        take 255) is cut at a whole character and ends with `~` and 16 hex digits of the
        id's SHA-256: stable, and still one file per id."""
        quoted = urllib.parse.quote(self.id, safe="")
        if len(quoted) <= MAX_STEM_BYTES:
            return quoted
        digest = hashlib.sha256(self.id.encode()).hexdigest()[:16]
        cut = quoted[: MAX_STEM_BYTES - len(digest) - 1]
        if "%" in cut[-2:]:  # never half an escape
            cut = cut[: cut.rindex("%")]
        return f"{cut}~{digest}"


class _Rows:
    """Collects rows and their problems for one dataset source."""

    def __init__(self, label: str, max_rows: int) -> None:
        self.label = label
        self.max_rows = max_rows
        self.cases: list[Case] = []
        self.problems: list[Problem] = []
        self._ids: dict[str, int] = {}

    def error(self, message: str, line: int = 0, hint: str | None = None) -> None:
        self.problems.append(Problem(message, file=self.label, line=line, hint=hint))

    def add(self, raw: Any, number: int, line: int, where: str) -> bool:
        """Add row `number` (1-based); False once the row limit is passed."""
        if number > self.max_rows:
            self.error(
                f"the dataset has more than {self.max_rows} rows (dataset.max_rows)",
                line,
                hint="raise dataset.max_rows in the eval file, or split the dataset",
            )
            return False
        if not isinstance(raw, Mapping):
            self.error(f"{where}: a row must be a map of columns, got {_kind(raw)}", line)
            return True
        row = {str(key): value for key, value in raw.items()}
        case_id = self._id(row, number, line, where)
        replies = self._replies(row, line, where)
        if case_id is None:
            return True
        if case_id in self._ids:
            first = self._ids[case_id]
            self.error(
                f'{where}: case id "{case_id}" is used twice (first at '
                f"{'line ' + str(first) if first else 'an earlier row'}); ids are unique",
                line,
            )
            return True
        self._ids[case_id] = line
        self.cases.append(Case(case_id, row, replies, line))
        return True

    def _id(self, row: dict[str, Any], number: int, line: int, where: str) -> str | None:
        if ID_COLUMN not in row or row[ID_COLUMN] in (None, ""):
            return str(number)
        value = row[ID_COLUMN]
        if isinstance(value, bool) or not isinstance(value, str | int):
            self.error(f"{where}: id must be text or a whole number, got {_kind(value)}", line)
            return None
        text = str(value)
        if len(text) > MAX_ID_CHARS or any(ord(c) < 32 or c == "\x7f" for c in text):
            self.error(
                f"{where}: id must be at most {MAX_ID_CHARS} characters, without control "
                "characters",
                line,
            )
            return None
        return text

    def _replies(self, row: dict[str, Any], line: int, where: str) -> tuple[str, ...] | None:
        if REPLIES_COLUMN not in row or row[REPLIES_COLUMN] is None:
            return None
        value = row[REPLIES_COLUMN]
        if isinstance(value, str):  # a CSV cell: a JSON array
            try:
                value = json.loads(value) if value.strip() else []
            except ValueError:
                value = None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(
                f"{where}: replies must be a list of messages (text)"
                + (
                    ' (in a CSV, a JSON array: ["hi", "exit"])'
                    if self.label.endswith(".csv")
                    else ""
                ),
                line,
            )
            return None
        if len(value) > MAX_REPLIES:
            self.error(f"{where}: replies holds more than {MAX_REPLIES} messages", line)
            return None
        return tuple(value)

    def result(self) -> list[Case]:
        if self.problems:
            raise DefinitionError(self.problems)
        if not self.cases:
            raise DefinitionError([Problem("the dataset has no rows", file=self.label)])
        return self.cases


def load_dataset(
    path: str | os.PathLike[str],
    *,
    label: str | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Case]:
    """The cases of the dataset file at `path` (its suffix picks the format).

    Raises `UserError` when it cannot be read (or is over `max_bytes`), `DefinitionError`
    with every bad row otherwise.
    """
    target = Path(path)
    shown = label or os.fspath(path)
    suffix = target.suffix.lower()
    if suffix not in DATASET_SUFFIXES:
        raise UserError(
            f"dataset {shown}: unknown format {suffix or '(no suffix)'}",
            hint="use .jsonl, .csv, .json (a list of objects) or .yaml (a list of maps)",
        )
    text = _read_bounded(target, shown, max_bytes)
    rows = _Rows(shown, max_rows)
    if suffix in (".jsonl", ".ndjson"):
        _jsonl(text, rows)
    elif suffix == ".csv":
        _csv(text, rows)
    elif suffix == ".json":
        _json(text, rows)
    else:
        _yaml(text, rows)
    return rows.result()


def cases_from_rows(rows: Any, *, max_rows: int = DEFAULT_MAX_ROWS) -> list[Case]:
    """The cases of rows given in Python: a list of dicts, or a data frame (anything with
    `to_dict(orient="records")`, e.g. pandas; pandas itself is never imported)."""
    to_dict = getattr(rows, "to_dict", None)
    if callable(to_dict) and not isinstance(rows, Mapping):
        rows = to_dict(orient="records")
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise UserError(
            f"dataset must be a file path, a list of dicts or a data frame, got {_kind(rows)}"
        )
    collected = _Rows("<dataset>", max_rows)
    for number, raw in enumerate(rows, start=1):
        if not collected.add(raw, number, 0, f"row {number}"):
            break
    return collected.result()


def _read_bounded(path: Path, shown: str, max_bytes: int) -> str:
    try:
        with open_regular(path) as file:  # a FIFO or a device is refused, not waited on
            data = file.read(max_bytes + 1)
    except FileNotFoundError:
        raise UserError(f"dataset {shown} not found") from None
    except OSError as exc:
        raise UserError(f"cannot read dataset {shown}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise UserError(
            f"dataset {shown} is larger than {max_bytes} bytes (dataset.max_bytes)",
            hint="raise dataset.max_bytes in the eval file, or split the dataset",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DefinitionError(
            [
                Problem(
                    f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                    file=shown,
                    line=line,
                )
            ]
        ) from None


def _jsonl(text: str, rows: _Rows) -> None:
    number = 0
    for index, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        number += 1
        try:
            raw = _loads(line)
        except ValueError as exc:
            rows.error(f"line {index}: not JSON ({_json_reason(exc)})", index)
            continue
        if not rows.add(raw, number, index, f"line {index}"):
            return


def _csv(text: str, rows: _Rows) -> None:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        rows.error(f"the header is not valid CSV: {exc}", 1)
        return
    if header is None:
        return
    names = [name.strip() for name in header]
    if any(not name for name in names):
        rows.error("the header row has an empty column name", 1)
        return
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        rows.error(f"the header names a column twice: {', '.join(twice)}", 1)
        return
    number = 0
    while True:
        start = reader.line_num + 1
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            rows.error(f"line {start}: not valid CSV: {exc}", start)
            return
        if not any(v.strip() for v in values):
            continue
        number += 1
        if len(values) != len(names):
            rows.error(f"line {start}: {len(values)} values for {len(names)} columns", start)
            continue
        if not rows.add(dict(zip(names, values, strict=True)), number, start, f"line {start}"):
            return


def _json(text: str, rows: _Rows) -> None:
    try:
        data = _loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", 0) or 1
        rows.error(f"not JSON ({_json_reason(exc)})", line)
        return
    if not isinstance(data, list):
        rows.error(f"a .json dataset must be a list of objects, got {_kind(data)}", 1)
        return
    for number, raw in enumerate(data, start=1):
        if not rows.add(raw, number, 0, f"item {number}"):
            return


def _yaml(text: str, rows: _Rows) -> None:
    from awf_nb.workflow.yaml_locations import YamlDocument, parse_yaml

    doc = YamlDocument(file=rows.label)
    parsed, data = parse_yaml(text, doc)
    if doc.problems and not parsed:
        rows.problems.extend(doc.problems)
        return
    rows.problems.extend(p for p in doc.problems if p.severity == "error")
    if not isinstance(data, list):
        rows.error(f"a .yaml dataset must be a list of maps, got {_kind(data)}", 1)
        return
    for number, raw in enumerate(data, start=1):
        line = doc.where(f"[{number - 1}]")[0]
        if not rows.add(raw, number, line, f"item {number}"):
            return


class _TooDeep(ValueError):
    """JSON nested deeper than `MAX_DEPTH` (as YAML's limit), with where it goes past it."""

    def __init__(self, text: str, position: int) -> None:
        self.msg = f"nesting deeper than {MAX_DEPTH} levels"
        self.lineno = text.count("\n", 0, position) + 1
        super().__init__(self.msg)


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _loads(text: str) -> Any:
    """`json.loads`, with nesting bounded: Python's own parser recurses once per level."""
    try:
        data = json.loads(text)
    except RecursionError:
        data = None
    else:
        if _depth(data) <= MAX_DEPTH:
            return data
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        if token.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _TooDeep(text, token.start())
        elif token.group() in "]}":
            depth -= 1
    raise _TooDeep(text, 0)  # not reached: the data was deeper than the text's brackets


def _depth(value: Any) -> int:
    """How deep lists and objects nest in `value` (without recursing)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _json_reason(exc: ValueError) -> str:
    return getattr(exc, "msg", None) or str(exc)


def _kind(value: Any) -> str:
    from awf_nb.workflow.kinds import type_word

    return type_word(value, none="null")
