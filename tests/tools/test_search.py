"""The Glob and Grep built-ins: what they find, what they leave out, how they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.engine.ports import ToolResult
from awf_nb.secrets import Masker
from awf_nb.tools.builtins import BuiltinTools
from awf_nb.tools.search import path_matches
from tests.support.mcp_peer import SECRET


@pytest.fixture
def tools(work: Path, masker: Masker) -> BuiltinTools:
    (work / "src" / "pkg").mkdir(parents=True)
    (work / "src" / "main.py").write_text("import pkg\n# TODO: tidy\n")
    (work / "src" / "pkg" / "util.py").write_text("def helper():\n    return 1  # todo later\n")
    (work / "README.md").write_text("# Demo\nTODO write docs\n")
    (work / ".git").mkdir()
    (work / ".git" / "config.py").write_text("TODO inside .git\n")
    (work / "data.bin").write_bytes(b"TODO\0binary")
    return BuiltinTools(["Glob", "Grep"], cwd=work, env={}, masker=masker)


async def glob(tools: BuiltinTools, **arguments: object) -> ToolResult:
    return await tools.call("Glob", dict(arguments))


async def grep(tools: BuiltinTools, **arguments: object) -> ToolResult:
    return await tools.call("Grep", dict(arguments))


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("a.py", "*.py", True),
        ("src/a.py", "*.py", False),
        ("src/a.py", "**/*.py", True),
        ("a.py", "**/*.py", True),
        ("src/x/y/a.py", "src/**/a.py", True),
        (".hidden/a.py", "**/*.py", False),
        (".hidden/a.py", ".hidden/*.py", True),
        ("src/.env", "src/*", False),
    ],
)
def test_glob_pattern_semantics(path: str, pattern: str, expected: bool) -> None:
    assert path_matches(tuple(path.split("/")), tuple(pattern.split("/"))) is expected


async def test_glob_finds_files_at_any_depth_relative_to_the_working_directory(
    tools: BuiltinTools,
) -> None:
    result = await glob(tools, pattern="**/*.py")
    assert result == ToolResult("src/main.py\nsrc/pkg/util.py")


async def test_glob_lists_folders_with_a_slash(tools: BuiltinTools) -> None:
    assert (await glob(tools, pattern="src/*")).text == "src/main.py\nsrc/pkg/"


async def test_glob_from_a_sub_folder(tools: BuiltinTools) -> None:
    assert (await glob(tools, pattern="*.py", cwd="src/pkg")).text == "src/pkg/util.py"


async def test_glob_leaves_hidden_folders_out_unless_named(tools: BuiltinTools) -> None:
    assert ".git" not in (await glob(tools, pattern="**/*")).text
    assert (await glob(tools, pattern=".git/*.py")).text == ".git/config.py"


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "src/../../*"])
async def test_glob_refuses_patterns_leaving_the_working_directory(
    tools: BuiltinTools, pattern: str
) -> None:
    result = await glob(tools, pattern=pattern)
    assert result.is_error


async def test_glob_does_not_follow_a_symlinked_folder_out(tools: BuiltinTools, work: Path) -> None:
    (work / "escape").symlink_to(work.parent / "outside", target_is_directory=True)
    result = await glob(tools, pattern="**/*.txt")
    assert "secret.txt" not in result.text


async def test_glob_without_matches_says_so(tools: BuiltinTools) -> None:
    assert await glob(tools, pattern="*.rs") == ToolResult("(no matches)")


async def test_grep_shows_path_line_number_and_text(tools: BuiltinTools) -> None:
    result = await grep(tools, pattern="TODO")
    assert result == ToolResult("README.md:2:TODO write docs\nsrc/main.py:2:# TODO: tidy")


async def test_grep_case_insensitive_and_glob_filter(tools: BuiltinTools) -> None:
    result = await grep(tools, pattern="todo", case_insensitive=True, glob="*.py")
    assert result.text == "src/main.py:2:# TODO: tidy\nsrc/pkg/util.py:2:    return 1  # todo later"
    claude_style = await grep(tools, pattern="todo", glob="*.py", **{"-i": True})
    assert claude_style == result


async def test_grep_files_with_matches_and_count(tools: BuiltinTools) -> None:
    files = await grep(tools, pattern="(?i)todo", output_mode="files_with_matches")
    count = await grep(tools, pattern="(?i)todo", output_mode="count")
    assert files.text == "README.md\nsrc/main.py\nsrc/pkg/util.py"
    assert count.text == "3 matching lines in 3 files"


async def test_grep_in_one_file(tools: BuiltinTools) -> None:
    assert (await grep(tools, pattern="import", path="src/main.py")).text == (
        "src/main.py:1:import pkg"
    )


async def test_grep_skips_binary_files_and_hidden_folders(tools: BuiltinTools) -> None:
    text = (await grep(tools, pattern="TODO")).text
    assert "data.bin" not in text and ".git" not in text


async def test_grep_skips_files_linked_from_outside(tools: BuiltinTools, work: Path) -> None:
    (work / "linked.txt").symlink_to(work.parent / "outside" / "secret.txt")
    assert "outside data" not in (await grep(tools, pattern="outside")).text


async def test_grep_refuses_a_path_outside(tools: BuiltinTools) -> None:
    result = await grep(tools, pattern="x", path="../outside")
    assert result.is_error and "outside the working directory" in result.text


async def test_grep_patterns_are_re2_so_backtracking_constructs_are_refused(
    tools: BuiltinTools,
) -> None:
    # A back-reference needs a backtracking engine; RE2 (linear time) has none.
    result = await grep(tools, pattern=r"(a)\1")
    assert result.is_error and "invalid pattern" in result.text


async def test_grep_masks_secrets_in_matching_lines(tools: BuiltinTools, work: Path) -> None:
    (work / "config.txt").write_text(f"token = {SECRET}\n")
    assert (await grep(tools, pattern="token")).text == "config.txt:1:token = ***"
