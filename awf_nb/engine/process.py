"""Running shell commands for command steps and hooks, in their own process group.

The command runs as `$SHELL -c CMD` (fallback `/bin/sh`) in a new session, so a timeout or
a cancel can kill the whole group — including grandchildren such as `sleep` in a pipeline —
rather than only the shell. stdout/stderr are read as they arrive and handed to callbacks,
so a frontend can show a long build's output live.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KILL_GRACE_SECONDS = 2.0


@dataclass(slots=True)
class ProcessResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False


def default_shell() -> str:
    shell = os.environ.get("SHELL") or "/bin/sh"
    return shell if Path(shell).exists() else "/bin/sh"


async def kill_group(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM the process group, then SIGKILL it if it has not exited after `grace`."""
    if proc.returncode is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers left by an exited shell
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), wait)
            break
        except TimeoutError:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _pump(
    stream: asyncio.StreamReader | None,
    sink: list[str],
    on_chunk: Callable[[str], None] | None,
) -> None:
    if stream is None:
        return
    decoder = _Utf8Decoder()
    while chunk := await stream.read(65536):
        text = decoder.decode(chunk)
        if text:
            sink.append(text)
            if on_chunk:
                on_chunk(text)
    if tail := decoder.decode(b"", final=True):
        sink.append(tail)
        if on_chunk:
            on_chunk(tail)


class _Utf8Decoder:
    """Incremental UTF-8 decoding: a character split across two reads is not mangled."""

    def __init__(self) -> None:
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes, final: bool = False) -> str:
        return self._decoder.decode(data, final)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None = None,
    on_stdout: Callable[[str], None] | None = None,
    on_stderr: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ProcessResult:
    """Run `argv` in its own process group; kill the group on timeout or cancellation.

    `on_start(pgid)` is called once the group exists, so the caller can record it (a run
    killed with -9 cannot kill it; `awf resume` can). The child also gets the parent-death
    signal where the platform has it (Linux): if awf dies, the command dies with it.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    if on_start is not None:
        on_start(proc.pid)  # a new session: the group id is the child's pid
    out: list[str] = []
    err: list[str] = []
    pumps = asyncio.gather(_pump(proc.stdout, out, on_stdout), _pump(proc.stderr, err, on_stderr))
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(pumps), timeout)
        await proc.wait()
    except TimeoutError:
        timed_out = True
        await kill_group(proc)
    except asyncio.CancelledError:
        await kill_group(proc)
        pumps.cancel()
        raise
    finally:
        if proc.returncode is None:
            await kill_group(proc)
        # A background grandchild may keep the pipes open after the shell exits; the group
        # kill above closes them, so the pumps finish promptly.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(pumps, 5.0)
    code = proc.returncode if proc.returncode is not None else -1
    return ProcessResult("".join(out), "".join(err), code, timed_out)


def _load_prctl() -> Callable[..., int] | None:
    # Resolved once, in the parent: the child (between fork and exec) only makes the call.
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL it when the parent (awf) dies (Linux only)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (zombies waiting to be reaped by
    whoever adopted them do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def kill_leftover_group(pgid: int, grace: float = 2.0) -> bool:
    """SIGTERM the group, then SIGKILL what is left after `grace` s; True if one was there."""
    if not group_alive(pgid):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    return True


async def run_shell(command: str, **kwargs: object) -> ProcessResult:
    """`$SHELL -c command` with `run_process` semantics."""
    return await run_process([default_shell(), "-c", command], **kwargs)  # type: ignore[arg-type]
