"""The one way a provider reads a step's `options:` map: a pydantic model, errors in words.

Each provider declares its options as an `OptionsModel` (strict: `"10"` is not a number,
`true` is not 1). `parse_options` validates a step's map against it and turns pydantic's
errors into the sentences a workflow author can act on, all of them on one line:

    openai_compatible: options.temperature must be a number from 0 to 2 (got 2.5)
    local: unknown option "temprature" (did you mean "temperature"?)

What a field accepts is worded from its type and bounds (`a whole number >= 1`, `one of
a, b`, `a string or a list of strings`); a field can word it itself with
`Field(description=...)`. Unknown options are an error, or — for providers that pass
options through to another program — a list the provider reports and ignores.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

import annotated_types
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from awf_nb.errors import EXIT_DEFINITION, ProviderError
from awf_nb.workflow.kinds import type_word

__all__ = ["OptionsModel", "parse_options", "unknown_options"]


class OptionsModel(BaseModel):
    """Base of every provider's options: strict types, unknown keys refused, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


M = TypeVar("M", bound=OptionsModel)


def parse_options(provider: str, model: type[M], raw: Any, *, ignore_unknown: bool = False) -> M:
    """`raw` validated as `model`, or a `ProviderError` naming every problem.

    With `ignore_unknown`, keys the model does not know are left out (the caller reports
    them with `unknown_options`) instead of being errors.
    """
    if not isinstance(raw, Mapping):
        raise _error(provider, f"options must be a mapping (got {type_word(raw, none='null')})")
    data = dict(raw)
    if ignore_unknown:
        data = {key: value for key, value in data.items() if key not in unknown_options(model, raw)}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problems = [
            text for text in dict.fromkeys(_describe(model, data, e) for e in errors) if text
        ]
        raise _error(provider, "; ".join(problems) or str(exc)) from None


def unknown_options(model: type[OptionsModel], raw: Mapping[str, Any]) -> list[str]:
    """The keys of `raw` that `model` has no field for, in the order written."""
    known = set(_field_names(model))
    return [key for key in raw if key not in known]


def _error(provider: str, message: str) -> ProviderError:
    return ProviderError(provider, message, exit_code=EXIT_DEFINITION)


def _field_names(model: type[BaseModel]) -> list[str]:
    """The keys a model reads, in the order it declares them."""
    return [info.alias or name for name, info in model.model_fields.items()]


# --- one pydantic error, in words -------------------------------------------------------------


def _describe(model: type[BaseModel], data: dict[str, Any], error: Mapping[str, Any]) -> str:
    """One error in words; "" for an error about a union branch the value does not take."""
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden" and len(loc) == 1:
        return _unknown(model, str(loc[0]))
    if not loc:  # a rule of the whole model (`max_tokens` must fit `context_window`)
        return str(error["msg"]).removeprefix("Value error, ")
    walked = _walk(model, data, loc)
    if walked is None:
        return ""
    path, annotation, field, value, found = walked
    if error["type"] == "missing" and not found:
        return f"{path} is required"
    if error["type"] == "extra_forbidden":  # inside an entry: {error, retryable, …}
        return f"{path}.{loc[-1]} is not a known field of {expects(annotation)}"
    if error["type"] == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    return f"{path} must be {expects(annotation, field)} (got {_shown(value)})"


def _unknown(model: type[BaseModel], key: str) -> str:
    known = sorted(_field_names(model))
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f'unknown option "{key}" (did you mean "{close[0]}"?)'
    return f'unknown option "{key}" (known: {", ".join(known)})'


def _walk(
    model: type[BaseModel], data: Any, loc: tuple[Any, ...]
) -> tuple[str, Any, FieldInfo | None, Any, bool] | None:
    """Follow pydantic's `loc` through the model's types and the data side by side.

    Returns the shown path (`options.replies[0].retry_after`), the type expected there,
    its field (for bounds and wording), the value found and whether one was found.
    At a union pydantic names the branch it tried (`str`, `ScriptedError`): a mapping is
    followed into the `{…}` branch (its error is the precise one) and the other branches'
    errors are dropped (None); when several branches are `{…}`, only the one sharing the
    most keys with the mapping is followed. Any other value is reported at the union, as
    what the position accepts.
    """
    path, annotation, field, value, found = "options", model, None, data, True
    for part in loc:
        annotation = _unwrap_optional(annotation)
        if _is_union(annotation):
            branch = _model_branch(annotation, part)
            if isinstance(value, Mapping) != (branch is not None):
                return None
            if branch is not None and branch is not _closest_model(annotation, value):
                return None  # the mapping is meant as another `{…}` of the union
            if branch is None:
                break
            annotation, field = branch, None
            continue
        if _is_model(annotation) and isinstance(part, str) and part in annotation.model_fields:
            field = annotation.model_fields[part]
            annotation = field.annotation
            path = f"{path}.{part}"
        elif typing.get_origin(annotation) is list and isinstance(part, int):
            annotation, field = _split_annotated(typing.get_args(annotation)[0])
            path = f"{path}[{part}]"
        elif typing.get_origin(annotation) in (dict, Mapping) and isinstance(part, str):
            annotation, field = _split_annotated(typing.get_args(annotation)[1])
            path = f"{path}.{part}"
        else:
            break
        in_mapping = isinstance(value, Mapping) and part in value
        in_list = isinstance(value, list) and isinstance(part, int) and part < len(value)
        if in_mapping or in_list:
            value = value[part]
        else:
            value, found = None, False
    return path, annotation, field, value, found


def _closest_model(union: Any, value: Mapping[str, Any]) -> type[BaseModel] | None:
    """The `{…}` branch of a union whose fields share the most keys with `value` (the
    first such branch on a tie): `{tool_calls: …}` is a tool-call reply, not an error."""
    models = [arg for arg in typing.get_args(union) if _is_model(arg)]
    return max(models, key=lambda m: len(set(_field_names(m)) & set(value)), default=None)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _model_branch(union: Any, tag: Any) -> type[BaseModel] | None:
    """The model among the union's branches that pydantic's loc `tag` names, if any."""
    for arg in typing.get_args(union):
        if _is_model(arg) and arg.__name__ == tag:
            return arg
    return None


def expects(annotation: Any, field: FieldInfo | None = None) -> str:
    """What a value of `annotation` (with `field`'s bounds) is, in words: `a number from
    0 to 2`, `a list of strings`, `one of a, b`."""
    if field is not None and field.description:
        return field.description
    annotation, inner_field = _split_annotated(_unwrap_optional(annotation))
    if inner_field is not None:
        return expects(annotation, inner_field)
    origin = typing.get_origin(annotation)
    if _is_union(annotation):
        words = list(dict.fromkeys(expects(arg) for arg in typing.get_args(annotation)))
        return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
    if origin is Literal:
        return "one of " + ", ".join(str(arg) for arg in typing.get_args(annotation))
    if origin is list:
        return "a list of " + _plural(expects(typing.get_args(annotation)[0]))
    if origin in (dict, Mapping):
        return "a mapping of names to " + _plural(expects(typing.get_args(annotation)[1]))
    if _is_model(annotation):
        return "{" + ", ".join(_field_names(annotation)) + "}"
    if annotation is bool:
        return "true or false"
    if annotation is str:
        non_empty = field is not None and any(
            isinstance(rule, annotated_types.MinLen) and rule.min_length > 0
            for rule in field.metadata
        )
        return "a non-empty string" if non_empty else "a string"
    if annotation is int:
        return "a whole number" + _bounds(field)
    if annotation is float:
        return "a number" + _bounds(field)
    return getattr(annotation, "__name__", str(annotation))


def _bounds(field: FieldInfo | None) -> str:
    """` from 0 to 2`, ` >= 1`, ` > 0 and <= 1` from the field's constraints."""
    # a bound is whatever the field declares (annotated-types: an int, a float, …)
    low: tuple[str, object] | None = None
    high: tuple[str, object] | None = None
    for rule in field.metadata if field is not None else ():
        if isinstance(rule, annotated_types.Ge):
            low = (">=", rule.ge)
        elif isinstance(rule, annotated_types.Gt):
            low = (">", rule.gt)
        elif isinstance(rule, annotated_types.Le):
            high = ("<=", rule.le)
        elif isinstance(rule, annotated_types.Lt):
            high = ("<", rule.lt)
    if low and high and (low[0], high[0]) == (">=", "<="):
        return f" from {_number(low[1])} to {_number(high[1])}"
    rules = [f"{bound[0]} {_number(bound[1])}" for bound in (low, high) if bound]
    return " " + " and ".join(rules) if rules else ""


def _number(value: object) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


_PLURALS = {"a string": "strings", "a number": "numbers", "a whole number": "whole numbers"}


def _plural(phrase: str) -> str:
    """`a string` -> `strings`; anything longer is quoted as what each item must be."""
    return _PLURALS.get(phrase, f"items, each {phrase}")


def _split_annotated(annotation: Any) -> tuple[Any, FieldInfo | None]:
    """`Annotated[X, Field(...)]` -> (X, that field); anything else -> (it, None)."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *metadata = typing.get_args(annotation)
        fields = [m for m in metadata if isinstance(m, FieldInfo)]
        return inner, (FieldInfo.merge_field_infos(*fields) if fields else None)
    return annotation, None


def _unwrap_optional(annotation: Any) -> Any:
    """`X | None` -> `X` (None means "not set", never worth mentioning)."""
    if _is_union(annotation):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
        return typing.Union[tuple(args)]  # noqa: UP007  (rebuilt from a runtime tuple)
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _shown(value: Any) -> str:
    return repr(value)
