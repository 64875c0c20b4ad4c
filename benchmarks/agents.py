"""Agents talking to agents: the engine's cost per message, and a cassette replay.

Prints, from one run:
1. the engine's time per message of an exchange between two constant-time agents (a
   writer and a reviewer, `conversation.with`), with a real store on disk, for the messages
   around message 20 and around message 2,000 of one 1,000-turn exchange, and their ratio
   (flat = about 1; target <= 1.2: the engine must not rescan or rewrite the exchange each
   message). The direct cost of the provider calls alone is printed beside it.
2. a 100-turn exchange recorded to a cassette, then replayed (no provider) at speed 0:
   the replay's time against the recorded run's.

    python benchmarks/agents.py [--turns 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from awf_nb.engine.events import TurnFinished
from awf_nb.engine.ports import TurnRequest
from awf_nb.runs import prepare_run
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text
from benchmarks.conversation import ConstantProvider

WORKFLOW = """
name: bench-agents
states:
  initial: draft
  draft:
    type: agent
    provider: constant
    mode: conversation
    system_prompt: You write.
    prompt: hello
    conversation:
      with: {name: reviewer, provider: constant, system_prompt: You review.}
      until: 'message == "never"'
      max_turns: TURNS
    on_success: done
  done: {type: terminal}
"""


class MessageClock:
    """The time at which each message (either side) finished."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def emit(self, event: object) -> None:
        if type(event) is TurnFinished:
            self.ends.append(time.perf_counter())


async def exchange(turns: int, root: Path, **cassette: str) -> tuple[MessageClock, float]:
    clock = MessageClock()
    runner = prepare_run(
        load_text(WORKFLOW.replace("TURNS", str(turns))),
        sink=clock,
        storage=Store(root),
        providers=lambda name: ConstantProvider(),
        cwd=root,
        **cassette,  # type: ignore[arg-type]
    ).runner
    started = time.perf_counter()
    state = await runner.execute()
    elapsed = time.perf_counter() - started
    assert state.status == "completed", state.error
    conv = state.steps["draft"].conversation
    assert conv is not None and conv.total_turns == turns and conv.stopped_by == "max_turns"
    return clock, elapsed


async def direct_calls(count: int) -> float:
    """The provider alone, called `count` times: what the engine adds to."""
    provider = ConstantProvider()
    started = time.perf_counter()
    for _ in range(count):
        async for _event in provider.stream(TurnRequest("ok")):
            pass
    return (time.perf_counter() - started) / count


def per_message_ms(ends: list[float], around: int, width: int = 25) -> float:
    """The median time between consecutive messages in a window around one message."""
    window = ends[around - width : around + width]
    return statistics.median(b - a for a, b in itertools.pairwise(window)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clock, _ = asyncio.run(exchange(args.turns, root / "long"))
        messages = len(clock.ends)  # 2 * turns - 1
        early = per_message_ms(clock.ends, 30)
        late = per_message_ms(clock.ends, messages - 26)
        direct = asyncio.run(direct_calls(2000)) * 1000
        print(f"messages in the exchange: {messages} ({args.turns} turns)")
        print(f"engine time per message around message 30:   {early:.3f} ms")
        print(f"engine time per message around message {messages - 26}: {late:.3f} ms")
        print(f"ratio late/early: {late / early:.2f} (flat = about 1; target <= 1.2)")
        print(f"the provider call alone: {direct:.4f} ms per message")

        cassette = root / "bench.cassette.jsonl"
        _, recorded = asyncio.run(exchange(100, root / "rec", record=str(cassette)))
        _, plain = asyncio.run(exchange(100, root / "plain"))
        _, replayed = asyncio.run(exchange(100, root / "replay", replay=str(cassette)))
        print(
            f"100-turn exchange: {plain * 1000:.0f} ms run, {recorded * 1000:.0f} ms recording, "
            f"{replayed * 1000:.0f} ms replay at speed 0 (replay/run {replayed / plain:.2f})"
        )


if __name__ == "__main__":
    main()
