"""Resolving a run's inputs: defaults, given values, coercion, validation (spec §3).

Every problem is collected and reported together in one `InputError`, so a user fixes all
of them in one go. `parse_input_args` turns `-i name=value` / `name=@file` into a mapping.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from awf_nb.errors import InputError, UserError
from awf_nb.workflow.model import Input, Workflow

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}

# Asks the person for a missing required input (only on a TTY); None = could not ask.
AskFunction = Callable[[Input], str | None]


def parse_input_args(pairs: Iterable[str], *, cwd: Path | None = None) -> dict[str, str]:
    """`["topic=Go", "spec=@notes.md"]` -> `{"topic": "Go", "spec": "<file text>"}`."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(f'invalid input "{pair}": use name=value (or name=@file)')
        if value.startswith("@") and len(value) > 1:
            path = Path(value[1:]).expanduser()
            if cwd is not None and not path.is_absolute():
                path = cwd / path
            try:
                value = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise UserError(f"inputs.{name}: cannot read {path}: {exc.strerror}") from None
        values[name] = value
    return values


def _coerce(spec: Input, value: Any) -> tuple[Any, str | None]:
    """Convert a given value to the input's type; returns (value, problem)."""
    if spec.type == "integer":
        if isinstance(value, bool):
            return value, f'inputs.{spec.name}: value "{value}" is not an integer'
        if isinstance(value, int):
            return value, None
        if isinstance(value, float) and value.is_integer():
            return int(value), None
        try:
            return int(str(value).strip()), None
        except ValueError:
            return value, f'inputs.{spec.name}: value "{value}" is not an integer'
    if spec.type == "boolean":
        if isinstance(value, bool):
            return value, None
        text = str(value).strip().lower()
        if text in _TRUE:
            return True, None
        if text in _FALSE:
            return False, None
        return value, f'inputs.{spec.name}: value "{value}" is not a boolean (true/false)'
    return ("" if value is None else str(value)), None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _validate(spec: Input, value: Any, base_dir: Path) -> list[str]:
    rules = spec.validation
    if rules is None:
        return []
    problems: list[str] = []
    name = spec.name
    if rules.pattern is not None and not re.search(rules.pattern, str(value)):
        problems.append(f'inputs.{name}: value "{value}" does not match pattern "{rules.pattern}"')
    if rules.enum is not None and str(value) not in {str(v) for v in rules.enum}:
        allowed = ", ".join(str(v) for v in rules.enum)
        problems.append(f'inputs.{name}: value "{value}" not in allowed values [{allowed}]')
    if isinstance(value, int | float) and not isinstance(value, bool):
        if rules.min is not None and value < rules.min:
            problems.append(f"inputs.{name}: value {value} is below minimum {_number(rules.min)}")
        if rules.max is not None and value > rules.max:
            problems.append(f"inputs.{name}: value {value} exceeds maximum {_number(rules.max)}")
    if rules.file_exists or rules.file_extension:
        path = Path(str(value)).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        if rules.file_exists and not path.exists():
            problems.append(f"inputs.{name}: file does not exist: {value}")
        if rules.file_extension:
            wanted = [e if e.startswith(".") else f".{e}" for e in rules.file_extension]
            if path.suffix.lower() not in {w.lower() for w in wanted}:
                problems.append(
                    f'inputs.{name}: file "{value}" must have extension {", ".join(wanted)}'
                )
    return problems


def resolve_inputs(
    workflow: Workflow,
    given: Mapping[str, Any],
    *,
    ask: AskFunction | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Defaults first, then given values; coerce, validate, and collect every problem.

    Given names that the workflow does not declare are kept (templates may use them) but a
    close misspelling of a declared name is an error, since it is almost surely a typo.
    """
    base_dir = cwd or Path.cwd()
    problems: list[str] = []
    values: dict[str, Any] = {}
    declared = {spec.name for spec in workflow.inputs}
    for name in given:
        if name not in declared and declared:
            import difflib

            close = difflib.get_close_matches(name, sorted(declared), n=1)
            if close:
                problems.append(f'inputs.{name}: unknown input (did you mean "{close[0]}"?)')
    values.update({k: v for k, v in given.items() if k not in declared})
    for spec in workflow.inputs:
        if spec.name in given:
            raw: Any = given[spec.name]
        elif spec.default is not None:
            raw = spec.default
        elif spec.required:
            answer = ask(spec) if ask else None
            if answer is None:
                problems.append(f"inputs.{spec.name}: required but not provided")
                continue
            raw = answer
        else:
            values[spec.name] = {"integer": 0, "boolean": False}.get(spec.type, "")
            continue
        value, problem = _coerce(spec, raw)
        if problem:
            problems.append(problem)
            continue
        problems.extend(_validate(spec, value, base_dir))
        values[spec.name] = value
    if problems:
        raise InputError(problems)
    return values
