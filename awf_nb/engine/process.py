"""The one process supervisor: every child a run starts runs in a process group it owns.

Command steps, hooks, operations (the github ones' `git`), Bash and command tools and the
agent-CLI providers all start their children through `ProcessGroup`. Four programs start
elsewhere: the person's `$EDITOR` at a breakpoint (frontends/terminal/debugger.py: it needs
the terminal, so it runs in awf's own foreground group, bounded by a timeout); an MCP
server, which the MCP SDK that speaks to it starts (tools/mcp_client.py);
Graphviz's `dot` when a diagram is drawn as an image (diagram/, which draws outside any
run and does not depend on the engine: one program, no children, bounded by a timeout);
and the `local` provider's model process (providers/local_process.py), which serves every
run and event loop of awf's process and outlives each run, so no run's group can own it.
A child starts in a new session, so it leads its own process group,
and everything it starts (a pipeline's `sleep`, a CLI's tool subprocess) is stopped with it:

- `stop()` sends SIGTERM to the whole group, gives it a grace period, then SIGKILLs what is
  left and reaps the leader — in a task of its own, so a second cancellation of the caller
  cannot leave the group half-stopped;
- once the leader has exited, whatever it left behind gets `eof_grace` seconds to close
  the output pipes; then it is stopped too, so `cmd & echo hi` ends shortly after the
  shell does instead of when the background job does. (A job that redirected its output
  elsewhere holds no pipe and is left alone; `awf resume` stops it if a run was killed.)
- On Linux the child also gets the parent-death signal: if awf dies, its children die too.
  (Only the child itself: what *it* started lives on. So the groups a step starts are
  recorded — see "Who owns a child" — and `awf resume` stops what a killed run left.)
- A child has no controlling terminal (its own session) and reads /dev/null unless its
  caller pipes its stdin: nothing a run starts can prompt the person at the keyboard — a
  workflow or an agent a model starts through a tool (`awf run`, an agent CLI in a Bash
  call) runs headless.

**Contained groups.** `start(contain=True)` (Bash tool calls, command tools, MCP servers,
agent CLIs) marks the child's environment with a tag (`AWF_PROCESS_TAG`) that everything it
starts inherits. `close()` then stops the whole group, even when the leader has exited, and
also every process still carrying the tag: a `setsid` or `nohup … &` job that left the
group is found by its tag (in /proc) and stopped too. A process that clears its
environment (`env -i`, a daemon that re-executes itself without it) is not found: there is
no per-call cgroup to hold it. Command *steps* are not contained: a background job a
command leaves running (`server &`) may keep running for later steps.

**Who owns a child.** `watching(watcher)` makes `watcher` hear of every group started in
the current context (an asyncio task and the tasks it creates) and of its end: the agent
step records them in its state this way, for `awf resume` (`kill_leftover_group`).

**How many at once.** An eval bounds its tool processes (`engine/tool_slots.py`).

The leader's exit is an event (the event loop's child watcher); only the rest of the group,
which has no exit events, is polled, and only while it is being stopped.

`run_process`/`run_shell` are the one-shot form command steps and hooks use: output read
as it arrives and handed to callbacks, so a frontend can show a long build's output live;
of each stream the result keeps a bounded beginning and end (`keep`, see kept_output.py),
so a command that prints without end costs no more memory than that.

A child's output goes to pipes, and what it prints ends up in prompts, state files and
saved notebooks: the variables that force colours on a pipe (`FORCE_COLOR`, which a
Jupyter kernel sets, `CLICOLOR_FORCE`, `PY_COLORS`) are left out of every child's
environment (`child_env`), so programs write plain text as they do to any pipe.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import ctypes
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from awf_nb.engine.kept_output import KEPT_OUTPUT_BYTES, KeptOutput

KILL_GRACE_SECONDS = 2.0  # from SIGTERM to SIGKILL
EOF_GRACE_SECONDS = 2.0  # from the leader's exit to stopping what still holds its pipes
REAP_TIMEOUT_SECONDS = 10.0  # SIGKILL cannot be ignored: this only guards a lost exit event
GROUP_POLL_SECONDS = 0.05
STREAM_LIMIT = 64 * 1024  # asyncio's default line limit
TAG_VARIABLE = "AWF_PROCESS_TAG"
SWEEP_ROUNDS = 5  # a process may fork while it is being stopped: look again, this often
# Variables that make programs write colour codes to a pipe (see the module docstring).
FORCED_COLOR_VARIABLES = ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS")


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a child gets: `env` without the variables that force colours."""
    return {k: v for k, v in env.items() if k not in FORCED_COLOR_VARIABLES}


@dataclass(slots=True)
class ProcessResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    over_limit: bool = False  # printed more than `output_limit` bytes: stopped
    stdout_cut: int = 0  # bytes of stdout between its kept beginning and end (`keep`)
    stderr_cut: int = 0


def default_shell() -> str:
    shell = os.environ.get("SHELL") or "/bin/sh"
    return shell if Path(shell).exists() else "/bin/sh"


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol, plus a future set the moment the leader exits.

    (`Process.wait()` does not do: from Python 3.12 it also waits for the pipes to close,
    which a background grandchild can hold open for as long as it likes.)
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.leader_exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.leader_exited.done():
            self.leader_exited.set_result(None)


@dataclass(frozen=True, slots=True)
class ChildGroup:
    """A started group as a state file records it: enough to stop what is left of it."""

    pgid: int
    tag: str = ""  # the environment tag of a contained group ("" for others)


class ProcessWatcher(Protocol):
    """Hears of the groups started in its context (see `watching`)."""

    def started(self, group: ChildGroup) -> None: ...

    def ended(self, group: ChildGroup) -> None: ...


_watcher: contextvars.ContextVar[ProcessWatcher | None] = contextvars.ContextVar(
    "awf_process_watcher", default=None
)


@contextlib.contextmanager
def watching(watcher: ProcessWatcher) -> Iterator[None]:
    """Tell `watcher` of every group started in this context until the block ends."""
    token = _watcher.set(watcher)
    try:
        yield
    finally:
        _watcher.reset(token)


# Strong references to stop tasks that outlive a cancelled caller.
_stopping: set[asyncio.Task[None]] = set()


class ProcessGroup:
    """A running child that leads its own process group, and the means to end it."""

    def __init__(
        self, process: asyncio.subprocess.Process, protocol: _Protocol, tag: str = ""
    ) -> None:
        self.process = process
        self.pgid = process.pid  # a new session: the group id is the leader's pid
        self.tag = tag
        self._leader_exited = protocol.leader_exited
        self._stop_task: asyncio.Task[None] | None = None
        self._leftovers_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._watcher: ProcessWatcher | None = None

    @property
    def record(self) -> ChildGroup:
        return ChildGroup(self.pgid, self.tag)

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        stdin: bool = False,
        limit: int = STREAM_LIMIT,
        eof_grace: float = EOF_GRACE_SECONDS,
        kill_grace: float = KILL_GRACE_SECONDS,
        contain: bool = False,
    ) -> ProcessGroup:
        """Start `argv` (no shell) with piped stdout/stderr (and stdin if asked).

        `limit` bounds one line read with `readline()`; `eof_grace` and `kill_grace` are
        the module's two grace periods for this group; `contain`: nothing it starts may
        outlive `close()` (see the module's docstring). Raises `OSError` when it cannot
        start (an argument or a variable holding a NUL byte included).
        """
        if problem := _unstartable(argv, env):
            raise OSError(problem)
        loop = asyncio.get_running_loop()
        pipe = asyncio.subprocess.PIPE
        tag = secrets.token_hex(12) if contain else ""
        if tag:
            env = {**env, TAG_VARIABLE: tag}
        spawn = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _Protocol(limit, loop),
                *argv,
                stdin=pipe if stdin else asyncio.subprocess.DEVNULL,
                stdout=pipe,
                stderr=pipe,
                cwd=str(cwd),
                env=child_env(env),
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        )
        try:
            transport, protocol = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            # Cancelled while the child starts: it already runs (and may have started
            # others), and asyncio's own clean-up would wait for everything holding its
            # pipes. Let the start finish and stop the whole group instead.
            stopping = asyncio.ensure_future(_stop_spawned(spawn, loop))
            _stopping.add(stopping)
            stopping.add_done_callback(_stopping.discard)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(stopping)
            raise
        group = cls(asyncio.subprocess.Process(transport, protocol, loop), protocol, tag)
        protocol.leader_exited.add_done_callback(
            lambda _: group._stop_leftovers_later(loop, eof_grace, kill_grace)
        )
        watcher = _watcher.get()
        if watcher is not None:
            group._watcher = watcher
            watcher.started(group.record)
        return group

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def leader_exit(self) -> int:
        """The leader's exit status, as soon as it has exited (open pipes do not matter)."""
        await asyncio.shield(self._leader_exited)
        assert self.process.returncode is not None
        return self.process.returncode

    async def stop(self, grace: float = KILL_GRACE_SECONDS) -> None:
        """SIGTERM the group, SIGKILL what is left after `grace` seconds, reap the leader."""
        await asyncio.shield(self._begin_stop(grace))

    async def close(self, grace: float = KILL_GRACE_SECONDS) -> None:
        """The caller is done with the child: stop it if the leader still runs.

        What the leader left running is no longer stopped after `eof_grace` either: the
        caller read the output to its end, so nothing holds the pipes. A contained group
        is stopped whole instead, with every process that carries its tag.
        """
        self._closed = True
        if self._leftovers_timer is not None:
            self._leftovers_timer.cancel()
        try:
            if self.tag:
                if self.process.returncode is None or group_alive(self.pgid):
                    if self._stop_task is not None and self._stop_task.done():
                        self._stop_task = None  # an earlier stop ended: this is another
                    await self.stop(grace)
                await asyncio.shield(asyncio.to_thread(sweep_tag, self.tag, grace))
            elif self.process.returncode is None:
                await self.stop(grace)
        finally:
            watcher, self._watcher = self._watcher, None
            if watcher is not None:
                watcher.ended(self.record)

    def _begin_stop(self, grace: float) -> asyncio.Task[None]:
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(grace))
            _stopping.add(self._stop_task)
            self._stop_task.add_done_callback(_stopping.discard)
        return self._stop_task

    def _stop_leftovers_later(
        self, loop: asyncio.AbstractEventLoop, eof_grace: float, kill_grace: float
    ) -> None:
        """Once the leader has exited: stop what it left running after `eof_grace`."""
        if not self._closed:
            self._leftovers_timer = loop.call_later(eof_grace, self._begin_stop, kill_grace)

    async def _stop(self, grace: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        signal_group(self.pgid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._leader_exited), grace)
        # The leader may obey at once while its children still clean up: wait for the group.
        while loop.time() < deadline and group_alive(self.pgid):
            await asyncio.sleep(GROUP_POLL_SECONDS)
        signal_group(self.pgid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._leader_exited), REAP_TIMEOUT_SECONDS)


async def _stop_spawned(
    spawn: asyncio.Future[tuple[asyncio.SubprocessTransport, _Protocol]],
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Stop the group of a child whose start was cancelled, once it has started."""
    try:
        transport, protocol = await spawn
    except Exception:  # it did not start after all
        return
    group = ProcessGroup(asyncio.subprocess.Process(transport, protocol, loop), protocol)
    group._closed = True  # no leftovers timer: it is stopped right now
    await group.stop()
    transport.close()


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None = None,
    on_stdout: Callable[[str], None] | None = None,
    on_stderr: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    stdin: bytes | None = None,
    output_limit: int | None = None,
    keep: int = KEPT_OUTPUT_BYTES,
    around_cut: Callable[[str, str], tuple[str, str]] | None = None,
    contain: bool = False,
) -> ProcessResult:
    """Run `argv` in its own process group to the end; stop the group on timeout or cancel.

    `on_start(pgid)` is called once the group exists, so the caller can record it (a run
    killed with -9 cannot stop it; `awf resume` can). `stdin`: written to the child, then
    closed (None: /dev/null). `output_limit`: past that many bytes of stdout and stderr
    together the group is stopped and the result says `over_limit`. `keep`: how many bytes
    of each stream the result holds — its beginning and end; the callbacks see everything
    (`kept_output.py`); `around_cut` trims the text beside a cut (the run's
    `Masker.around_cut`). `contain`: nothing it started runs on once it has ended (see
    `ProcessGroup.start`).
    """
    group = await ProcessGroup.start(
        argv, cwd=cwd, env=env, stdin=stdin is not None, contain=contain
    )
    if on_start is not None:
        on_start(group.pgid)
    out, err = KeptOutput(keep), KeptOutput(keep)
    over = asyncio.get_running_loop().create_future() if output_limit is not None else None
    size = [0]

    def counted(callback: Callable[[str], None] | None) -> Callable[[str], None] | None:
        if over is None:
            return callback

        def count(text: str) -> None:
            size[0] += len(text.encode())
            if size[0] > output_limit and not over.done():  # type: ignore[operator]
                over.set_result(None)
            if callback is not None:
                callback(text)

        return count

    pumps = asyncio.gather(
        _pump(group.process.stdout, out, counted(on_stdout)),
        _pump(group.process.stderr, err, counted(on_stderr)),
    )
    feeder = asyncio.ensure_future(_feed(group.process, stdin)) if stdin is not None else None
    timed_out = over_limit = False
    try:
        if over is None:
            await asyncio.wait_for(asyncio.shield(pumps), timeout)
        else:
            done, _ = await asyncio.wait(
                [asyncio.shield(pumps), over], timeout=timeout, return_when="FIRST_COMPLETED"
            )
            if not done:
                raise TimeoutError
            if over in done:
                over_limit = True
                await group.stop()
                raise _OverLimit
        code = await group.leader_exit()
    except _OverLimit:
        code = group.returncode if group.returncode is not None else -1
    except TimeoutError:
        timed_out = True
        await group.stop()
    except asyncio.CancelledError:
        await group.stop()
        pumps.cancel()
        raise
    finally:
        await group.close()
        if feeder is not None:
            feeder.cancel()
        # Stopping the group closed the pipes: the pumps finish promptly.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(pumps, 5.0)
    if timed_out:
        code = group.returncode if group.returncode is not None else -1
    (stdout, stdout_cut), (stderr, stderr_cut) = out.finish(around_cut), err.finish(around_cut)
    return ProcessResult(stdout, stderr, code, timed_out, over_limit, stdout_cut, stderr_cut)


class _OverLimit(Exception):
    pass


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    """Write `data` to the child's stdin, then close it (a child that stops reading early
    is no error: its exit status tells)."""
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(OSError):
            process.stdin.close()


async def run_shell(command: str, **kwargs: object) -> ProcessResult:
    """`$SHELL -c command` with `run_process` semantics."""
    return await run_process([default_shell(), "-c", command], **kwargs)  # type: ignore[arg-type]


async def _pump(
    stream: asyncio.StreamReader | None,
    kept: KeptOutput,
    on_chunk: Callable[[str], None] | None,
) -> None:
    if stream is None:
        return
    # Incremental: a character split across two reads is not mangled.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        chunk = await stream.read(65536)
        kept.add(chunk)
        if on_chunk and (text := decoder.decode(chunk, final=not chunk)):
            on_chunk(text)
        if not chunk:
            return


def _unstartable(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """Why no system could start `argv` with `env` ("" when it can). A NUL byte ends a C
    string: an argument or a variable holding one (a model's reply, a file or an input put
    into a command by a template) cannot be passed, and Python would raise a bare
    ValueError deep in the start."""
    if any("\0" in arg for arg in argv):
        return (
            "its command line holds a NUL byte, which no command can be given (a text put "
            "into it, such as a reply or a file, had one)"
        )
    for name, value in env.items():
        if "\0" in name or "\0" in value:
            shown = name.replace("\0", "\\0")
            return (
                f"the environment variable {shown} holds a NUL byte, which no command can be given"
            )
    return ""


def signal_group(pgid: int, signum: signal.Signals) -> None:
    """Send `signum` to group `pgid`, if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


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


def kill_leftover_group(pgid: int, grace: float = KILL_GRACE_SECONDS, tag: str = "") -> bool:
    """Stop a group a killed run left behind (no event loop: called before a resume), and
    for a contained one every process carrying its `tag`.

    SIGTERM, then SIGKILL what is left after `grace` s; True if anything was there.
    """
    found = False
    if pgid and group_alive(pgid):
        found = True
        signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and group_alive(pgid):
            time.sleep(GROUP_POLL_SECONDS)
        signal_group(pgid, signal.SIGKILL)
    if tag:
        found = sweep_tag(tag, grace) or found
    return found


def tagged_processes(tag: str) -> list[int]:
    """The processes (of this user) whose environment carries `tag` (Linux; else none)."""
    proc = Path("/proc")
    if not tag or not proc.is_dir():
        return []
    marker = f"{TAG_VARIABLE}={tag}".encode()
    own = os.getpid()
    found = []
    for entry in os.scandir(proc):
        name = entry.name
        if not name.isdigit() or int(name) == own:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone, or another user's
            continue
        if marker in environ:
            found.append(int(name))
    return found


def sweep_tag(tag: str, grace: float = KILL_GRACE_SECONDS) -> bool:
    """Stop every process carrying `tag`: SIGTERM, SIGKILL after `grace` s; True if any.

    Blocking (it polls /proc): run it in a thread from the event loop."""
    found = False
    for _ in range(SWEEP_ROUNDS):
        pids = [pid for pid in tagged_processes(tag) if _running(pid)]
        if not pids:
            return found
        found = True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_running(pid) for pid in pids):
            time.sleep(GROUP_POLL_SECONDS)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return found


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie is done)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return bool(fields) and fields[0] not in (b"Z", b"X")


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
