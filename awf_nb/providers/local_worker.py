"""The model process: `python -m awf_nb.providers.local_worker`, started by the `local` provider.

llama.cpp is native code: built for the wrong CPU, short of memory or simply buggy, it can
crash the process it runs in. It runs here, in a child process of awf, so a crash costs a
turn (the provider reports it and the next turn starts a new process), never the person's
Jupyter kernel, the CLI or an eval.

The protocol is JSON lines. awf writes requests to this process's stdin:

    {"op": "turn", "id": 7, "job": {...}}      generate one turn (local_model.run_turn)
    {"op": "cancel", "id": 7}                  stop turn 7 within a token
    {"op": "status" | "clear" | "info", "id": 8}

and reads replies from the pipe that was this process's stdout (file descriptor 1 is then
pointed at stderr, so nothing native code prints can corrupt the stream):

    {"id": 7, "event": "TextDelta", "data": {...}}   each event (local_wire.py)
    {"id": 7, "phase": "generating"}                  the model is loaded, generation starts
    {"id": 7, "error": {"message": ..., "exit_code": ...}}
    {"id": 7, "end": {}}                              the turn is over (after its events)
    {"id": 8, "result": {...}}                        a status/clear/info answer

Turns run in threads (a model's lock serialises generation); requests are read on the
main thread. The process ends by itself when its stdin closes, which happens when awf
exits however it exits (kill -9 included), or when its parent process changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from awf_nb.errors import EXIT_EXECUTION, AwfError
from awf_nb.providers import local_model
from awf_nb.providers.local_wire import decode_messages, decode_tools, encode_event

# How often the watchdog checks that the parent is still the one that started us: a
# parent's death closes our stdin too, unless a forked process of its kept the pipe open.
PARENT_CHECK_SECONDS = 1.0


class Worker:
    """Serves requests read from `requests`, writing replies to `replies`."""

    def __init__(self, replies: IO[bytes]) -> None:
        self.replies = replies
        self.write_lock = threading.Lock()
        self.turns: dict[int, tuple[threading.Event, local_model.Job]] = {}
        self.last: dict[str, int] = {}
        self.generating: set[int] = set()  # turns past loading, in generation
        self.turns_lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        with self.write_lock:
            self.replies.write(line)
            self.replies.flush()

    def serve(self, requests: IO[bytes]) -> None:
        for raw in requests:
            try:
                request = json.loads(raw)
                op, request_id = request["op"], int(request["id"])
            except (ValueError, KeyError, TypeError):
                continue  # only awf writes here; a line it did not write is dropped
            if op == "turn":
                self.start_turn(request_id, request["job"])
            elif op == "cancel":
                with self.turns_lock:
                    running = self.turns.get(request_id)
                if running:
                    running[0].set()
            else:
                self.send({"id": request_id, "result": self.answer(op)})

    def answer(self, op: str) -> dict[str, Any]:
        if op == "status":
            with self.turns_lock:
                return {
                    "running": len(self.turns),
                    "generating": len(self.generating),
                    "last": dict(self.last),
                    "pid": os.getpid(),
                }
        if op == "clear":
            return {"freed": local_model.clear_model_cache()}
        if op == "info":
            return build_info()
        return {"error": f"unknown request {op!r}"}

    def start_turn(self, turn_id: int, encoded: dict[str, Any]) -> None:
        try:
            job = local_model.Job(
                messages=decode_messages(encoded["messages"]),
                options=local_model.TurnOptions(**encoded["options"]),
                model_path=Path(encoded["model_path"]),
                tools=decode_tools(encoded.get("tools", [])),
                output_format=encoded.get("output_format", ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            self.send({"id": turn_id, "error": {"message": f"a malformed turn: {exc}"}})
            self.send({"id": turn_id, "end": {}})
            return
        cancel = threading.Event()
        with self.turns_lock:
            self.turns[turn_id] = (cancel, job)
        threading.Thread(
            target=self.run_turn, args=(turn_id, job, cancel), daemon=True, name=f"turn-{turn_id}"
        ).start()

    def run_turn(self, turn_id: int, job: local_model.Job, cancel: threading.Event) -> None:
        def emit(item: Any) -> None:
            if isinstance(item, local_model.Generating):
                with self.turns_lock:
                    self.generating.add(turn_id)
                self.send({"id": turn_id, "phase": "generating"})
            else:
                self.send({"id": turn_id, **encode_event(item)})

        try:
            local_model.run_turn(job, emit, cancel)
        except AwfError as exc:
            self.send({"id": turn_id, "error": {"message": str(exc), "exit_code": exc.exit_code}})
        except Exception as exc:
            message = f"{local_model.NAME}: generation failed: {type(exc).__name__}: {exc}"
            self.send({"id": turn_id, "error": {"message": message, "exit_code": EXIT_EXECUTION}})
        finally:
            with self.turns_lock:
                self.turns.pop(turn_id, None)
                self.generating.discard(turn_id)
                self.last = {"prompt_tokens": job.prompt_tokens, "evaluated": job.evaluated}
            self.send({"id": turn_id, "end": {}})


def build_info() -> dict[str, Any]:
    """What `awf doctor` shows of this build: versions and the CPU features it uses."""
    import llama_cpp

    features = llama_cpp.llama_print_system_info()
    return {
        "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        "system_info": features.decode("utf-8", "replace")
        if isinstance(features, bytes)
        else str(features),
    }


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:
            os._exit(0)


def main() -> None:
    # Ctrl-C in the person's terminal is awf's to handle (it stops a reply, not the model).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    threading.Thread(
        target=_watch_parent, args=(os.getppid(),), daemon=True, name="parent-watch"
    ).start()
    worker = Worker(replies)
    with contextlib.suppress(BrokenPipeError, OSError):  # awf is gone: nobody to answer
        worker.serve(sys.stdin.buffer)
    # stdin closed: awf is gone or is done with the model. Threads still generating are
    # abandoned; nothing of theirs needs saving.
    os._exit(0)


if __name__ == "__main__":
    main()
