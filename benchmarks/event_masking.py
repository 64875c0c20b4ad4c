"""What masking every event costs on the hot path: one streamed token.

`Runner.emit` masks every event before a frontend sees it (`engine/sinks.EventMasker`).
Prints, from one run, the cost per `AgentText` event (beyond making the event) next to the
streaming masker every token already goes through (`secrets.StreamMasker.feed`), with no
secrets, 3, and 50 (best of 15 repeats of 1,000 tokens each).

    python benchmarks/event_masking.py
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from awf_nb.engine import events as ev
from awf_nb.engine.sinks import EventMasker
from awf_nb.secrets import Masker

TOKENS = [f" tok{i}" for i in range(1000)]


def per_token(action: object, repeat: int = 15, number: int = 50) -> float:
    """Microseconds per token: the best of `repeat` timings of `number` passes."""
    return min(timeit.repeat(action, number=number, repeat=repeat)) / number / len(TOKENS) * 1e6  # type: ignore[arg-type]


def main() -> None:
    def make_events() -> None:
        for text in TOKENS:
            ev.AgentText("run-1", "ask", text, "")

    baseline = per_token(make_events)
    print(f"making an AgentText event: {baseline:.2f} µs")
    cases = {
        "no secrets": Masker(),
        "3 secrets": Masker(["sk-bench-0123456789abcdef", "ghp_abcdefabcdef0123", "hunter2x2"]),
        "50 secrets": Masker([f"secret-value-{i:04d}" for i in range(50)]),
    }
    for label, masker in cases.items():
        mask = EventMasker(masker)
        stream = masker.stream()

        def masked_events(mask: EventMasker = mask) -> None:
            for text in TOKENS:
                mask(ev.AgentText("run-1", "ask", text, ""))

        def streamed(stream: object = stream) -> None:
            for text in TOKENS:
                stream.feed(text)  # type: ignore[attr-defined]

        events = per_token(masked_events) - baseline
        print(f"{label:>10}: masking the event {events:5.2f} µs/token; "
              f"the stream masker {per_token(streamed):6.2f} µs/token")  # fmt: skip


if __name__ == "__main__":
    main()
