"""One line of an agent CLI's output (one JSON event) is bounded: 16 MiB by default,
`options.max_event_bytes` to raise it. A longer line is read past in pieces (never held
whole) and said in a notice; when the turn then has no result — the CLI's verdict was on
that line — the error names the bound, its value and how to raise it, instead of
whatever the CLI printed last ("claude: done (exit status 0)")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_helpers import SAMPLES, FakeCli, run_claude, wait_until_gone

from awf_nb.engine.ports import Final, Notice, ToolUse, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers.cli import base as base_module
from awf_nb.providers.cli.base import Command
from awf_nb.providers.cli.claude import ClaudeProvider
from tests.support import collect

MIB = 1024 * 1024


def claude_output(tmp_path: Path, *, tool_bytes: int = 0, result_bytes: int = 0) -> str:
    """claude-tool.jsonl with a Bash command of `tool_bytes` and a result of `result_bytes`."""
    lines = (SAMPLES / "claude-tool.jsonl").read_text().splitlines()
    if tool_bytes:
        event = json.loads(lines[1])
        event["message"]["content"][0]["input"]["command"] = "x" * tool_bytes
        lines[1] = json.dumps(event)
    if result_bytes:
        event = json.loads(lines[-1])
        event["result"] = "y" * result_bytes
        lines[-1] = json.dumps(event)
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def one_mib_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base_module, "STDOUT_LINE_LIMIT", MIB)


async def test_a_lost_result_names_the_event_line_bound(
    fake_cli: FakeCli, tmp_path: Path, one_mib_bound: None
) -> None:
    fake_cli.install("claude")
    # "done" on stderr: what the turn's error used to show as its cause.
    fake_cli.plan({"sample": claude_output(tmp_path, result_bytes=3_000_000), "stderr": "done\n"})
    result, _store = await run_claude(fake_cli, tmp_path)
    assert result.status == "failed"
    assert "claude: done" not in result.error
    assert "an output line of 3,0" in result.error
    assert f"over the bound of {MIB:,} bytes per event line" in result.error
    assert "raise the bound with options.max_event_bytes" in result.error
    assert "(exit status 0)" in result.error
    assert wait_until_gone([fake_cli.records()[0]["pid"]]) == []


async def test_options_max_event_bytes_raises_the_bound(
    fake_cli: FakeCli, tmp_path: Path, one_mib_bound: None
) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": claude_output(tmp_path, tool_bytes=3_000_000, result_bytes=3_000_000)})
    result, _store = await run_claude(fake_cli, tmp_path, f", max_event_bytes: {4 * MIB}")
    assert result.status == "completed", result.error
    assert result.steps["ask"].output == "y" * 3_000_000


async def test_a_skipped_tool_use_line_is_said_and_the_turn_goes_on(
    fake_cli: FakeCli, one_mib_bound: None
) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": claude_output(fake_cli.folder, tool_bytes=3_000_000)})
    turn = TurnRequest(prompt="RUN_TOOL please", working_dir=fake_cli.workdir, env=fake_cli.env)
    events = await collect(ClaudeProvider().stream(turn))
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert notices[0].startswith("claude: an output line of 3,0")
    assert f"over the bound of {MIB:,} bytes per event line" in notices[0]
    assert not [e for e in events if isinstance(e, ToolUse)]  # that event was the long line
    assert isinstance(events[-1], Final) and "FAKE-REPLY" in events[-1].text


async def test_an_over_long_line_is_dropped_whole() -> None:
    """Whatever its length against the reader's buffer, no piece of a line over the bound
    reaches the parser as a line of its own, and the lines around it are read as they are."""
    reader = asyncio.StreamReader(limit=1024)
    lines = [b"a" * 1024, b"b" * 1025, b"c" * 5000, b"{}", b"d" * 70_000, b"e" * 3000]
    reader.feed_data(b"\n".join(lines))  # the last line has no newline
    reader.feed_eof()
    run = base_module._Run(ClaudeProvider(), Command(["claude"]), {}, Path("."), line_limit=1024)
    read = [item async for item in run._stdout_lines(SimpleNamespace(stdout=reader))]  # type: ignore[arg-type]
    skipped = base_module.SkippedLine
    assert read == [
        "a" * 1024 + "\n",
        skipped(1025),
        skipped(5000),
        "{}\n",
        skipped(70_000),
        skipped(3000),
    ]
    assert run.skipped == [skipped(1025), skipped(5000), skipped(70_000), skipped(3000)]
    assert "4 output lines (the longest 70,000 bytes) were skipped" in run.skipped_summary()


async def test_max_event_bytes_is_checked(fake_cli: FakeCli) -> None:
    turn = TurnRequest(
        prompt="hi", working_dir=fake_cli.workdir, env=fake_cli.env, options={"max_event_bytes": 10}
    )
    with pytest.raises(ProviderError, match=r"options\.max_event_bytes must be"):
        await collect(ClaudeProvider().stream(turn))
