"""Resolving a run's inputs: defaults, given values, coercion, validation (spec §3).

Every problem is collected and reported together in one `InputError`, so a user fixes all
of them in one go; a secret input's value never appears in a message. `parse_input_args`
turns `-i name=value` / `name=@file` into a mapping.

Types: `string`, `integer`, `boolean`, `number` (a float), `array` (a JSON array or a
comma-separated list, like loop items) and `object` (a JSON object). Any other type name is
accepted, as AWF does (the loader warns), and the value kept as text.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from awf_nb.errors import InputError, UserError
from awf_nb.secrets import MASK, is_secret_input
from awf_nb.workflow.files import FileTooLarge, read_text_capped
from awf_nb.workflow.model import Input, Workflow
from awf_nb.workflow.patterns import matches

KNOWN_TYPES = ("string", "integer", "boolean", "number", "array", "object")

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
            raise UserError(f'invalid input "{_printable(pair)}": use name=value (or name=@file)')
        if _undecodable(name + value):
            # argv bytes that are not UTF-8 reach Python as lone surrogates
            raise UserError(
                f"inputs.{_printable(name)}: the value is not valid UTF-8 text "
                "(check the terminal's encoding, or pass the value with name=@file)"
            )
        if value.startswith("@") and len(value) > 1:
            path = Path(value[1:]).expanduser()
            if cwd is not None and not path.is_absolute():
                path = cwd / path
            try:
                value = read_text_capped(path)  # bad bytes become U+FFFD
            except FileTooLarge:
                raise UserError(f"inputs.{name}: {path} is larger than 1 MiB") from None
            except OSError as exc:
                raise UserError(
                    f"inputs.{name}: cannot read {path}: {exc.strerror or exc}"
                ) from None
            if "\0" in value:
                raise UserError(
                    f"inputs.{name}: {path} holds a NUL byte (character "
                    f"{value.index(chr(0)) + 1}): an input is text, and this looks like a "
                    "binary file"
                )
        values[name] = value
    return values


# A NUL byte ends a C string: no command line, environment variable or file name can hold
# one, so a value with one would only fail the run later, inside a step.
_NUL_PROBLEM = "inputs.{}: the value holds a NUL byte, which an input cannot hold (inputs are text)"


def _holds_nul(value: Any) -> bool:
    """Whether a text in `value` (or in its lists and maps, keys included) holds a NUL."""
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, Mapping):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_nul(item) for item in value)
    return False


def _undecodable(text: str) -> bool:
    return any("\udc80" <= char <= "\udcff" for char in text)


def _printable(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _coerce(spec: Input, value: Any, shown: str) -> tuple[Any, str | None]:
    """Convert a given value to the input's type; returns (value, problem). Messages show
    `shown` (the value, or *** for a secret)."""
    if spec.type == "integer":
        if isinstance(value, bool):
            return value, f'inputs.{spec.name}: value "{shown}" is not an integer'
        if isinstance(value, int):
            return value, None
        if isinstance(value, float) and value.is_integer():
            return int(value), None
        try:
            return int(str(value).strip()), None
        except ValueError:
            return value, f'inputs.{spec.name}: value "{shown}" is not an integer'
    if spec.type == "boolean":
        if isinstance(value, bool):
            return value, None
        text = str(value).strip().lower()
        if text in _TRUE:
            return True, None
        if text in _FALSE:
            return False, None
        return value, f'inputs.{spec.name}: value "{shown}" is not a boolean (true/false)'
    if spec.type == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value), None
        try:
            return float(str(value).strip()), None
        except ValueError:
            return value, f'inputs.{spec.name}: value "{shown}" is not a number'
    if spec.type == "array":
        return _array(spec, value, shown)
    if spec.type == "object":
        if isinstance(value, dict):
            return value, None
        try:
            parsed = json.loads(str(value))
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed, None
        return value, f'inputs.{spec.name}: value "{shown}" is not a JSON object'
    return ("" if value is None else str(value)), None


def _array(spec: Input, value: Any, shown: str) -> tuple[Any, str | None]:
    """A list, a JSON array, or comma-separated items (as for_each items)."""
    if isinstance(value, list):
        return value, None
    text = str(value).strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            return value, f'inputs.{spec.name}: value "{shown}" is not a JSON array'
        if isinstance(parsed, list):
            return parsed, None
    return [item.strip() for item in text.split(",") if item.strip()], None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _validate(spec: Input, value: Any, base_dir: Path, shown: str) -> list[str]:
    rules = spec.validation
    if rules is None:
        return []
    problems: list[str] = []
    name = spec.name
    if rules.pattern is not None and not matches(rules.pattern, str(value)):
        problems.append(f'inputs.{name}: value "{shown}" does not match pattern "{rules.pattern}"')
    if rules.enum is not None and str(value) not in {str(v) for v in rules.enum}:
        allowed = ", ".join(str(v) for v in rules.enum)
        problems.append(f'inputs.{name}: value "{shown}" not in allowed values [{allowed}]')
    if isinstance(value, int | float) and not isinstance(value, bool):
        if rules.min is not None and value < rules.min:
            problems.append(f"inputs.{name}: value {shown} is below minimum {_number(rules.min)}")
        if rules.max is not None and value > rules.max:
            problems.append(f"inputs.{name}: value {shown} exceeds maximum {_number(rules.max)}")
    if rules.file_exists or rules.file_extension:
        path = Path(str(value)).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        if rules.file_exists and not path.exists():
            problems.append(f"inputs.{name}: file does not exist: {shown}")
        if rules.file_extension:
            wanted = [e if e.startswith(".") else f".{e}" for e in rules.file_extension]
            if path.suffix.lower() not in {w.lower() for w in wanted}:
                problems.append(
                    f'inputs.{name}: file "{shown}" must have extension {", ".join(wanted)}'
                )
    return problems


def resolve_inputs(
    workflow: Workflow,
    given: Mapping[str, Any],
    *,
    ask: AskFunction | None = None,
    cwd: Path | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """Defaults first, then given values; coerce, validate, and collect every problem.

    Given names that the workflow does not declare are kept (templates may use them) but a
    close misspelling of a declared name is an error, since it is almost surely a typo;
    another undeclared name is a warning (appended to `warnings`).
    """
    base_dir = cwd or Path.cwd()
    problems: list[str] = []
    values: dict[str, Any] = {}
    declared = {spec.name for spec in workflow.inputs}
    for name in given:
        if name not in declared and declared:
            close = difflib.get_close_matches(name, sorted(declared), n=1)
            if close:
                problems.append(f'inputs.{name}: unknown input (did you mean "{close[0]}"?)')
            elif warnings is not None:
                warnings.append(
                    f"input {name} is not declared by workflow {workflow.name} "
                    f"(its inputs: {', '.join(sorted(declared))}); it is passed on as given"
                )
        elif name not in declared and warnings is not None:
            warnings.append(
                f"input {name} is not declared by workflow {workflow.name}, which takes no "
                "inputs; it is passed on as given"
            )
    problems.extend(_NUL_PROBLEM.format(name) for name in given if name not in declared
                    and _holds_nul(given[name]))  # fmt: skip
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
        if _holds_nul(raw):
            problems.append(_NUL_PROBLEM.format(spec.name))
            continue
        shown = MASK if is_secret_input(spec.name, spec.secret) else str(raw)
        value, problem = _coerce(spec, raw, shown)
        found = [problem] if problem else _validate(spec, value, base_dir, shown)
        if found:
            problems.extend(found)
            continue
        values[spec.name] = value
    if problems:
        raise InputError(problems)
    return values
