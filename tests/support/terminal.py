"""The real `awf` command line in a pseudo-terminal (pexpect), for the tests of what a
person typing in a terminal sees: `spawn` starts it, `transcript` is all it showed."""

from __future__ import annotations

import io
from pathlib import Path

import pexpect

from tests.support.cli import AWF, awf_environment


def spawn(
    tmp_path: Path,
    storage: Path,
    *args: str,
    color: bool = False,
    dimensions: tuple[int, int] = (40, 200),
) -> pexpect.spawn:
    """`awf ARGS` started in `tmp_path` on a pseudo-terminal of `dimensions` (rows,
    columns), in colour or not (NO_COLOR), the runs kept in `storage`; each expect waits
    30 s at most."""
    no_color = None if color else "1"
    env = awf_environment({"AWF_STORAGE": str(storage), "NO_COLOR": no_color, "TERM": "xterm"})
    child = pexpect.spawn(
        AWF[0],
        AWF[1:] + list(args),
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=dimensions,
    )
    # Everything read from the terminal: `before` after expect(EOF) only holds what came
    # after the last match, so checks over the whole session read this instead.
    child.logfile_read = io.StringIO()
    return child


def transcript(child: pexpect.spawn) -> str:
    """Everything the terminal showed since `spawn`."""
    return child.logfile_read.getvalue()
