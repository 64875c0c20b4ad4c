"""Cassettes in chat mode: tool calls are recorded and replayed, and the fingerprint of a
turn covers its tools, the tool calls and results in its history, and tool rounds.

These drive the recording and replaying providers directly (the engine's tool loop is not
needed to check what a cassette holds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, ToolCall, ToolSpec, TurnRequest
from awf_nb.providers.cassette import CassetteMismatch, Recorder, Replayer
from awf_nb.providers.cassette.tape import fingerprint, request_summary
from awf_nb.providers.scripted import ScriptedProvider
from awf_nb.secrets import Masker
from tests.support import collect, of_type

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}},
)
SECRET = "hunter2-very-secret"
CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
ROUND = [
    Message("user", "weather?"),
    Message("assistant", "", tool_calls=(CALL,)),
    Message("tool", "sunny", tool_call_id="call_1", name="get_weather"),
]
REPLIES: list[Any] = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "key": SECRET}}]},
    "It is sunny.",
]


def first_turn(**changes: Any) -> TurnRequest:
    fields: dict[str, Any] = {
        "prompt": "weather?",
        "step": "chat",
        "options": {"replies": REPLIES},
        "tools": [WEATHER],
    }
    return TurnRequest(**{**fields, **changes})


def tool_round(**changes: Any) -> TurnRequest:
    return first_turn(**{"prompt": "", "history": ROUND, "continues": True, **changes})


def summary(turn: TurnRequest) -> dict[str, Any]:
    return request_summary("scripted", turn, Masker())


async def record(path: Path) -> list[list[Any]]:
    """Record a tool call and the answer after its result; returns each turn's events."""
    recorder = Recorder(path, workflow="chat", masker=Masker([SECRET]))
    provider = recorder.providers(ScriptedProvider)("scripted")
    return [
        await collect(provider.stream(first_turn())),
        await collect(provider.stream(tool_round())),
    ]


async def test_tool_calls_are_recorded_masked_and_replayed(tmp_path: Path) -> None:
    cassette = tmp_path / "tools.cassette.jsonl"
    live = await record(cassette)

    turns = [json.loads(line) for line in cassette.read_text().splitlines()][1:]
    [call_event] = [e["tool_call"] for e in turns[0]["events"] if "tool_call" in e]
    assert call_event == {
        "id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris", "key": "***"}',
    }
    assert SECRET not in cassette.read_text()
    assert turns[0]["request"]["tools"]["names"] == ["get_weather"]
    assert "continues" not in turns[0]["request"]
    assert turns[1]["request"]["continues"] is True

    provider = Replayer(cassette, workflow="chat", masker=Masker([SECRET])).providers()("scripted")
    replayed = [
        await collect(provider.stream(first_turn())),
        await collect(provider.stream(tool_round())),
    ]
    assert of_type(replayed[0], ToolCall) == [
        ToolCall("call_1", "get_weather", '{"city": "Paris", "key": "***"}')
    ]
    assert of_type(live[0], ToolCall)[0].name == "get_weather"
    assert replayed[1][-1] == Final("It is sunny.") == live[1][-1]


async def test_a_changed_tool_schema_is_a_mismatch(tmp_path: Path) -> None:
    cassette = tmp_path / "tools.cassette.jsonl"
    await record(cassette)
    provider = Replayer(cassette, workflow="chat", masker=Masker()).providers()("scripted")
    changed = ToolSpec(WEATHER.name, WEATHER.description, {"type": "object"})
    with pytest.raises(CassetteMismatch) as caught:
        await collect(provider.stream(first_turn(tools=[changed])))
    assert "the tools differ (a description or parameter schema changed)" in caught.value.message


async def test_a_missing_tool_is_a_mismatch_naming_the_tools(tmp_path: Path) -> None:
    cassette = tmp_path / "tools.cassette.jsonl"
    await record(cassette)
    provider = Replayer(cassette, workflow="chat", masker=Masker()).providers()("scripted")
    with pytest.raises(CassetteMismatch) as caught:
        await collect(provider.stream(first_turn(tools=[])))
    assert "the tools differ (recorded get_weather, now none)" in caught.value.message


@pytest.mark.parametrize(
    ("label", "changed"),
    [
        ("tool result", [*ROUND[:2], Message("tool", "rain", tool_call_id="call_1", name="get_weather")]),
        ("call arguments", [ROUND[0], Message("assistant", "", tool_calls=(ToolCall("call_1", "get_weather", "{}"),)), ROUND[2]]),
        ("call id", [ROUND[0], Message("assistant", "", tool_calls=(ToolCall("call_9", "get_weather", CALL.arguments),)), Message("tool", "sunny", tool_call_id="call_9", name="get_weather")]),
    ],
)  # fmt: skip
def test_the_fingerprint_covers_tool_calls_and_results(label: str, changed: list[Message]) -> None:
    assert fingerprint(summary(tool_round())) != fingerprint(
        summary(tool_round(history=changed))
    ), label


def test_the_fingerprint_covers_tool_rounds() -> None:
    assert fingerprint(summary(tool_round())) != fingerprint(summary(tool_round(continues=False)))


def test_turns_without_tools_keep_the_fingerprint_they_had() -> None:
    """A cassette recorded before tools existed still replays: no new keys, same hashes."""
    turn = TurnRequest(
        prompt="hi",
        system_prompt="sys",
        history=[Message("user", "a"), Message("assistant", "b")],
        options={"replies": ["x"]},
    )
    assert summary(turn) == {
        "provider": "scripted",
        "prompt": "hi",
        "system_prompt": "sys",
        "history": {
            "messages": 2,
            # sha256 of [["user","a"],["assistant","b"]] as before tools
            "sha256": "e9090a957d1421f5455c50af599a9df682e4848d7d884716d41756359ac698ae",
        },
        "session_id": False,
        "options": {"replies": ["x"]},
    }
