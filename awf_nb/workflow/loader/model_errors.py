"""Validate plain data as a pydantic model and turn its errors into problems at YAML paths.

Before reporting, it applies what Go's YAML decoder does (AWF compatibility): a scalar in a
string field is its text as written, a null value is the field's default.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from awf_nb.workflow.checks import join_path, parent_path
from awf_nb.workflow.loader.document import _plain, go_type
from awf_nb.workflow.yaml_locations import YamlDocument

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


def validate_model(
    model: type[M],
    data: dict[str, Any],
    path: str,
    doc: YamlDocument,
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
    model: type[BaseModel], errors: list[Any], data: dict[str, Any], path: str, doc: YamlDocument
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
    doc: YamlDocument,
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
    cursor, path, key = data, base, None
    parent: dict[Any, Any] | list[Any] | None = None
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
    doc: YamlDocument,
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
