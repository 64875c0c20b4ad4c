"""The real `awf` command line in a subprocess, for tests of what a person sees in a terminal.

- `run_awf(*args, cwd=...)`: runs `python -m awf_nb.cli ARGS` to its end and returns the
  `CompletedProcess`. The checkout's own code comes first on the import path, so the command
  runs what the test imports. At `timeout` (60 s unless a test gives another) the whole
  process group is killed, the command's own children too, and `subprocess.TimeoutExpired`
  is raised: a hung command fails its test at the deadline instead of blocking the suite.
- `spawn_awf(*args, storage=..., cwd=...)`: the same command left running (a `Popen` in its
  own session), for tests that interrupt or kill it.
- `only_run_id(storage)`: the id of the one run a store holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
AWF: list[str | bytes] = [sys.executable, "-m", "awf_nb.cli"]
DEFAULT_TIMEOUT = 60.0


def awf_environment(
    env: Mapping[str, str | None] | None = None,
    *,
    inherit: bool = True,
    import_first: Sequence[Path] = (),
) -> dict[str, str]:
    """The environment of an `awf` subprocess: this process's (or, with `inherit=False`,
    nothing), `import_first` then the checkout at the front of PYTHONPATH, then `env`
    (a value of None removes that variable)."""
    environment = dict(os.environ) if inherit else {}
    path = [*map(str, import_first), str(REPO_ROOT), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return environment


def run_awf(
    *args: str | bytes,
    cwd: Path,
    env: Mapping[str, str | None] | None = None,
    inherit_env: bool = True,
    import_first: Sequence[Path] = (),
    input: str | bytes | None = "",
    text: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> subprocess.CompletedProcess[Any]:
    """`awf ARGS` run in `cwd` to its end, its output captured (as text unless `text=False`).
    An argument may be bytes, for arguments that are not valid UTF-8.

    `input` is what the command reads on stdin ("" by default: an empty stdin, so a command
    that asks a person gets end-of-input at once; None leaves the test's stdin). `env`,
    `inherit_env` and `import_first` are those of `awf_environment`. At `timeout` seconds the
    command and every process it started in its group are killed and
    `subprocess.TimeoutExpired` is raised.
    """
    command = [*AWF, *args]
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=awf_environment(env, inherit=inherit_env, import_first=import_first),
        stdin=None if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
        start_new_session=True,  # its own process group, so the deadline reaches its children
    ) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            # Not `communicate()` again: a child in a session of its own could hold the pipes
            # open past the deadline.
            _kill_group(process)
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended between the deadline and now
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def spawn_awf(*args: str, storage: Path, cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    """`awf ARGS` started and left running in a session of its own, stdin, stdout and stderr
    piped (text), output unbuffered, the runs kept in `storage`."""
    env = awf_environment({"AWF_STORAGE": str(storage), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen(
        [*AWF, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        start_new_session=True,
        **kw,
    )


def only_run_id(storage: Path) -> str:
    """The id of the one run in `storage` (fails the test when there are none or several)."""
    runs = sorted(p.name for p in (storage / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


class Output:
    """A text stream of a running `awf` (`spawn_awf`'s stdout or stderr), read in a thread as
    it comes: `text` is everything so far, for a test that waits for what it shows."""

    def __init__(self, stream: Any) -> None:
        self.text = ""
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read(1), ""):
            self.text += chunk
