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
and the ratios to off (target <= 1.05). One unmeasured run of each comes first (imports,
the SDK's set-up: paid once per process, not per turn). Each is then measured `--rounds`
times, interleaved; the median and the fastest round are printed (other processes only
ever add to a round's CPU time, so on a busy machine the fastest rounds are the steadier
ratio). Also prints `uptime`.

    python benchmarks/trace_overhead.py [--turns 300] [--rounds 9]
    python benchmarks/trace_overhead.py --provider openai [--tokens 40] [--token-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from awf_nb.runs import prepare_run

HERE = Path(__file__).resolve().parent

RECEIVER = textwrap.dedent("""
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
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


async def cpu_per_turn(folder: Path, turns: int, base_url: str | None, **options: object) -> float:
    (folder / "wf.yaml").write_text(workflow(turns, base_url))
    replies = [f"message {i}" for i in range(turns - 1)] + [""]
    prepared = prepare_run(
        folder / "wf.yaml", replies=replies, storage=folder / "store", cwd=folder, **options
    )
    started = time.process_time()
    result = await prepared.run()
    spent = time.process_time() - started
    assert result.status == "completed", result.status
    return spent / turns


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
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(-1, args.rounds):  # round -1: the warm-up, not counted
                for n, (mode, options) in enumerate(modes.items()):
                    folder = Path(tmp) / f"{i}-{n}"
                    folder.mkdir()
                    cpu = asyncio.run(cpu_per_turn(folder, args.turns, base_url, env={}, **options))
                    if i >= 0:
                        spent[mode].append(cpu)
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
        print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        receiver.terminate()
        receiver.wait()
        if model is not None:
            model.terminate()
            model.wait(timeout=10)


if __name__ == "__main__":
    main()
