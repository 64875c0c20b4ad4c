"""An agent CLI that never stops can't fill the disk or the memory: its tool_use events count
against the reply's bounds (`options.max_tool_calls`, `options.max_reply_bytes`), and the
stdout lines it prints that are not events are kept within the reply bound."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import FakeCli, run_claude, wait_until_gone

from awf_nb.engine.reply_limits import DEFAULT_MAX_TOOL_CALLS
from awf_nb.providers.cli.base import MAX_DIAGNOSTIC_LINES, DiagnosticLines


async def test_endless_tool_use_events_stop_at_max_tool_calls(
    fake_cli: FakeCli, tmp_path: Path
) -> None:
    """A CLI reporting 100,000 tool uses (60 MB of output): the turn ends at the bound,
    the transcript holds no more than the bound, and the CLI is stopped."""
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-tool.jsonl", "repeat": [1, 100_000]})
    result, store = await run_claude(fake_cli, tmp_path)
    assert result.status == "failed"
    assert (
        f"the reply asks for more than {DEFAULT_MAX_TOOL_CALLS} tool calls (options.max_tool_calls)"
    ) in result.error
    tools = [r for r in store.read_transcript(result.run_id) if r.get("role") == "tool"]
    assert len(tools) == DEFAULT_MAX_TOOL_CALLS
    assert wait_until_gone([fake_cli.records()[0]["pid"]]) == []


async def test_tool_uses_count_against_the_reply_bytes(fake_cli: FakeCli, tmp_path: Path) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-tool.jsonl", "repeat": [1, 1000]})
    result, _store = await run_claude(
        fake_cli, tmp_path, ", max_reply_bytes: 200, max_tool_calls: 5000"
    )
    assert result.status == "failed"
    assert "the reply is longer than 200 bytes (options.max_reply_bytes)" in result.error


def test_stdout_lines_that_are_not_events_are_kept_within_bounds() -> None:
    lines = DiagnosticLines(max_chars=10_000)
    for number in range(5000):
        lines.keep(f"{number:04} " + "x" * 995)  # 1,000 characters each
    assert lines.chars == sum(map(len, lines)) <= 10_000
    assert lines[-1].startswith("4999 ")  # the newest are kept
    lines.keep("y" * 50_000)  # one line longer than the bound: its start
    assert lines == ["y" * 10_000]
    many = DiagnosticLines(max_chars=1 << 30)
    for number in range(MAX_DIAGNOSTIC_LINES + 10):
        many.keep(str(number))
    assert len(many) == MAX_DIAGNOSTIC_LINES
    assert many[-1] == str(MAX_DIAGNOSTIC_LINES + 9)
