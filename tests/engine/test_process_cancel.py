"""The process supervisor when its caller is cancelled while the child is still starting."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from awf_nb.engine.process import group_alive, kill_leftover_group, run_process
from tests.support.waiting import HANG_GUARD_SECONDS, wait_until


def _pid_running(token: str) -> int:
    """The pid of the process whose command line holds `token`, 0 if none yet."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    return 0


def _group_size(pgid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            count += fields[2] == str(pgid) and fields[0] not in ("Z", "X")
    return count


async def test_cancelling_while_the_child_starts_stops_its_whole_group(tmp_path: Path) -> None:
    token = f"awf-start-{uuid.uuid4().hex}"
    task = asyncio.create_task(
        run_process(["sh", "-c", "sleep 600 & wait", token], cwd=tmp_path, env=dict(os.environ))
    )
    leader = 0
    try:
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while not (leader := _pid_running(token)):
                await asyncio.sleep(0)  # one loop step at a time: the start is in progress
        # The loop is blocked while the shell starts its background job, so the start
        # (asyncio connecting the pipes) is still under way when the cancellation lands.
        wait_until(lambda: _group_size(leader) >= 2, "the shell to start its background job")
        task.cancel()
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert not group_alive(leader)
    finally:
        if leader:
            kill_leftover_group(leader, grace=0.1)
