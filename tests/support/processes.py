"""Whether a process still runs, for tests that check nothing was left behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def process_alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie waiting for its parent to reap it counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    # The state is the first field after the command name, which is in parentheses and may
    # itself hold spaces or parentheses.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


MODEL_WORKER = "awf_nb.providers.local_worker"


def model_processes(parent: int) -> list[int]:
    """The pids of the model processes (the `local` provider's llama.cpp) that `parent`
    started and that still run."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and MODEL_WORKER.encode() in cmdline and process_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


# What a turn says when the model process segfaults during its reply.
MODEL_CRASHED = (
    "the local model's process died: signal 11 (segmentation fault) while generating; "
    "see `awf doctor`"
)


def crash_mid_reply(pid: int) -> None:
    """A native crash of the model process `pid` (SIGSEGV), held still first so that the
    reply it is writing cannot end before the signal lands."""
    os.kill(pid, signal.SIGSTOP)
    os.kill(pid, signal.SIGSEGV)
    os.kill(pid, signal.SIGCONT)
