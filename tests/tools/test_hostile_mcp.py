"""MCP servers that misbehave — real processes (tests/tools/hostile_mcp_server.py) — can
neither hang a call, fill the disk or the memory, flood the logs, nor show a secret."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from awf_nb.errors import ExecutionError
from awf_nb.secrets import Masker
from awf_nb.tools import StepToolSet, build_toolset
from awf_nb.tools.mcp_client import MAX_LIST_PAGES, McpServerTools
from awf_nb.tools.mcp_stdio import STDERR_TAIL_BYTES
from tests.support.mcp_peer import SECRET
from tests.support.processes import process_alive

HOSTILE = Path(__file__).with_name("hostile_mcp_server.py")


def hostile(mode: str, arg: str = "", **fields: Any) -> dict[str, Any]:
    return {"name": "h", "command": sys.executable, "args": [str(HOSTILE), mode, arg], **fields}


def tools_of(work: Path, server: dict[str, Any], warnings: list[str], **config: Any) -> StepToolSet:
    return build_toolset(
        {"mcp": [server], **config},
        cwd=work,
        env={**os.environ, "LEAK": SECRET},
        masker=Masker([SECRET]),
        warn=warnings.append,
    )


def server_of(tools: StepToolSet) -> McpServerTools:
    return tools._started[0]


async def test_garbage_on_stdout_is_one_masked_warning_and_no_log(
    work: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    warnings: list[str] = []
    async with tools_of(work, hostile("garbage", "3000"), warnings) as tools:
        result = await tools.call("h_echo", {"text": "still works"})
        assert server_of(tools).transport.garbage_lines == 3000
    assert result.text == "still works"
    assert len(warnings) == 1
    assert "not an MCP message" in warnings[0]
    assert "***" in warnings[0] and SECRET not in warnings[0]
    out, err = capfd.readouterr()
    assert SECRET not in out + err + caplog.text
    # Nothing per line: no traceback for each of the 3,000 lines.
    assert "Traceback (most recent call last)" not in err + caplog.text


async def test_a_call_the_server_never_answers_times_out(work: Path) -> None:
    warnings: list[str] = []
    async with tools_of(work, hostile("silent-call"), warnings, timeout="1s") as tools:
        result = await tools.call("h_echo", {"text": "x"})
        assert result.is_error
        assert "did not answer echo within 1 s (tools.timeout)" in result.text
        # The server is still there for the next call (it answers pings).
        assert server_of(tools)._session is not None


async def test_the_servers_own_timeout_wins_over_the_blocks(work: Path) -> None:
    server = hostile("silent-call", timeout=0.5)
    async with tools_of(work, server, [], timeout="1m") as tools:
        result = await tools.call("h_echo", {"text": "x"})
    assert "within 0.5 s (its timeout)" in result.text


async def test_stderr_keeps_only_a_bounded_tail_and_no_file(work: Path) -> None:
    flood_mib = 40
    before = set(open_file_names())  # pytest's own captures are deleted files too
    async with tools_of(work, hostile("stderr-flood", str(flood_mib)), []) as tools:
        transport = server_of(tools).transport
        assert (await tools.call("h_echo", {"text": "ok"})).text == "ok"
        open_files = open_file_names()
    assert transport.stderr_bytes > flood_mib * 1024 * 1024
    tail = transport.stderr_tail()
    assert tail.endswith("the end of the flood\n")
    assert len(tail.encode()) <= STDERR_TAIL_BYTES
    # Before: stderr went to a deleted temporary file that grew without a limit.
    assert not [name for name in set(open_files) - before if name.endswith("(deleted)")]


def open_file_names() -> list[str]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return names


async def test_endless_tool_list_pagination_is_refused(work: Path) -> None:
    with pytest.raises(ExecutionError) as caught:
        async with tools_of(work, hostile("endless-pages"), []):
            pass
    assert f"more than {MAX_LIST_PAGES} pages" in str(caught.value)
    assert 'MCP server "h"' in str(caught.value)


async def test_a_result_over_max_message_bytes_fails_the_call_at_once(work: Path) -> None:
    warnings: list[str] = []
    server = hostile("huge-result", "3", max_message_bytes=1024 * 1024)
    # No timeout needed: the call fails as soon as the line is seen to be too long.
    async with tools_of(work, server, warnings, timeout="5m") as tools:
        result = await tools.call("h_echo", {"text": "x"})
    assert result.is_error
    assert "longer than 1048576 bytes (max_message_bytes)" in result.text
    assert len(warnings) == 1 and "max_message_bytes" in warnings[0]


async def test_a_large_result_under_the_limit_comes_back_capped(work: Path) -> None:
    # 24 MiB in one line: read in linear time (the SDK's reader re-split the whole line
    # on every read: quadratic), then capped for the model.
    server = hostile("huge-result", "24", max_message_bytes=32 * 1024 * 1024)
    async with tools_of(work, server, [], timeout="2m") as tools:
        result = await tools.call("h_echo", {"text": "x"})
    assert not result.is_error
    assert "characters omitted" in result.text


async def test_an_endless_line_before_the_handshake_is_dropped(work: Path) -> None:
    warnings: list[str] = []
    server = hostile("long-line", "20", max_message_bytes=1024 * 1024)
    async with tools_of(work, server, warnings) as tools:
        assert (await tools.call("h_echo", {"text": "fine"})).text == "fine"
        assert server_of(tools).transport.oversized_messages == 1
    assert "longer than 1048576 bytes" in warnings[0]


async def test_what_the_server_leaves_running_stops_with_it(work: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    async with tools_of(work, hostile("child", str(pidfile)), []):
        child = int(pidfile.read_text())
        assert process_alive(child)
    assert not process_alive(child)
