"""A model server can't hurt the run: the openai_compatible provider and the engine against
a hostile OpenAI-compatible server on 127.0.0.1 (tests/support/openai_server.py).

Endless or oversized replies are refused at the reply's bounds (`options.max_reply_bytes`
counts text, reasoning and tool calls; `options.max_tool_calls` the calls) with the server
seeing the client go away; numbers no server could mean (usage `NaN`, `Infinity`, `1e400`,
negative counts) and JSON nested without end are provider errors with one line, never a
crash; a query string in `base_url` stays a query string.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.api import RunResult, arun
from awf_nb.engine.ports import Final, TextDelta, ToolCall, TurnRequest, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers import openai_stream
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from awf_nb.store import Store
from tests.support import collect, of_type
from tests.support.openai_server import OpenAIServer, Reply

KEY = "sk-live-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def turn_for(server: OpenAIServer, **fields: Any) -> TurnRequest:
    options = {"base_url": server.base_url, "model": "m", **fields.pop("options", {})}
    return TurnRequest(prompt="Hi", options=options, **fields)


async def failure(request: TurnRequest) -> tuple[list[object], ProviderError]:
    """The events a turn streamed before it failed, and its error (one line)."""
    provider = OpenAICompatibleProvider()
    events: list[object] = []
    try:
        with pytest.raises(ProviderError) as caught:
            async for event in provider.stream(request):
                events.append(event)
    finally:
        await provider.aclose()
    assert "\n" not in caught.value.message
    return events, caught.value


def arguments_piece(text: str, index: int = 0) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


def raw_event(payload: Any) -> str:
    return f"data: {json.dumps(payload)}\n\n"


# --- endless and oversized replies ------------------------------------------------------------


async def test_endless_tool_call_arguments_stop_at_the_reply_bound(
    openai_server: OpenAIServer,
) -> None:
    """20 MB of one call's arguments (a server that never ends them): the provider gathers
    pieces before it yields the call, so it refuses them at the bound itself."""
    openai_server.script(Reply.endless(arguments_piece("x" * 1000), times=20_000))
    _events, error = await failure(turn_for(openai_server, max_reply_bytes=100_000))
    assert error.message.endswith(
        "the reply is longer than 100000 bytes (options.max_reply_bytes); "
        "the text received so far is kept"
    )
    record = openai_server.wait_stream_ended(0, 30.0)
    assert record.client_gone_at is not None, "the provider kept reading"
    assert not record.finished


async def test_endless_reasoning_stops_at_the_reply_bound(openai_server: OpenAIServer) -> None:
    openai_server.script(Reply.endless({"reasoning_content": "hmm " * 250}, times=20_000))
    _events, error = await failure(turn_for(openai_server, max_reply_bytes=50_000))
    assert "the reply is longer than 50000 bytes (options.max_reply_bytes)" in error.message
    assert openai_server.wait_stream_ended(0, 30.0).client_gone_at is not None


async def test_text_then_tool_calls_past_the_bound_keep_the_text(
    openai_server: OpenAIServer,
) -> None:
    """The bound counts the text and the calls together; the text streamed is kept."""
    raw = raw_event({"choices": [{"index": 0, "delta": {"content": "Let me look."}}]})
    raw += raw_event({"choices": [{"index": 0, "delta": arguments_piece("y" * 900)}]}) * 2
    openai_server.script(Reply(raw=raw + "data: [DONE]\n\n"))
    events, error = await failure(turn_for(openai_server, max_reply_bytes=1000))
    assert of_type(events, TextDelta) == [TextDelta("Let me look.")]
    assert "(options.max_reply_bytes)" in error.message


async def test_too_many_tool_calls_in_one_reply_are_refused(openai_server: OpenAIServer) -> None:
    calls = [{"index": i, "id": f"c{i}", "function": {"name": "Read"}} for i in range(300)]
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}
    openai_server.script(Reply(raw=raw_event(chunk) + "data: [DONE]\n\n"))
    _events, error = await failure(turn_for(openai_server))  # the default: 256
    assert error.message.endswith(
        "the reply asks for more than 256 tool calls (options.max_tool_calls); "
        "the text received so far is kept"
    )


async def test_an_endless_stream_of_empty_events_is_bounded(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events carrying nothing count for nothing in the reply: the stream's own bytes are
    bounded too (256 × max_reply_bytes; the 64 MiB floor lowered for the test)."""
    monkeypatch.setattr(openai_stream, "MIN_STREAM_BYTES", 0)
    openai_server.script(Reply.endless({}))  # forever, until the client goes
    _events, error = await failure(turn_for(openai_server, max_reply_bytes=1000))
    assert "the stream is longer than 256000 bytes (256 × options.max_reply_bytes)" in (
        error.message
    )
    assert openai_server.wait_stream_ended(0, 30.0).client_gone_at is not None


async def test_an_oversized_json_completion_is_refused(openai_server: OpenAIServer) -> None:
    openai_server.script(Reply.text("word " * 400_000, as_json=True))  # 2 MB of text
    _events, error = await failure(turn_for(openai_server, max_reply_bytes=1000))
    assert "the reply is longer than 1049576 bytes (options.max_reply_bytes" in error.message


# --- numbers and nesting no server could mean ---------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [(float("nan"), "NaN"), (float("inf"), "Infinity"), ("1e400", "Infinity"), (-5, "-5"),
     (2.5, "2.5"), (2**60, str(2**60))],
)  # fmt: skip
async def test_usage_that_is_no_token_count_is_a_provider_error(
    openai_server: OpenAIServer, value: Any, shown: str
) -> None:
    usage = json.dumps({"prompt_tokens": 12, "completion_tokens": "VALUE"})
    usage = usage.replace('"VALUE"', value if isinstance(value, str) else json.dumps(value))
    raw = raw_event({"choices": [{"index": 0, "delta": {"content": "ok"}}]})
    raw += f'data: {{"choices": [], "usage": {usage}}}\n\ndata: [DONE]\n\n'
    openai_server.script(Reply(raw=raw))
    _events, error = await failure(turn_for(openai_server))
    assert error.message.endswith(
        "malformed stream: usage.completion_tokens is not a token count "
        f"(a whole number from 0; got {shown})"
    )


async def test_an_event_nested_200000_deep_is_a_malformed_stream(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(Reply(raw="data: " + "[" * 200_000 + "]" * 200_000 + "\n\n"))
    _events, error = await failure(turn_for(openai_server))
    assert error.message.endswith("malformed stream: an event nested deeper than 100 levels")


async def test_a_json_completion_nested_without_end_is_malformed(
    openai_server: OpenAIServer,
) -> None:
    body = '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"
    openai_server.script(Reply(raw=body, content_type="application/json"))
    _events, error = await failure(turn_for(openai_server))
    assert error.message.endswith("malformed response: JSON nested deeper than 100 levels")


async def test_nesting_inside_strings_is_only_text(openai_server: OpenAIServer) -> None:
    text = "[" * 5000 + "{"
    openai_server.script(Reply(raw=raw_event({"choices": [{"delta": {"content": text}}]})
                               + "data: [DONE]\n\n"))  # fmt: skip
    provider = OpenAICompatibleProvider()
    events = await collect(provider.stream(turn_for(openai_server)))
    await provider.aclose()
    assert events[-1] == Final(text)


# --- base_url with a query string -------------------------------------------------------------


async def test_a_query_in_base_url_stays_after_the_path(openai_server: OpenAIServer) -> None:
    """`…/v1?key=K` posts to `…/v1/chat/completions?key=K`; messages show `key=***`."""
    base_url = f"{openai_server.base_url}?key={KEY}&api-version=2"
    openai_server.script(Reply.text("Fine."), Reply.error(503))
    provider = OpenAICompatibleProvider()
    try:
        events = await collect(
            provider.stream(turn_for(openai_server, options={"base_url": base_url}))
        )
        assert events[-1] == Final("Fine.")
        assert openai_server.requests[-1].path == f"/v1/chat/completions?key={KEY}&api-version=2"
        with pytest.raises(ProviderError) as caught:
            await collect(provider.stream(turn_for(openai_server, options={"base_url": base_url})))
    finally:
        await provider.aclose()
    assert caught.value.message == (
        f"openai_compatible: {openai_server.base_url}/chat/completions?key=***&api-version=2: "
        "server error (HTTP 503)"
    )


# --- the same, through a whole run ------------------------------------------------------------


def workflow(server: OpenAIServer, tools: bool = False, limits: str = "", **options: Any) -> str:
    extra = "".join(f", {k}: {json.dumps(v)}" for k, v in options.items())
    return textwrap.dedent(f"""
        name: hostile
        {limits}
        states:
          initial: ask
          ask:
            type: agent
            provider: openai_compatible
            prompt: go
            options: {{base_url: "{server.base_url}", model: m{extra}}}
            {"tools: {builtin: [Read]}" if tools else ""}
            on_success: done
          done: {{type: terminal}}
        """)


async def run(text: str, tmp_path: Path) -> RunResult:
    source = tmp_path / "wf.yaml"
    source.write_text(text)
    return await arun(source, storage=Store(tmp_path / "runs"), cwd=tmp_path, show=False)


def saved_status(tmp_path: Path, result: RunResult) -> str:
    return Store(tmp_path / "runs").load_state(result.run_id).status


async def test_endless_tool_calls_on_a_step_without_tools_fail_the_run(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    # 20 MB of a call's arguments, its name repeated in every piece (as llama.cpp does)
    piece = {"index": 0, "id": "c0", "function": {"name": "Bash", "arguments": "z" * 1000}}
    openai_server.script(Reply.endless({"tool_calls": [piece]}, times=20_000))
    result = await run(workflow(openai_server, max_reply_bytes=200_000), tmp_path)
    assert result.status == "failed"
    assert "the reply is longer than 200000 bytes (options.max_reply_bytes)" in result.error
    assert saved_status(tmp_path, result) == "failed"
    assert openai_server.wait_stream_ended(0, 30.0).client_gone_at is not None


async def test_max_tool_calls_can_be_lowered(openai_server: OpenAIServer, tmp_path: Path) -> None:
    calls = [{"name": "Read", "arguments": json.dumps({"path": "x"})}] * 5
    openai_server.script(Reply.calls(*calls))
    result = await run(workflow(openai_server, tools=True, max_tool_calls=3), tmp_path)
    assert result.status == "failed"
    assert "the reply asks for more than 3 tool calls (options.max_tool_calls)" in result.error


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "1e400", "-1000000"])
async def test_bad_usage_fails_the_run_as_a_provider_error(
    openai_server: OpenAIServer, tmp_path: Path, bad: str
) -> None:
    """Not an internal error (the run left "interrupted"), and a negative count does not
    buy room under `limits.max_tokens`."""
    raw = raw_event({"choices": [{"index": 0, "delta": {"content": "ok"}}]})
    raw += f'data: {{"choices": [], "usage": {{"prompt_tokens": {bad}, "completion_tokens": 1}}}}'
    openai_server.script(Reply(raw=raw + "\n\ndata: [DONE]\n\n"))
    result = await run(workflow(openai_server, limits="limits: {max_tokens: 100}"), tmp_path)
    assert result.status == "failed"
    assert result.exit_code == 3  # an execution (provider) error
    assert "usage.prompt_tokens is not a token count" in result.error
    assert saved_status(tmp_path, result) == "failed"


async def test_tool_call_arguments_nested_100000_deep_fail_the_run(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    arguments = '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}"
    openai_server.script(Reply.calls({"name": "Read", "arguments": arguments}))
    result = await run(workflow(openai_server, tools=True), tmp_path)
    assert result.status == "failed"
    assert result.exit_code == 3
    assert "the arguments of a call to 'Read' are nested deeper than 100 levels" in result.error
    assert saved_status(tmp_path, result) == "failed"


async def test_a_deeply_nested_event_fails_the_run_as_a_provider_error(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Reply(raw="data: " + '{"a":[' * 50_000 + "]}" * 50_000 + "\n\n"))
    result = await run(workflow(openai_server), tmp_path)
    assert result.status == "failed"
    assert result.exit_code == 3
    assert "malformed stream: an event nested deeper than 100 levels" in result.error


async def test_usage_reported_fine_is_kept(openai_server: OpenAIServer) -> None:
    openai_server.script(Reply.text("All good."))
    provider = OpenAICompatibleProvider()
    events = await collect(provider.stream(turn_for(openai_server)))
    await provider.aclose()
    assert of_type(events, Usage)[0].output_tokens == 2
    assert not of_type(events, ToolCall)
