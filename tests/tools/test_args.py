"""One pydantic model per built-in tool: the schema the model is shown and the check of its
arguments come from it; the schema suits every provider, the errors read as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from awf_nb.tools import StepToolSet
from awf_nb.tools.args import (
    BashArgs,
    EditArgs,
    GlobArgs,
    GrepArgs,
    ReadArgs,
    WriteArgs,
    json_schema,
    parse,
)
from awf_nb.tools.builtins import SPECS
from awf_nb.tools.output import ToolError

Make = Callable[..., StepToolSet]
MODELS = {
    "Read": ReadArgs,
    "Write": WriteArgs,
    "Edit": EditArgs,
    "Bash": BashArgs,
    "Glob": GlobArgs,
    "Grep": GrepArgs,
}


def walk(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict):
        return [schema, *(part for value in schema.values() for part in walk(value))]
    if isinstance(schema, list):
        return [part for value in schema for part in walk(value)]
    return []


@pytest.mark.parametrize("name", list(MODELS))
def test_each_tools_schema_is_its_models_and_plain(name: str) -> None:
    schema = SPECS[name].parameters
    assert schema == json_schema(MODELS[name])
    assert schema["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(schema)
    parts = walk(schema)
    # What some providers refuse or misread: titles, null types, references, defaults of null.
    assert not [p for p in parts if "title" in p and p is not schema["properties"]]
    assert not [p for p in parts if "anyOf" in p or "$ref" in p or "$defs" in p]
    assert not [p for p in parts if p.get("type") == "null" or p.get("default", 0) is None]
    # Every property is a typed leaf with a description the model reads.
    for prop in schema["properties"].values():
        assert prop["type"] in ("string", "integer", "boolean")
        assert prop.get("description")


def test_aliases_are_accepted_but_not_advertised() -> None:
    assert set(SPECS["Read"].parameters["properties"]) == {"path", "offset", "limit"}
    assert parse(ReadArgs, {"file_path": "a.txt"}).path == "a.txt"
    edit = parse(EditArgs, {"file_path": "a", "old_string": "x", "new_string": ""})
    assert (edit.old, edit.new) == ("x", "")
    assert parse(GrepArgs, {"pattern": "x", "-i": "true"}).case_insensitive is True
    assert SPECS["Read"].parameters["required"] == ["path"]
    assert SPECS["Edit"].parameters["required"] == ["path", "old", "new"]


def test_plainly_meant_values_are_read_leniently() -> None:
    read = parse(ReadArgs, {"path": "a", "offset": "20", "limit": 5.0})
    assert (read.offset, read.limit) == (20, 5)
    assert parse(ReadArgs, {"path": "a", "offset": None, "limit": ""}).limit is None
    assert parse(BashArgs, {"command": "ls", "cwd": "", "timeout_seconds": " 30 "}).cwd is None
    assert (
        parse(EditArgs, {"path": "a", "old": "x", "new": "y", "replace_all": "false"}).replace_all
        is False
    )
    assert parse(WriteArgs, {"path": "a", "content": ""}).content == ""
    assert parse(ReadArgs, {"path": "a", "unknown": 1}).path == "a"  # extras ignored


@pytest.mark.parametrize(
    ("model", "arguments", "message"),
    [
        (ReadArgs, {}, "missing argument: path"),
        (ReadArgs, {"path": "a", "offset": "x"}, "offset must be an integer"),
        (ReadArgs, {"path": "a", "offset": True}, "offset must be an integer"),
        (ReadArgs, {"path": "a", "offset": 2.5}, "offset must be an integer"),
        (ReadArgs, {"path": "a", "offset": -1}, "offset must be at least 0"),
        (ReadArgs, {"path": "a", "limit": 0}, "limit must be at least 1"),
        (ReadArgs, {"path": 3}, "path must be a string"),
        (EditArgs, {"path": "a", "old": "", "new": "b"}, "old must not be empty"),
        (
            EditArgs,
            {"path": "a", "old": "x", "new": "y", "replace_all": "maybe"},
            "replace_all must be true or false",
        ),
        (BashArgs, {"command": ""}, "command must not be empty"),
        (
            GrepArgs,
            {"pattern": "x", "output_mode": "lines"},
            "output_mode must be one of: content, files_with_matches, count",
        ),
        (WriteArgs, {"path": "a"}, "missing argument: content"),
    ],
)
def test_errors_say_what_to_fix(model: Any, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as caught:
        parse(model, arguments)
    assert str(caught.value) == message


def test_several_problems_are_all_named() -> None:
    with pytest.raises(ToolError) as caught:
        parse(EditArgs, {"old": 1})
    assert str(caught.value) == (
        "missing argument: path; old must be a string; missing argument: new"
    )


async def test_the_model_sees_the_error_as_the_tools_result(toolset: Make) -> None:
    tools = toolset(builtin=["Read", "Grep"])
    result = await tools.call("Read", {"path": "a.txt", "limit": "many"})
    assert result.is_error and result.text == "Read: limit must be an integer"
    result = await tools.call("Grep", {"pattern": "x", "output_mode": "lines"})
    assert result.text == "Grep: output_mode must be one of: content, files_with_matches, count"
