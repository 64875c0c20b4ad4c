"""The arguments of the built-in tools: one pydantic model per tool is the one source of
both the JSON Schema the model is shown and the check of what it sends.

`spec(name, description, Model)` gives the tool's `ToolSpec` (the schema from
`model_json_schema()`, shaped so every provider accepts it: no titles, no `null` in
optional fields, no `$ref`); `parse(Model, arguments)` the checked arguments or a
`ToolError` whose text the model reads to correct itself ("missing argument: path",
"offset must be an integer", …).

Models get types slightly wrong (`"20"` for 20, `"true"` for true): pydantic's lax mode
accepts such values when their meaning is plain, since refusing them costs a whole model
round. A `null` or `""` for an optional argument means "not given". Unknown keys are
ignored. Claude Code's spellings (`file_path`, `old_string`, `new_string`, `-i`) are
accepted as aliases but not advertised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from awf_nb.engine.ports import ToolSpec
from awf_nb.tools.output import ToolError


def _not_a_bool(value: Any) -> Any:
    # pydantic's lax mode reads true as 1: a model sending a flag where a number belongs
    # has misunderstood the argument, and should be told.
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


Integer = Annotated[int, BeforeValidator(_not_a_bool)]


class ToolArguments(BaseModel):
    """The base of the argument models: lenient about extras, strict about meaning."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, hide_input_in_errors=True)

    @model_validator(mode="before")
    @classmethod
    def _blank_is_not_given(cls, data: Any) -> Any:
        """`null` or `""` for an optional argument is the argument left out."""
        if not isinstance(data, Mapping):
            return data
        optional = {
            key
            for name, field in cls.model_fields.items()
            if not field.is_required() and name not in _EMPTY_ALLOWED
            for key in _keys(name, field.validation_alias)
        }
        return {
            key: value
            for key, value in data.items()
            if not (key in optional and (value is None or value == ""))
        }


_EMPTY_ALLOWED = frozenset({"content", "new"})  # "" is a real value for these


def _keys(name: str, alias: Any) -> list[str]:
    if isinstance(alias, AliasChoices):
        return [name, *(choice for choice in alias.choices if isinstance(choice, str))]
    return [name, alias] if isinstance(alias, str) else [name]


def _path(description: str, *aliases: str) -> Any:
    return Field(
        description=description,
        validation_alias=AliasChoices(aliases[0], *aliases[1:]) if aliases else None,
    )


class ReadArgs(ToolArguments):
    path: str = _path("file path, relative to the working directory", "path", "file_path")
    offset: Integer = Field(0, ge=0, description="first line to return (0-based)")
    limit: Integer | None = Field(None, ge=1, description="how many lines at most")


class WriteArgs(ToolArguments):
    path: str = _path("file path, relative to the working directory", "path", "file_path")
    content: str = Field(description="the whole new content of the file")


class EditArgs(ToolArguments):
    path: str = _path("file path, relative to the working directory", "path", "file_path")
    old: str = Field(
        min_length=1,
        description="the exact text to replace",
        validation_alias=AliasChoices("old", "old_string"),
    )
    new: str = Field(
        description="the replacement text", validation_alias=AliasChoices("new", "new_string")
    )
    replace_all: bool = Field(False, description="replace every occurrence")


class BashArgs(ToolArguments):
    command: str = Field(min_length=1, description="the bash command to run")
    cwd: str | None = Field(None, description="folder to run in (relative)")
    timeout_seconds: Integer | None = Field(None, ge=1, description="stop it after this long")


class GlobArgs(ToolArguments):
    pattern: str = Field(min_length=1, description="e.g. **/*.py or src/*.md")
    cwd: str | None = Field(
        None,
        description="folder to search from (relative)",
        validation_alias=AliasChoices("cwd", "path"),
    )


class GrepArgs(ToolArguments):
    pattern: str = Field(min_length=1, description="a regular expression (RE2 syntax)")
    path: str | None = Field(None, description="file or folder to search (relative)")
    glob: str | None = Field(None, description="only files matching, e.g. *.py")
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        "content", description="content (path:line:text), files_with_matches or count"
    )
    case_insensitive: bool = Field(
        False,
        description="ignore case",
        validation_alias=AliasChoices("case_insensitive", "-i"),
    )


Args = TypeVar("Args", bound=ToolArguments)


def parse(model: type[Args], arguments: Mapping[str, Any]) -> Args:
    """`arguments` checked against `model`, or a `ToolError` saying what is wrong."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        raise ToolError("; ".join(_problem(error) for error in exc.errors())) from None


_KINDS = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_too_short": "must not be empty",
}


def _problem(error: Mapping[str, Any]) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    kind = error["type"]
    if kind == "missing":
        return f"missing argument: {where}"
    if kind == "greater_than_equal":
        return f"{where} must be at least {error['ctx']['ge']}"
    if kind in _KINDS:
        return f"{where} {_KINDS[kind]}"
    if kind == "value_error" and "boolean" in str(error.get("msg", "")):
        return f"{where} must be an integer"
    if kind == "literal_error":
        choices = str(error["ctx"]["expected"]).replace("'", "").replace(" or ", ", ")
        return f"{where} must be one of: {choices}"
    if kind == "model_type":
        return "the arguments must be a JSON object"
    message = str(error.get("msg", kind)).removeprefix("Value error, ")
    return f"{where}: {message}"


class _ProviderSchema(GenerateJsonSchema):
    """JSON Schema that OpenAI-style APIs, llama.cpp's grammar builder and the agent CLIs
    (through MCP) all accept: no titles, optional fields as their plain type (the model
    leaves them out rather than sending null), no `default: null`."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        inner = super().default_schema(schema)
        if inner.get("default", 0) is None:
            inner.pop("default")
        return inner


def json_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """The schema of `model`'s arguments object, as sent to the model."""
    schema = model.model_json_schema(schema_generator=_ProviderSchema)
    schema.pop("title", None)
    schema.setdefault("required", [])
    return schema


def spec(name: str, description: str, model: type[ToolArguments]) -> ToolSpec:
    return ToolSpec(name, description, json_schema(model))
