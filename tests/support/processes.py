"""Whether a process still runs, for tests that check nothing was left behind."""

from __future__ import annotations

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
