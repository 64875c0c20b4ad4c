"""The trace file every run writes next to its transcript, and how to turn it off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awf_nb.runs import prepare_run
from awf_nb.traces import TRACE_FILE, file_enabled
from awf_nb.traces.otlp_json import TraceFile, decode, encode
from awf_nb.traces.spans import Span

WORKFLOW = """
name: hello
states:
  initial: greet
  greet:
    type: agent
    provider: scripted
    prompt: "Say hello"
    options: {replies: ["hello"]}
    on_success: done
  done: {type: terminal}
"""


async def _run(tmp_path: Path, **options) -> Path:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    prepared = prepare_run(
        tmp_path / "wf.yaml", storage=tmp_path / "store", cwd=tmp_path, **options
    )
    await prepared.run()
    return tmp_path / "store" / "runs" / prepared.run_id / TRACE_FILE


async def test_a_run_writes_its_trace_as_otlp_json_lines(tmp_path: Path) -> None:
    path = await _run(tmp_path, env={})
    lines = path.read_text().splitlines()
    request = json.loads(lines[0])
    scope = request["resourceSpans"][0]["scopeSpans"][0]
    assert scope["schemaUrl"].endswith("/1.44.0")
    names = [s.name for s in decode(lines)]
    assert names[-1] == "invoke_workflow hello"
    assert "chat" in names and "invoke_agent greet" in names


@pytest.mark.parametrize(
    "options",
    [{"trace_file": False, "env": {}}, {"env": {"AWF_TRACE_FILE": "0"}}],
    ids=["option", "environment"],
)
async def test_the_trace_file_can_be_turned_off(tmp_path: Path, options: dict) -> None:
    path = await _run(tmp_path, **options)
    assert path.parent.is_dir() and not path.exists()


def test_file_enabled_by_default() -> None:
    assert file_enabled(None, {}) and not file_enabled(None, {"AWF_TRACE_FILE": "off"})
    assert not file_enabled(False, {})


def test_the_file_stops_at_its_cap(tmp_path: Path) -> None:
    span = Span("0" * 31 + "1", "0" * 15 + "1", "", "x" * 100, 1, 1, 2)
    one = len(json.dumps(encode([span]), separators=(",", ":"))) + 1
    trace = TraceFile(tmp_path / TRACE_FILE, max_bytes=one * 2)
    for _ in range(5):
        trace.add(span)
        trace.flush()
    assert len((tmp_path / TRACE_FILE).read_text().splitlines()) == 2
    assert trace.dropped == 3


def test_without_contents_the_persons_messages_are_not_kept() -> None:
    from awf_nb.engine import events as ev
    from awf_nb.traces.spans import SpanBuilder

    ended: list[Span] = []
    builder = SpanBuilder(ended.append)
    builder.emit(ev.RunStarted("r1", "talk"))
    builder.emit(ev.StepStarted("r1", "chat", "agent"))
    for turn in range(1, 4):
        builder.emit(ev.UserMessage("r1", "chat", f"private message {turn}", turn=turn))
        builder.emit(ev.TurnStarted("r1", "chat", turn))
        builder.emit(ev.TurnFinished("r1", "chat", turn, 10, 0.1, input_tokens=6, output_tokens=4))
    assert not builder._prompts  # the text of each message is neither kept nor on a span
    assert [s.name for s in ended] == ["chat"] * 3
    assert "private" not in repr([s.attributes for s in ended])


def test_turns_are_priced_unless_reported_and_the_run_takes_the_evals_total() -> None:
    from awf_nb.engine import events as ev
    from awf_nb.traces.spans import SpanBuilder

    ended: list[Span] = []
    builder = SpanBuilder(ended.append, price=lambda step, i, o: (i + 2 * o) / 1e6)
    builder.emit(ev.RunStarted("r1", "talk"))
    builder.emit(ev.StepStarted("r1", "chat", "agent"))
    builder.emit(ev.TurnStarted("r1", "chat", 1))
    builder.emit(ev.TurnFinished("r1", "chat", 1, 30, 0.1, input_tokens=10, output_tokens=20))
    builder.emit(ev.TurnStarted("r1", "chat", 1, speaker="user"))  # a simulated user
    builder.emit(ev.TurnFinished("r1", "chat", 1, 9, 0.1, speaker="user", input_tokens=9))
    builder.emit(ev.TurnStarted("r1", "chat", 2))
    builder.emit(
        ev.TurnFinished("r1", "chat", 2, 5, 0.1, input_tokens=4, output_tokens=1, cost_usd=0.5)
    )
    builder.emit(ev.StepFinished("r1", "chat", "completed", 0.3))
    builder.run_cost = 0.75  # what the eval's table shows
    builder.finish("completed")
    agent, user, reported = (s.attributes for s in ended[:3])
    assert agent["awf.usage.cost_usd"] == 50 / 1e6
    assert agent["awf.usage.cost_source"] == "pricing"
    assert "awf.usage.cost_usd" not in user
    assert reported["awf.usage.cost_usd"] == 0.5
    assert reported["awf.usage.cost_source"] == "provider"
    step, run = ended[3], ended[4]
    assert step.attributes["awf.usage.cost_usd"] == 0.5 + 50 / 1e6
    assert run.attributes["awf.usage.cost_usd"] == 0.75
