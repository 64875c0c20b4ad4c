"""awf's side of the model process: start it when first needed, talk to it, outlive it.

The `local` provider runs llama.cpp in a child process (local_worker.py), one per awf
process: every run, eval and notebook cell of a kernel or CLI shares it, so the model is
loaded once. This module owns that child:

- it starts lazily, on the first turn, with the same Python and the same awf-nb as awf;
  its environment holds no secret-named variable (the model needs none);
- a reader thread hands each reply to the turn it belongs to, on that turn's own event
  loop (`loop.call_soon_threadsafe`): the process is shared by event loops (a CLI run, a
  kernel's loop, `awf_nb.run`'s), so it is a plain `subprocess.Popen`, not an asyncio one;
- when the process dies (a crash of native code, an out-of-memory kill, a kill by hand),
  every turn in flight fails with the way it died — "the local model's process died:
  signal 11 (segmentation fault) while generating" — and the next turn starts a new one;
- a turn that was cancelled and does not end within `CANCEL_GRACE_SECONDS` means the
  process hangs: it is killed, and the next turn starts a new one;
- it stops when awf exits: at a normal exit awf closes the pipe and reaps it; after a
  kill -9 the closed pipe (and a watchdog on its parent's pid) makes it exit by itself.

Why not the engine's process supervisor (engine/process.py): its process groups belong to
one run on one event loop and end with it; this process serves every run of the process
and outlives each.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from awf_nb.engine.ports import ProviderEvent
from awf_nb.engine.summary import format_duration
from awf_nb.errors import ProviderError
from awf_nb.providers.local_wire import decode_event
from awf_nb.secrets import is_secret_name

log = logging.getLogger(__name__)

NAME = "local"
WORKER_MODULE = "awf_nb.providers.local_worker"
# A cancelled turn stops within one token (milliseconds); one that is still running after
# this long is stuck in native code, and the process is killed so the next turn can run.
CANCEL_GRACE_SECONDS = 10.0
# How long a status/clear/info request may take (the answer is immediate unless the
# process is busy loading a model for `info`).
REQUEST_TIMEOUT_SECONDS = 60.0
# How long awf waits for the process to exit after closing its pipe, before killing it.
EXIT_GRACE_SECONDS = 2.0
# The end of the process's stderr kept for the log when it dies (llama.cpp's last words).
STDERR_TAIL_LINES = 40
DOCTOR_HINT = "see `awf doctor`"


@dataclass(frozen=True)
class Phase:
    """The model is loaded and the turn's generation starts."""

    name: str


@dataclass(frozen=True)
class Ended:
    """The turn is over; every event of it came before."""


@dataclass(frozen=True)
class Failed:
    """The turn failed: `error` says why (its own error, or the process's death)."""

    error: ProviderError


Reply = ProviderEvent | Phase | Ended | Failed
Deliver = Callable[[Reply], None]


def how_it_ended(returncode: int) -> str:
    """`signal 11 (segmentation fault)`, `exit status 3`: how a process ended, in words."""
    if returncode < 0:
        number = -returncode
        try:
            described = (signal.strsignal(number) or "").lower()
        except ValueError:
            described = ""
        if number == signal.SIGKILL:
            described = "killed: out of memory, or stopped by hand"
        return f"signal {number} ({described})" if described else f"signal {number}"
    return f"exit status {returncode}"


def worker_environment() -> dict[str, str]:
    """awf's environment without secret-named variables, with awf-nb importable as awf
    imports it (a notebook started elsewhere, a checkout on PYTHONPATH)."""
    env = {name: value for name, value in os.environ.items() if not is_secret_name(name)}
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env


class _Turn:
    """A turn in flight: where its replies go and how far it got."""

    def __init__(self, deliver: Deliver) -> None:
        self.deliver = deliver
        self.phase = "loading the model"


class _Child:
    """One model process and the turns it serves."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=worker_environment(),
            # Its own session: Ctrl-C at the person's terminal is for awf, not the model.
            start_new_session=True,
        )
        self.turns: dict[int, _Turn] = {}
        self.requests: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.dead = False
        self.killed_because = ""
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        assert self.process.stdout and self.process.stderr
        self._stderr_reader = threading.Thread(
            target=self._drain, args=(self.process.stderr,), daemon=True, name="local-model-err"
        )
        self._stderr_reader.start()
        # Started last: a process that dies at once ends the reader, which joins the other.
        threading.Thread(
            target=self._read, args=(self.process.stdout,), daemon=True, name="local-model-read"
        ).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, message: dict[str, Any]) -> bool:
        """Write one request; False when the process is gone (its death is reported by the
        reader to every turn it had)."""
        line = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        stdin = self.process.stdin
        assert stdin is not None
        try:
            with self.lock:
                if self.dead:
                    return False
                stdin.write(line)
                stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def _read(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            try:
                line = json.loads(raw)
                reply_id = int(line["id"])
            except (ValueError, KeyError, TypeError):
                log.debug("local: the model process wrote a line that is not a reply: %.200r", raw)
                continue
            if "result" in line:
                with self.lock:
                    future = self.requests.pop(reply_id, None)
                if future is not None:
                    future.set_result(line["result"])
                continue
            with self.lock:
                turn = self.turns.get(reply_id)
            if turn is not None:
                self._dispatch(reply_id, turn, line)
        self._died()

    def _dispatch(self, turn_id: int, turn: _Turn, line: dict[str, Any]) -> None:
        if "phase" in line:
            turn.phase = str(line["phase"])
            turn.deliver(Phase(turn.phase))
        elif "end" in line:
            with self.lock:
                self.turns.pop(turn_id, None)
            turn.deliver(Ended())
        elif "error" in line:
            error = line["error"]
            turn.deliver(
                Failed(
                    ProviderError(
                        NAME,
                        str(error.get("message", "the model process failed")),
                        exit_code=error.get("exit_code"),
                        prefixed=False,
                    )
                )
            )
        else:
            try:
                turn.deliver(decode_event(line))
            except ValueError as exc:
                turn.deliver(Failed(ProviderError(NAME, str(exc))))

    def _drain(self, stderr: IO[bytes]) -> None:
        for raw in stderr:
            self.stderr_tail.append(raw.decode("utf-8", "replace").rstrip())

    def _died(self) -> None:
        returncode = self.process.wait()
        with self.lock:
            self.dead = True
            turns, self.turns = self.turns, {}
            requests, self.requests = self.requests, {}
        if returncode != 0 or turns:
            self._stderr_reader.join(EXIT_GRACE_SECONDS)  # its last words, read to the end
            tail = "\n".join(self.stderr_tail)
            log.warning(
                "local: the model process (pid %s) ended: %s%s",
                self.pid,
                how_it_ended(returncode),
                f"; its last output:\n{tail}" if tail else "",
            )
        for turn in turns.values():
            turn.deliver(Failed(self.death_error(returncode, turn.phase)))
        for future in requests.values():
            future.set_exception(self.death_error(returncode, "starting"))

    def death_error(self, returncode: int, phase: str) -> ProviderError:
        if self.killed_because:
            message = (
                f"the local model's process was stopped: {self.killed_because}; "
                f"the next turn starts a new one ({DOCTOR_HINT})"
            )
        else:
            message = (
                f"the local model's process died: {how_it_ended(returncode)} "
                f"while {phase}; {DOCTOR_HINT}"
            )
        return ProviderError(NAME, message, prefixed=False)

    def kill(self, because: str) -> None:
        with self.lock:
            if self.dead:
                return
            self.killed_because = because
            # No new turn is sent to it from now on; the reader still fails those it had.
            self.dead = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    def close(self) -> None:
        """Close the pipe (the process exits by itself), then make sure it has."""
        with self.lock:
            stdin = self.process.stdin
            if stdin is not None:
                with contextlib.suppress(OSError):
                    stdin.close()
        try:
            self.process.wait(EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill("awf exited")
            self.process.wait()


class ModelProcess:
    """The model process of this awf process: started on first use, again after a death."""

    def __init__(
        self, argv: list[str] | None = None, *, cancel_grace: float = CANCEL_GRACE_SECONDS
    ) -> None:
        self.argv = argv or [sys.executable, "-m", WORKER_MODULE]
        self.cancel_grace = cancel_grace
        self._owner = os.getpid()
        self._child: _Child | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def _current(self) -> _Child:
        with self._lock:
            if self._owner != os.getpid():
                # A forked copy of awf's process: the inherited child belongs to the parent.
                self._owner, self._child = os.getpid(), None
            child = self._child
            if child is None or child.dead or child.process.poll() is not None:
                try:
                    child = self._child = _Child(self.argv)
                except OSError as exc:
                    raise ProviderError(
                        NAME,
                        f"the local model's process could not be started: {exc}; {DOCTOR_HINT}",
                    ) from None
                log.debug("local: started the model process (pid %s)", child.pid)
            return child

    @property
    def pid(self) -> int | None:
        """The running process's pid, if one runs."""
        child = self._child
        return child.pid if child is not None and not child.dead else None

    def start_turn(self, job: dict[str, Any], deliver: Deliver) -> tuple[_Child, int]:
        """Send a turn; its replies go to `deliver` (from the reader thread)."""
        turn_id = next(self._ids)
        for _ in range(2):  # a process that died since its last turn: start a new one
            child = self._current()
            with child.lock:
                if child.dead:
                    continue
                child.turns[turn_id] = _Turn(deliver)
            if child.send({"op": "turn", "id": turn_id, "job": job}):
                return child, turn_id
            # The write failed: the reader reports the death to this turn.
            return child, turn_id
        raise ProviderError(NAME, f"the local model's process could not be started; {DOCTOR_HINT}")

    def cancel(self, child: _Child, turn_id: int) -> None:
        """Stop a turn; kill the process if the turn has not ended `cancel_grace` s later."""
        if not child.send({"op": "cancel", "id": turn_id}):
            return

        def check() -> None:
            with child.lock:
                stuck = turn_id in child.turns
            if stuck:
                child.kill(
                    f"a stopped turn was still running after {format_duration(self.cancel_grace)}"
                )

        timer = threading.Timer(self.cancel_grace, check)
        timer.daemon = True
        timer.start()

    def request(self, op: str, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        """A status/clear/info answer (blocking: from a thread, a test or `awf doctor`)."""
        child = self._current()
        request_id = next(self._ids)
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with child.lock:
            # A process that died as it started may be gone already: its reader failed the
            # requests it had, and a request added now would wait for nobody.
            dead = child.dead
            if not dead:
                child.requests[request_id] = future
        if dead:
            raise child.death_error(child.process.wait(), "starting")
        child.send({"op": op, "id": request_id})
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ProviderError(
                NAME,
                f"the local model's process did not answer {op!r} "
                f"within {format_duration(timeout)}",
            ) from None

    def kill(self, because: str = "stopped by hand") -> None:
        """Kill the running process (turns in flight fail); the next turn starts a new one."""
        child = self._child
        if child is not None:
            child.kill(because)
            child.process.wait()

    def close(self) -> None:
        """Stop the process (at exit, or when a test wants a fresh one)."""
        with self._lock:
            child, self._child = self._child, None
        if child is not None and not child.dead:
            child.close()


_SHARED: ModelProcess | None = None
_SHARED_LOCK = threading.Lock()


def shared_process() -> ModelProcess:
    """This awf process's one model process (not started until its first turn)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ModelProcess()
            atexit.register(_SHARED.close)
        return _SHARED
