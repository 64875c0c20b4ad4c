"""A reply cut at its length limit (max_tokens) is known as such everywhere: in the turn's
event and its recorded turn, in a cassette and its replay, and on every frontend (a marker
after the reply instead of text that just stops mid-word)."""

from __future__ import annotations

import io
from pathlib import Path

from awf_nb.api import arun
from awf_nb.engine import events as ev
from awf_nb.frontends.terminal import TerminalSink
from awf_nb.store import Store
from tests.support.events import Collect

CHAT = """
name: story
states:
  initial: tell
  tell:
    type: agent
    provider: scripted
    mode: conversation
    prompt: Tell me a story.
    options:
      max_tokens: 5
      replies: ["Once upon a time there was a fox.", "The end."]
    on_success: done
  done: {type: terminal}
"""


async def test_a_cut_reply_is_marked_in_its_event_its_turn_and_its_replay(tmp_path: Path) -> None:
    store = Store(tmp_path / "storage")
    cassette = tmp_path / "story.cassette.jsonl"
    sink = Collect()
    result = await arun(CHAT, replies=["go on", ""], storage=store, sink=sink, record=cassette)

    assert result.ok, result.error
    finished = sink.of(ev.TurnFinished)
    assert [(e.text, e.cut) for e in finished] == [
        ("Once upon a time the", True),  # 5 tokens of 4 characters
        ("The end.", False),
    ]
    turns = [t for t in result.steps["tell"].conversation.turns if t.role == "assistant"]
    assert [t.cut for t in turns] == [True, False]
    assert [t.cut for t in store.load_state(result.run_id).steps["tell"].conversation.turns] == [
        False,
        True,
        False,
        False,
    ]

    replay_sink = Collect()
    replayed = await arun(CHAT, storage=store, sink=replay_sink, replay=cassette)
    assert replayed.ok, replayed.error
    assert [e.cut for e in replay_sink.of(ev.TurnFinished)] == [True, False]


def test_the_terminal_says_a_reply_was_cut() -> None:
    out, err = io.StringIO(), io.StringIO()
    sink = TerminalSink("streaming", out=out, err=err, color=True)
    sink.emit(ev.TurnStarted("r", "tell", 1))
    sink.emit(ev.AgentText("r", "tell", "Once upon a time the"))
    sink.emit(ev.TurnFinished("r", "tell", 1, 5, 0.2, text="Once upon a time the", cut=True))

    assert out.getvalue().endswith("Once upon a time the\x1b[2m …\x1b[0m\n")
    assert "cut at max_tokens" in err.getvalue()
