"""What the notebook panel sends to the browser while one long reply streams.

Drives a `RunPanel` with a streamed Markdown reply (paragraphs, lists, code; about one word
per token) and counts every comm message it would send — widget creation included — by
replacing the kernel's comm with one that only records. Flushes happen every
TOKENS_PER_FLUSH tokens, as the panel's 10 Hz timer would for a model streaming
10 x TOKENS_PER_FLUSH tokens a second. Prints messages, KiB sent and the ratio to the final
HTML of the reply (the least any frontend must receive once). Budget: <= 3 x final HTML +
20 KiB.

    python benchmarks/notebook_traffic.py [--tokens 1000 20000] [--per-flush 20 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import comm  # noqa: E402
from comm.base_comm import BaseComm  # noqa: E402

from awf_nb.engine import events as ev  # noqa: E402
from awf_nb.frontends.notebook.panel import RunPanel  # noqa: E402
from tests.frontends.notebook.test_comm_traffic import markdown_reply  # noqa: E402

SENT: list[int] = []


class CountingComm(BaseComm):
    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                    buffers: Any = None, **keys: Any) -> None:  # fmt: skip
        SENT.append(len(json.dumps(data or {}, default=str)) + sum(map(len, buffers or [])))


def create_comm(*args: Any, **kwargs: Any) -> BaseComm:
    made = CountingComm.__new__(CountingComm)
    made.__init__(*args, **kwargs)  # type: ignore[misc]
    return made


async def stream(tokens: int, per_flush: int) -> tuple[int, int, int]:
    """(messages, bytes sent, final HTML bytes) for one reply of `tokens` tokens."""
    panel = RunPanel("bench")
    panel.emit(ev.RunStarted("r", "bench"))
    panel.emit(ev.StepStarted("r", "talk", "agent"))
    start = len(SENT)
    panel.emit(ev.TurnStarted("r", "talk", 1))
    words = markdown_reply(tokens)
    for index, word in enumerate(words, 1):
        panel.emit(ev.AgentText("r", "talk", word))
        if index % per_flush == 0:
            panel.flush()
    text = "".join(words)
    panel.emit(ev.TurnFinished("r", "talk", 1, tokens=tokens, duration=1.0, text=text))
    final = panel._sections["talk"].body.children[-1].value
    return len(SENT) - start, sum(SENT[start:]), len(final)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1_000, 20_000])
    parser.add_argument("--per-flush", type=int, nargs="+", default=[20, 4])
    args = parser.parse_args()
    comm.create_comm = create_comm
    print("tokens  per flush  messages   sent KiB  final HTML KiB  sent/final  budget KiB")
    for per_flush in args.per_flush:
        for tokens in args.tokens:
            messages, sent, final = asyncio.run(stream(tokens, per_flush))
            budget = 3 * final + 20 * 1024
            print(
                f"{tokens:6d}  {per_flush:9d}  {messages:8d}  {sent / 1024:9.1f}  "
                f"{final / 1024:14.1f}  {sent / final:10.2f}  {budget / 1024:10.1f}"
                + ("" if sent <= budget else "  OVER")
            )


if __name__ == "__main__":
    main()
