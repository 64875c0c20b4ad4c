"""Conversation latency and per-turn engine overhead.

Prints, from one run:
1. the time from an empty Enter (the reader returns "") to the step's completion, with a
   real store on disk (target < 100 ms);
2. the engine's per-turn overhead at turn 10 and at turn 1,000 of one long conversation,
   and their ratio (must stay flat: the engine must not rewrite or rescan the whole
   history each turn). A constant-time provider isolates the engine's own cost: the time
   from the reader handing over a message to the next read, minus nothing else.

    python benchmarks/conversation.py [--turns 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from awf_nb.engine.events import RunFinished, StepFinished
from awf_nb.engine.ports import Final, TextDelta, TurnRequest, Usage
from awf_nb.runs import prepare_run
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text

WORKFLOW = """
name: bench
states:
  initial: chat
  chat:
    type: agent
    provider: constant
    mode: conversation
    system_prompt: You are terse.
    prompt: hello
    on_success: done
  done: {type: terminal}
"""


class ConstantProvider:
    """Replies "ok" instantly, ignoring the history: its cost does not grow."""

    name = "constant"
    session_kind = "history"

    async def stream(self, turn: TurnRequest) -> AsyncIterator[object]:
        yield TextDelta("ok")
        yield Usage(10, 1)
        yield Final("ok")

    async def aclose(self) -> None:
        pass


class TimingReader:
    """Answers `turns - 1` messages then an empty line, timing each turn's round trip."""

    def __init__(self, turns: int) -> None:
        self.left = turns - 1
        self.handed_over: float | None = None
        self.turn_times: list[float] = []
        self.empty_enter_at = 0.0

    async def read(self, prompt: str) -> str | None:
        now = time.perf_counter()
        if self.handed_over is not None:
            self.turn_times.append(now - self.handed_over)
        if self.left == 0:
            self.empty_enter_at = time.perf_counter()
            return ""
        self.left -= 1
        self.handed_over = time.perf_counter()
        return f"message number {self.left}"


class FinishClock:
    def __init__(self) -> None:
        self.finished_at = 0.0
        self.run_finished_at = 0.0

    def emit(self, event: object) -> None:
        if isinstance(event, StepFinished) and event.step == "chat":
            self.finished_at = time.perf_counter()
        elif isinstance(event, RunFinished):  # after the final checkpoint and history row
            self.run_finished_at = time.perf_counter()


async def one_run(turns: int, root: Path) -> tuple[TimingReader, FinishClock]:
    reader, clock = TimingReader(turns), FinishClock()
    runner = prepare_run(
        load_text(WORKFLOW),
        reader=reader,
        sink=clock,
        storage=Store(root),
        providers=lambda name: ConstantProvider(),
        cwd=root,
    ).runner
    state = await runner.execute()
    assert state.status == "completed", state.error
    assert state.steps["chat"].conversation.total_turns == turns
    return reader, clock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        enter_ms, run_ms = [], []
        for _ in range(5):
            reader, clock = asyncio.run(one_run(3, root))
            enter_ms.append((clock.finished_at - reader.empty_enter_at) * 1000)
            run_ms.append((clock.run_finished_at - reader.empty_enter_at) * 1000)
        print(
            f"empty Enter -> step completed: median {statistics.median(enter_ms):.2f} ms "
            f"(max {max(enter_ms):.2f} ms over 5 runs; target < 100 ms)"
        )
        print(
            f"empty Enter -> run finished, state saved: median {statistics.median(run_ms):.2f} ms "
            f"(max {max(run_ms):.2f} ms)"
        )
        reader, _ = asyncio.run(one_run(args.turns, root))
        times = reader.turn_times
        early = statistics.median(times[5:15]) * 1000
        late = statistics.median(times[-10:]) * 1000
        print(f"per-turn engine overhead at turn 10:    {early:.3f} ms (median of turns 6-15)")
        print(f"per-turn engine overhead at turn {args.turns}: {late:.3f} ms (median of last 10)")
        print(f"ratio late/early: {late / early:.2f} (flat = about 1)")


if __name__ == "__main__":
    main()
