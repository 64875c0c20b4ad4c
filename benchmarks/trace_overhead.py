"""What tracing costs a run: CPU per model turn with traces on vs off.

Prints, from one run, the CPU time of the awf process (the engine, the tracer, the SDK's
export thread: `time.process_time`, which counts every thread) per model turn of a
conversation, a real store on disk, until `execute()` returns (which waits for the last
spans to be sent). The model is either
- `--provider scripted` (the default): replies made in the process, no HTTP: the cheapest
  turn there is, so tracing's share of it is the worst case; or
- `--provider openai`: each reply streamed by the `openai_compatible` provider from the
  fake model server of benchmarks/eval.py (Starlette on uvicorn, in its own process on
  127.0.0.1, so its CPU is not counted): `--tokens` chunks a reply, `--token-ms` apart
  (0: as fast as it can), as a model's turn costs the client.
The three modes:
- off: no trace file, no collector;
- file: the trace file only (what every run does by default);
- file + live: the trace file, plus live export over OTLP/HTTP to a local receiver (a
  separate process answering 200 to every request, so its own CPU is not counted);
and the ratios to off (target <= 1.05). A ratio of two CPU times measured apart moves by
several % from round to round on a shared machine, so tracing's own CPU is also measured
directly: the time the run's loop spends in the `Tracer` (building spans, writing the trace
file, handing spans to the exporter; the sink behind it excluded) and the CPU of the SDK's
export threads (their own CPU clocks), per turn, ÷ the bare turn's CPU (target <= 0.05).
One unmeasured run of each comes first (imports, the SDK's set-up: paid once per process,
not per turn). Each is then measured `--rounds` times, interleaved; the median and the
fastest round are printed (other processes only ever add to a round's CPU time, so on a
busy machine the fastest rounds are the steadier ratio). Also prints `uptime`.

    python benchmarks/trace_overhead.py [--turns 300] [--rounds 9]
    python benchmarks/trace_overhead.py --provider openai [--tokens 40] [--token-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from awf_nb.runs import prepare_run
from awf_nb.traces import Tracer

HERE = Path(__file__).resolve().parent

RECEIVER = textwrap.dedent("""
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()
        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    print(server.server_address[1], flush=True)
    server.serve_forever()
""")


def load_eval_bench() -> ModuleType:
    """benchmarks/eval.py as a module: its fake model server and helpers."""
    spec = importlib.util.spec_from_file_location("bench_eval", HERE / "eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workflow(turns: int, base_url: str | None) -> str:
    """The conversation: on the scripted provider, or on the model server at `base_url`."""
    if base_url is None:
        replies = ", ".join(f'"reply number {i} with a few words in it"' for i in range(turns))
        provider, options = "scripted", f"{{replies: [{replies}]}}"
    else:
        provider, options = "openai_compatible", f'{{base_url: "{base_url}", model: fake}}'
    return textwrap.dedent(f"""
        name: talk
        states:
          initial: chat
          chat:
            type: agent
            provider: {provider}
            mode: conversation
            prompt: "Let us talk"
            options: {options}
            on_success: done
          done: {{type: terminal}}
    """)


class TracingClock:
    """The CPU tracing itself spends: the run loop's time inside `Tracer.emit` (minus the
    sink behind it) and the export threads' own CPU clocks."""

    EXPORT_THREADS = ("OtelBatch", "awf-otlp")

    def __init__(self) -> None:
        self.loop_seconds = 0.0
        emit = Tracer.emit

        def timed_emit(tracer: Tracer, event: object) -> None:
            # perf_counter, not thread_time: a thread's CPU clock is a system call, which
            # would add its own cost to every traced event (emit never waits).
            inner, started = tracer._inner, time.perf_counter()
            tracer._inner = None
            try:
                emit(tracer, event)  # type: ignore[arg-type]
            finally:
                tracer._inner = inner
                self.loop_seconds += time.perf_counter() - started
            if inner is not None:
                inner.emit(event)  # type: ignore[arg-type]

        Tracer.emit = timed_emit  # type: ignore[method-assign]

    def export_seconds(self) -> float:
        total = 0.0
        for thread in threading.enumerate():
            if thread.name.startswith(self.EXPORT_THREADS) and thread.ident is not None:
                with contextlib.suppress(OSError):  # the thread ended meanwhile
                    total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        return total


async def cpu_per_turn(
    folder: Path, turns: int, base_url: str | None, clock: TracingClock, **options: object
) -> tuple[float, float]:
    """CPU per turn of the whole process, and of tracing alone."""
    (folder / "wf.yaml").write_text(workflow(turns, base_url))
    replies = [f"message {i}" for i in range(turns - 1)] + [""]
    prepared = prepare_run(
        folder / "wf.yaml", replies=replies, storage=folder / "store", cwd=folder, **options
    )
    loop_before, export_before = clock.loop_seconds, clock.export_seconds()
    started = time.process_time()
    result = await prepared.run()
    spent = time.process_time() - started
    tracing = clock.loop_seconds - loop_before + clock.export_seconds() - export_before
    assert result.status == "completed", result.status
    return spent / turns, tracing / turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--provider", choices=("scripted", "openai"), default="scripted")
    parser.add_argument("--tokens", type=int, default=40, help="--provider openai: per reply")
    parser.add_argument(
        "--token-ms", type=float, default=0.0, help="--provider openai: ms between tokens"
    )
    args = parser.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    model: subprocess.Popen[bytes] | None = None
    base_url: str | None = None
    try:
        if args.provider == "openai":
            bench = load_eval_bench()
            model_port = bench.free_port()
            model = subprocess.Popen(
                [sys.executable, bench.__file__, "--serve", str(model_port),
                 "--tokens", str(args.tokens), "--token-ms", str(args.token_ms)],
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            base_url = f"http://127.0.0.1:{model_port}/v1"
            bench.wait_ready(f"{base_url}/models", model)
        port = int(receiver.stdout.readline())  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}"
        modes: dict[str, dict[str, object]] = {
            "off": {"trace_file": False},
            "file": {},
            "file + live OTLP/HTTP": {"otlp": url},
        }
        spent: dict[str, list[float]] = {mode: [] for mode in modes}
        own: dict[str, list[float]] = {mode: [] for mode in modes}
        clock = TracingClock()
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(-1, args.rounds):  # round -1: the warm-up, not counted
                for n, (mode, options) in enumerate(modes.items()):
                    folder = Path(tmp) / f"{i}-{n}"
                    folder.mkdir()
                    cpu, tracing = asyncio.run(
                        cpu_per_turn(folder, args.turns, base_url, clock, env={}, **options)
                    )
                    if i >= 0:
                        spent[mode].append(cpu)
                        own[mode].append(tracing)
        model_text = (
            "scripted (in the process, no HTTP: the worst case)"
            if base_url is None
            else f"openai_compatible, {args.tokens} tokens a reply {args.token_ms:g} ms apart"
        )
        print(f"{args.turns} turns a run, {args.rounds} rounds; model: {model_text}")
        off, off_min = statistics.median(spent["off"]), min(spent["off"])
        for mode, values in spent.items():
            cpu, least = statistics.median(values), min(values)
            ratio = (
                ""
                if mode == "off"
                else f"  ratio {cpu / off:.3f} (of the fastest rounds: {least / off_min:.3f};"
                " target <= 1.05)"
            )
            print(
                f"CPU per model turn, traces {mode}: {cpu * 1e3:.3f} ms"
                f" (fastest round {least * 1e3:.3f} ms){ratio}"
            )
        for mode, values in own.items():
            if mode != "off":
                mine = statistics.median(values)
                print(
                    f"tracing's own CPU per model turn, {mode}: {mine * 1e3:.3f} ms,"
                    f" {mine / off:.3f} of the bare turn (target <= 0.05)"
                )
        print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        receiver.terminate()
        receiver.wait()
        if model is not None:
            model.terminate()
            model.wait(timeout=10)


if __name__ == "__main__":
    main()
