"""The real `awf` command line in a pseudo-terminal (pexpect), for the tests of what a
person typing in a terminal sees: `spawn` starts it, `transcript` is all it showed."""

from __future__ import annotations

import io
from pathlib import Path

import pexpect

from tests.support.cli import AWF, awf_environment


def spawn(tmp_path: Path, storage: Path, *args: str) -> pexpect.spawn:
    """`awf ARGS` started in `tmp_path` on a 40x200 pseudo-terminal, the runs kept in
    `storage`; each expect waits 30 s at most."""
    env = awf_environment({"AWF_STORAGE": str(storage), "NO_COLOR": "1", "TERM": "xterm"})
    child = pexpect.spawn(
        AWF[0],
        AWF[1:] + list(args),
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    # Everything read from the terminal: `before` after expect(EOF) only holds what came
    # after the last match, so checks over the whole session read this instead.
    child.logfile_read = io.StringIO()
    return child


def transcript(child: pexpect.spawn) -> str:
    """Everything the terminal showed since `spawn`."""
    return child.logfile_read.getvalue()
