"""build_toolset: the three sources behind one ToolSet, confirm and max_rounds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from awf_nb.engine.ports import ToolResult, ToolSet
from awf_nb.tools import StepToolSet, build_toolset
from tests.support.mcp_peer import notes_server

Make = Callable[..., StepToolSet]

SAY = {
    "name": "say",
    "description": "print a message",
    "parameters": {"message": {"type": "string"}},
    "command": 'echo "$message"',
}


async def test_the_sources_are_combined_in_one_tool_set(toolset: Make, work: Path) -> None:
    (work / "a.txt").write_text("A\n")
    async with toolset(builtin=["Read"], commands=[SAY], mcp=[notes_server()]) as tools:
        assert isinstance(tools, ToolSet)
        names = [spec.name for spec in tools.list()]
        read = await tools.call("Read", {"path": "a.txt"})
        said = await tools.call("say", {"message": "hi"})
        added = await tools.call("notes_add", {"a": 1, "b": 2})
    assert names[:2] == ["Read", "say"] and "notes_add" in names
    assert (read, said, added) == (ToolResult("A\n"), ToolResult("hi\n"), ToolResult("3"))


async def test_an_unknown_tool_is_an_error_result_listing_the_tools(toolset: Make) -> None:
    tools = toolset(builtin=["Read", "Glob"])
    result = await tools.call("Delete", {"path": "x"})
    assert result == ToolResult('unknown tool "Delete" (the tools are: Read, Glob)', is_error=True)


async def test_arguments_that_are_not_an_object_are_an_error_result(toolset: Make) -> None:
    result = await toolset(builtin=["Read"]).call("Read", ["a.txt"])  # type: ignore[arg-type]
    assert result.is_error and "JSON object" in result.text


async def test_confirm_decides_which_calls_need_the_person(toolset: Make) -> None:
    tools = toolset(
        builtin=["Read", "Bash"],
        commands=[SAY],
        mcp=[notes_server("notes"), notes_server("other")],
        confirm=["Bash", "say", "notes", "other_add"],
    )
    asks = {
        name: tools.needs_confirmation(name)
        for name in ("Read", "Bash", "say", "notes_add", "notes_echo", "other_add", "other_echo")
    }
    assert asks == {
        "Read": False, "Bash": True, "say": True, "notes_add": True, "notes_echo": True,
        "other_add": True, "other_echo": False,
    }  # fmt: skip


def test_max_rounds_is_carried_with_a_default(toolset: Make) -> None:
    assert toolset(builtin=["Read"]).max_rounds == 20
    assert toolset(builtin=["Read"], max_rounds=5).max_rounds == 5


def test_an_invalid_block_is_refused_when_built(work: Path) -> None:
    with pytest.raises(ValidationError, match='did you mean "Grep"'):
        build_toolset({"builtin": ["grep"]}, cwd=work, env={})


async def test_closing_twice_is_harmless(toolset: Make) -> None:
    tools = toolset(mcp=[notes_server()])
    await tools.start()
    await tools.aclose()
    await tools.aclose()
    assert tools.list() == []
