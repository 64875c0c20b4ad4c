"""How many comm messages (and bytes) the panel sends while a long reply streams.

1,000 streamed tokens over ~5 s (the scripted provider with a delay) must not become one
message per token: the panel flushes at 10 Hz and sends at most one message per flush (the
reply's HTML widget; the status clock waits while text streams). Target: < 60 messages for
a 5-second stream. The figures are printed (run with `-s` to see them).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

from awf_nb.api import load
from awf_nb.engine import events as ev
from awf_nb.frontends.notebook.panel import FLUSH_INTERVAL, RunPanel
from awf_nb.runs import prepare_run

TOKENS = 1000
STREAM_SECONDS = 5.0


@dataclass
class Traffic:
    messages: list[tuple[str, int]] = field(default_factory=list)  # (msg_type, bytes)
    comm_ids: list[str] = field(default_factory=list)  # the comm of each message

    def mark(self) -> int:
        return len(self.messages)

    def since(self, start: int) -> list[tuple[str, int]]:
        return self.messages[start:]


class CountingComm(BaseComm):
    """A comm that records what would go to the frontend instead of sending it."""

    traffic: Traffic

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                    buffers: Any = None, **keys: Any) -> None:  # fmt: skip
        size = len(json.dumps(data or {}, default=str)) + sum(len(b) for b in buffers or [])
        self.traffic.messages.append((msg_type, size))
        self.traffic.comm_ids.append(self.comm_id)


@pytest.fixture
def traffic(monkeypatch: pytest.MonkeyPatch) -> Iterator[Traffic]:
    recorded = Traffic()

    def create_comm(*args: Any, **kwargs: Any) -> BaseComm:
        made = CountingComm.__new__(CountingComm)
        made.traffic = recorded
        made.__init__(*args, **kwargs)  # type: ignore[misc]
        return made

    monkeypatch.setattr(comm, "create_comm", create_comm)
    yield recorded


class WindowedPanel(RunPanel):
    """Notes where the streamed turn starts and ends in the recorded traffic."""

    def __init__(self, *args: Any, traffic: Traffic, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.traffic = traffic
        self.window: list[int] = []
        self.times: list[float] = []

    def emit(self, event: ev.RunEvent) -> None:
        if isinstance(event, ev.TurnStarted):
            self.window.append(self.traffic.mark())
            self.times.append(time.monotonic())
        super().emit(event)
        if isinstance(event, ev.TurnFinished):
            self.window.append(self.traffic.mark())
            self.times.append(time.monotonic())


def long_reply_workflow(words: int, delay_ms: float) -> str:
    reply = " ".join(f"w{i % 100}" for i in range(words))
    return f"""
name: long-reply
states:
  initial: answer
  answer:
    type: agent
    provider: scripted
    prompt: "Tell me everything."
    options:
      replies: ["{reply}"]
      delay_ms: {delay_ms}
    on_success: done
  done: {{type: terminal}}
"""


@pytest.mark.slow
async def test_a_five_second_stream_of_1000_tokens_sends_few_messages(traffic: Traffic) -> None:
    workflow = load(long_reply_workflow(TOKENS, STREAM_SECONDS * 1000 / TOKENS))
    panel = WindowedPanel(workflow.name, traffic=traffic)
    runner = prepare_run(workflow, sink=panel, storage=False).runner
    stats_before = (panel.stats.flushes, panel.stats.updates)

    state = await asyncio.wait_for(runner.execute(), timeout=60)

    assert state.status == "completed"
    start, end = panel.window
    seconds = panel.times[1] - panel.times[0]
    during = traffic.since(start)[: end - start]
    updates = [size for kind, size in during if kind == "comm_msg"]
    flushes = panel.stats.flushes - stats_before[0]
    total_bytes = sum(size for _, size in during)
    reply_chars = len(state.steps["answer"].output)
    print(
        f"\n{TOKENS} tokens ({reply_chars} chars) streamed in {seconds:.2f}s: "
        f"{len(during)} comm messages ({len(updates)} updates, "
        f"{len(during) - len(updates)} opens), {total_bytes / 1024:.1f} KiB, "
        f"{flushes} flushes at {1 / FLUSH_INTERVAL:.0f} Hz"
    )
    # At most one message per flush, plus the few structural ones of the turn (the new
    # reply bubble is created and added to its step; the status line at turn start/end).
    # How many flushes a given stream takes is a figure, not a test (benchmarks/).
    assert len(updates) <= flushes + 4
    assert flushes < TOKENS / 10, "tokens are batched into flushes, not sent one by one"
    # Never resent: the whole reply is in the last update, not re-sent for every token.
    assert total_bytes < 60 * reply_chars


async def test_a_finished_reply_is_never_sent_again(traffic: Traffic) -> None:
    text = """
name: two-steps
states:
  initial: first
  first:
    type: agent
    provider: scripted
    prompt: "one"
    options: {replies: ["the first reply, finished early"], delay_ms: 1}
    on_success: second
  second:
    type: agent
    provider: scripted
    prompt: "two"
    options: {replies: ["a second reply that streams for a while longer"], delay_ms: 20}
    on_success: done
  done: {type: terminal}
"""
    workflow = load(text)
    panel = RunPanel(workflow.name)
    runner = prepare_run(workflow, sink=panel, storage=False).runner
    first_reply: list[tuple[Any, int]] = []  # (the reply widget, traffic mark when finished)

    original = RunPanel.emit

    def spy(event: ev.RunEvent) -> None:
        original(panel, event)
        if isinstance(event, ev.TurnFinished) and event.step == "first":
            widget = panel._sections["first"].body.children[-1]
            first_reply.append((widget, traffic.mark()))

    panel.emit = spy  # type: ignore[method-assign]
    state = await asyncio.wait_for(runner.execute(), timeout=30)

    assert state.status == "completed"
    ((widget, finished_at),) = first_reply
    assert "finished early" in widget.value
    later = traffic.comm_ids[finished_at:]
    assert len(later) > 0, "the second reply streamed through the comm"
    assert widget.comm.comm_id not in later, "the finished reply was sent again"


def markdown_reply(tokens: int) -> list[str]:
    """A long reply as a model streams it: paragraphs, lists and code, ~1 word per token."""
    words: list[str] = []
    for index in range(tokens):
        if index % 60 == 59:
            words.append("end.\n\n")
        elif index % 400 == 120:
            words.append("\n\n- a list item\n- another **item**\n\n")
        elif index % 500 == 250:
            words.append("\n\n```python\nprint('code')\n```\n\n")
        else:
            words.append(f"w{index % 97} " if index % 13 else "**bold** ")
    return words


@pytest.mark.parametrize("tokens", [1_000, 20_000])
async def test_a_long_reply_costs_at_most_three_times_its_html(
    traffic: Traffic, tokens: int
) -> None:
    """Sent while one reply streams (20 tokens per flush: 200 tokens/s at 10 Hz), widget
    creation included: <= 3 x the final HTML + 20 KiB (the issue's budget), so O(n)."""
    panel = RunPanel("long")
    panel.emit(ev.RunStarted("r", "long"))
    panel.emit(ev.StepStarted("r", "talk", "agent"))
    start = traffic.mark()
    panel.emit(ev.TurnStarted("r", "talk", 1))
    words = markdown_reply(tokens)
    for index, word in enumerate(words, 1):
        panel.emit(ev.AgentText("r", "talk", word))
        if index % 20 == 0:
            panel.flush()
    panel.emit(ev.TurnFinished("r", "talk", 1, tokens=tokens, duration=1.0, text="".join(words)))

    sent = sum(size for _, size in traffic.since(start))
    final_html = panel._sections["talk"].body.children[-1].value
    print(
        f"\n{tokens} tokens: {sent / 1024:.1f} KiB sent, final HTML {len(final_html) / 1024:.1f} KiB"
    )
    assert sent <= 3 * len(final_html) + 20 * 1024
