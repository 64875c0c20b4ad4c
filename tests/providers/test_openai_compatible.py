"""The openai_compatible provider against the real-HTTP test server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import multiprocessing
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.engine.ports import (
    Final,
    Message,
    Notice,
    Provider,
    TextDelta,
    ToolCall,
    ToolSpec,
    TurnRequest,
    Usage,
)
from awf_nb.errors import ProviderError
from awf_nb.providers.batched_reads import BatchedReads
from awf_nb.providers.http_client import ClientLease, loop_clients, tls_context
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from awf_nb.providers.openai_errors import connect_reason, transport_error
from awf_nb.providers.openai_request import request_body, wire_message, wire_tool
from awf_nb.providers.openai_stream import StreamReader
from tests.support import collect, of_type
from tests.support.openai_server import OpenAIServer, Reply, prompt_tokens
from tests.support.waiting import free_port, until

pytestmark = pytest.mark.usefixtures("no_openai_environment")

API_KEY = "sk-test-SECRET-0123456789abcdef"
ENDPOINT = "/v1/chat/completions"


def turn_for(server: OpenAIServer, prompt: str = "Hi", **options: Any) -> TurnRequest:
    return TurnRequest(
        prompt=prompt, options={"base_url": server.base_url, "model": "test-model", **options}
    )


async def fail(provider: OpenAICompatibleProvider, request: TurnRequest) -> ProviderError:
    """Run a turn that must fail; returns the error (and checks it never leaks the key)."""
    with pytest.raises(ProviderError) as caught:
        await collect(provider.stream(request))
    error = caught.value
    assert API_KEY not in str(error)
    assert API_KEY not in repr(error.args)
    assert "\n" not in error.message  # one line
    return error


def endpoint(server: OpenAIServer) -> str:
    return f"{server.base_url}/chat/completions"


# --- the happy path ------------------------------------------------------------------------


def test_is_a_history_based_provider() -> None:
    provider = OpenAICompatibleProvider()
    assert isinstance(provider, Provider)
    assert (provider.name, provider.session_kind) == ("openai_compatible", "history")


async def test_streams_deltas_then_usage_then_final(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.text("The answer is 42."))
    events = await collect(provider.stream(turn_for(openai_server)))
    # the tokens, in order (those that arrive together come as one delta)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert events[: len(deltas)] == deltas
    assert "".join(d.text for d in deltas) == "The answer is 42."
    usage_sent = openai_server.requests[-1].usage_sent
    assert usage_sent is not None
    assert events[len(deltas) :] == [
        Usage(input_tokens=usage_sent["prompt_tokens"], output_tokens=4, estimated=False),
        Final("The answer is 42."),
    ]


async def test_events_arriving_in_one_read_become_one_text_delta(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    """A fast server packs many events into one network read: the engine gets their text
    as one delta (per-event costs are paid once), in order; other events are kept."""

    def event(delta: dict[str, Any]) -> str:
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        return f"data: {json.dumps(chunk)}\n\n"

    words = [f" w{i}" for i in range(40)]
    call = {"tool_calls": [{"index": 0, "function": {"name": "search", "arguments": "{}"}}]}
    raw = "".join(event({"content": w}) for w in words[:20]) + event(call)
    raw += "".join(event({"content": w}) for w in words[20:]) + "data: [DONE]\n\n"
    openai_server.script(Reply(raw=raw))

    events = await collect(provider.stream(turn_for(openai_server)))

    deltas = of_type(events, TextDelta)
    assert "".join(d.text for d in deltas) == "".join(words)
    assert len(deltas) < 10, "one delta per read, not one per event"
    assert of_type(events, ToolCall) == [ToolCall("call_1", "search", "{}")]
    assert events[-1] == Final("".join(words))


async def test_the_request_is_a_streamed_chat_completion(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    request = turn_for(
        openai_server,
        temperature=0.2,
        top_p=0.9,
        seed=7,
        stop=["\n\n"],
        max_tokens=64,
        headers={"X-Team": "awf", "X-Trace": 5},
        api_key=API_KEY,
    )
    await collect(provider.stream(request))
    sent = openai_server.requests[-1]
    assert (sent.method, sent.path) == ("POST", ENDPOINT)
    assert sent.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["\n\n"],
        "max_completion_tokens": 64,
    }
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["x-team"] == "awf"
    assert sent.headers["x-trace"] == "5"
    assert sent.headers["accept"] == "text/event-stream"


async def test_no_authorization_header_without_a_key(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    await collect(provider.stream(turn_for(openai_server, api_key="")))
    assert "authorization" not in openai_server.requests[-1].headers


async def test_the_whole_history_is_sent_every_turn(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    request = TurnRequest(
        prompt="And in French?",
        system_prompt="You translate.",
        history=[Message("user", "Say hello"), Message("assistant", "Hello")],
        options={"base_url": openai_server.base_url, "model": "m"},
    )
    await collect(provider.stream(request))
    assert openai_server.requests[-1].body["messages"] == [
        {"role": "system", "content": "You translate."},
        {"role": "user", "content": "Say hello"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "And in French?"},
    ]


async def test_settings_come_from_the_environment(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url + "/")
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    events = await collect(provider.stream(TurnRequest(prompt="Hi")))
    assert isinstance(events[-1], Final)
    sent = openai_server.requests[-1]
    assert sent.path == ENDPOINT
    assert sent.body["model"] == "env-model"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"


async def test_options_win_over_the_environment(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    await collect(provider.stream(turn_for(openai_server)))
    assert openai_server.requests[-1].body["model"] == "test-model"


async def test_each_turn_reads_its_options_and_the_environment_afresh(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a turn sends follows the options and variables of that turn, even when the
    same options map is changed in place between turns."""
    request = TurnRequest(
        prompt="Hi", options={"base_url": openai_server.base_url, "headers": {"X-N": "1"}}
    )
    monkeypatch.setenv("OPENAI_MODEL", "first-model")
    await collect(provider.stream(request))
    monkeypatch.setenv("OPENAI_MODEL", "second-model")
    request.options["temperature"] = 0.5
    request.options["headers"]["X-N"] = "2"
    await collect(provider.stream(request))
    request.env = {"OPENAI_MODEL": "turn-model"}
    await collect(provider.stream(request))
    first, second, third = openai_server.requests
    assert (first.body["model"], first.headers["x-n"], "temperature" in first.body) == (
        "first-model",
        "1",
        False,
    )
    assert (second.body["model"], second.headers["x-n"], second.body["temperature"]) == (
        "second-model",
        "2",
        0.5,
    )
    assert third.body["model"] == "turn-model"


async def test_usage_is_estimated_when_the_server_sends_none(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.text("abcd efgh", usage=False))
    request = TurnRequest(
        prompt="p" * 8, system_prompt="s" * 4, options=turn_for(openai_server).options
    )
    (usage,) = of_type(await collect(provider.stream(request)), Usage)
    assert usage == Usage(input_tokens=3, output_tokens=3, estimated=True)


async def test_tool_calls_become_tool_call_events(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    calls = [
        {"name": "read_file", "arguments": '{"path": "src/app.py"}'},
        {"name": "grep", "arguments": '{"pattern": "TODO"}'},
    ]
    openai_server.script(Reply(tokens=["Let me look."], tool_calls=calls))
    events = await collect(provider.stream(turn_for(openai_server)))
    assert of_type(events, ToolCall) == [
        ToolCall("call_0", "read_file", '{"path": "src/app.py"}'),
        ToolCall("call_1", "grep", '{"pattern": "TODO"}'),
    ]
    assert events[-1] == Final("Let me look.")


@pytest.mark.parametrize("as_json", [False, True], ids=["stream", "json"])
async def test_a_reply_cut_at_max_tokens_says_so(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, as_json: bool
) -> None:
    openai_server.script(Reply.text("It was a dark and", finish_reason="length", as_json=as_json))
    events = await collect(provider.stream(turn_for(openai_server, max_tokens=5)))
    assert events[-1] == Final("It was a dark and", cut=True)

    openai_server.script(Reply.text("Done."))
    events = await collect(provider.stream(turn_for(openai_server)))
    assert events[-1] == Final("Done.", cut=False)


async def test_a_server_ignoring_stream_true_still_works(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.text("whole answer", as_json=True))
    events = await collect(provider.stream(turn_for(openai_server)))
    assert events[0] == TextDelta("whole answer")
    assert of_type(events, Usage)[0].estimated is False
    assert events[-1] == Final("whole answer")


async def test_one_connection_serves_the_whole_run(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    for _ in range(3):
        await collect(provider.stream(turn_for(openai_server)))
    assert [r.connection for r in openai_server.requests] == [1, 1, 1]


async def test_aclose_closes_the_client_and_a_later_turn_reconnects(
    openai_server: OpenAIServer,
) -> None:
    loop = asyncio.get_running_loop()
    provider = OpenAICompatibleProvider()
    await collect(provider.stream(turn_for(openai_server)))
    [client] = loop_clients(loop)  # the plain-http client
    await provider.aclose()
    assert client.is_closed
    assert loop_clients(loop) == []
    await collect(provider.stream(turn_for(openai_server)))
    assert [r.connection for r in openai_server.requests] == [1, 2]
    await provider.aclose()
    await provider.aclose()  # closing twice is fine


async def test_runs_on_one_loop_share_its_client_until_the_last_one_closes(
    openai_server: OpenAIServer,
) -> None:
    """Providers of runs on the same event loop borrow one client (one pool of
    connections); the last one to close closes it, with its connections."""
    loop = asyncio.get_running_loop()
    first, second = OpenAICompatibleProvider(), OpenAICompatibleProvider()
    await collect(first.stream(turn_for(openai_server)))
    await collect(second.stream(turn_for(openai_server)))
    [client] = loop_clients(loop)
    assert [r.connection for r in openai_server.requests] == [1, 1]  # the pooled one
    await first.aclose()
    assert not client.is_closed  # the second run still uses it
    await collect(second.stream(turn_for(openai_server)))
    await second.aclose()
    assert client.is_closed
    assert loop_clients(loop) == []


async def test_tls_is_set_up_only_for_https(openai_server: OpenAIServer) -> None:
    """Reading the CA bundle costs start-up time: a plain-http server (a local model) never
    pays it, and an https URL always gets a verifying client."""
    tls_context.cache_clear()
    provider = OpenAICompatibleProvider()
    lease = ClientLease()
    try:
        await collect(provider.stream(turn_for(openai_server)))
        assert tls_context.cache_info().currsize == 0
        secure = lease.client("https://models.example.test/v1")
        assert tls_context.cache_info().currsize == 1
        assert secure is not lease.client(openai_server.base_url)
        assert secure is lease.client("HTTPS://other.example.test/v1")
    finally:
        await provider.aclose()
        await lease.aclose()


# --- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model": "m"}, "openai_compatible: base_url is required"),
        ({"base_url": "http://127.0.0.1:9/v1"}, "openai_compatible: model is required"),
        (
            {"base_url": "127.0.0.1:9/v1", "model": "m"},
            "openai_compatible: base_url must start with http:// or https:// "
            "(got '127.0.0.1:9/v1')",
        ),
        ({"temperature": 2.5}, "options.temperature must be a number from 0 to 2 (got 2.5)"),
        ({"temperature": "hot"}, "options.temperature must be a number from 0 to 2 (got 'hot')"),
        ({"temperature": True}, "options.temperature must be a number from 0 to 2 (got True)"),
        ({"top_p": -0.1}, "options.top_p must be a number from 0 to 1 (got -0.1)"),
        ({"top_p": 1.5}, "options.top_p must be a number from 0 to 1 (got 1.5)"),
        ({"max_tokens": 0}, "options.max_tokens must be a whole number >= 1 (got 0)"),
        ({"max_completion_tokens": 1.5}, "options.max_completion_tokens must be a whole number"),
        ({"seed": "x"}, "options.seed must be a whole number (got 'x')"),
        ({"stop": [1]}, "options.stop must be a string or a list of strings"),
        ({"headers": ["X-A"]}, "options.headers must be a mapping of header names to string"),
        ({"temprature": 0.5}, 'unknown option "temprature" (did you mean "temperature"?)'),
        ({"model": 3}, "options.model must be a string"),
        ({"context_window": -5}, "options.context_window must be a whole number >= 1"),
        ({"max_tokens_field": "n"}, "options.max_tokens_field must be one of"),
    ],
)
async def test_bad_options_are_clear_errors(
    openai_server: OpenAIServer,
    provider: OpenAICompatibleProvider,
    options: dict[str, Any],
    message: str,
) -> None:
    base = {"base_url": openai_server.base_url, "model": "m"}
    if "base_url" in options or options == {"model": "m"}:
        base = {}
    error = await fail(provider, TurnRequest(prompt="Hi", options={**base, **options}))
    assert message in str(error)
    assert not error.retryable
    assert openai_server.requests == []  # nothing was sent


async def test_a_missing_base_url_says_how_to_set_it(provider: OpenAICompatibleProvider) -> None:
    error = await fail(provider, TurnRequest(prompt="Hi", options={"model": "m"}))
    assert error.message == "openai_compatible: base_url is required"
    assert (
        error.hint == "set options.base_url on the step or the OPENAI_BASE_URL environment variable"
    )


async def test_valid_edges_of_the_ranges_are_accepted(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    await collect(provider.stream(turn_for(openai_server, temperature=0, top_p=1)))
    await collect(provider.stream(turn_for(openai_server, temperature=2, top_p=0)))
    assert [r.body["temperature"] for r in openai_server.requests] == [0, 2]


# --- HTTP errors ---------------------------------------------------------------------------


async def test_401_is_an_authentication_error(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.require_api_key = "the-right-key"
    error = await fail(provider, turn_for(openai_server, api_key=API_KEY))
    assert error.message.startswith(
        f"openai_compatible: {endpoint(openai_server)}: authentication failed (HTTP 401)"
    )
    assert not error.retryable


async def test_429_says_when_to_retry(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.rate_limited(retry_after="2"))
    error = await fail(provider, turn_for(openai_server, api_key=API_KEY))
    assert error.message == (
        f"openai_compatible: {endpoint(openai_server)}: rate limited, retry after 2.00 s (HTTP 429)"
    )
    assert error.retryable
    assert error.retry_after == 2.0


async def test_429_with_an_http_date(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    asked = time.time()
    when = email.utils.formatdate(asked + 30, usegmt=True)  # whole seconds
    openai_server.script(Reply.rate_limited(retry_after=when))
    error = await fail(provider, turn_for(openai_server))
    answered = time.time()
    # The date, less the moment the answer was read (between the two clock readings).
    date = email.utils.parsedate_to_datetime(when).timestamp()
    assert error.retry_after is not None
    assert date - answered - 0.001 <= error.retry_after <= date - asked + 0.001
    assert re.search(r"rate limited, retry after \d+\.\d+ s \(HTTP 429\)$", error.message)


async def test_429_without_retry_after(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.rate_limited())
    error = await fail(provider, turn_for(openai_server))
    assert error.message.endswith(": rate limited (HTTP 429)")
    assert error.retryable
    assert error.retry_after is None


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_a_retryable_server_error(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, status: int
) -> None:
    openai_server.script(Reply.error(status, "upstream exploded"))
    error = await fail(provider, turn_for(openai_server))
    assert error.message == (
        f"openai_compatible: {endpoint(openai_server)}: server error (HTTP {status})"
    )
    assert error.retryable


async def test_other_4xx_carry_the_server_message(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.error(422, "messages[0].content must be a string"))
    error = await fail(provider, turn_for(openai_server))
    assert error.message == (
        f"openai_compatible: {endpoint(openai_server)}: bad request (HTTP 422): "
        "messages[0].content must be a string"
    )
    assert not error.retryable


async def test_a_plain_text_error_body_is_shown_on_one_line(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply(status=400, body="model\n  not loaded"))
    error = await fail(provider, turn_for(openai_server))
    assert error.message.endswith("bad request (HTTP 400): model not loaded")


async def test_404_hints_at_the_base_url(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    request = TurnRequest(prompt="Hi", options={"base_url": openai_server.url, "model": "m"})
    error = await fail(provider, request)
    assert "bad request (HTTP 404): no route /chat/completions" in error.message
    assert error.message.endswith("(check base_url: it usually ends in /v1)")


async def test_a_redirect_is_reported_not_followed(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply(status=308, body={}, headers={"Location": "https://x.test/v1"}))
    error = await fail(provider, turn_for(openai_server))
    assert "unexpected redirect (HTTP 308) to https://x.test/v1" in error.message


async def test_a_server_echoing_the_key_gets_it_masked(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.error(400, f"invalid key {API_KEY} for this model"))
    error = await fail(provider, turn_for(openai_server, api_key=API_KEY))
    assert error.message.endswith("bad request (HTTP 400): invalid key *** for this model")


async def test_credentials_in_the_url_are_not_shown(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.error(500))
    base_url = openai_server.base_url.replace("http://", f"http://user:{API_KEY}@")
    error = await fail(
        provider, TurnRequest(prompt="Hi", options={"base_url": base_url, "model": "m"})
    )
    assert f"{endpoint(openai_server)}: server error (HTTP 500)" in error.message


async def test_credentials_in_the_url_are_sent_as_basic_auth(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    """A proxy in front of a model often wants `https://user:password@host/v1`."""
    base_url = openai_server.base_url.replace("http://", "http://user:secret-pass@")
    request = TurnRequest(prompt="Hi", options={"base_url": base_url, "model": "m"})
    events = await collect(provider.stream(request))
    assert isinstance(events[-1], Final)
    expected = "Basic " + base64.b64encode(b"user:secret-pass").decode()
    assert openai_server.requests[-1].headers["authorization"] == expected


# --- connection errors ---------------------------------------------------------------------


async def test_connection_refused(provider: OpenAICompatibleProvider) -> None:
    port = free_port()  # nothing listens there
    request = TurnRequest(
        prompt="Hi",
        options={"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "api_key": API_KEY},
    )
    error = await fail(provider, request)
    assert error.message == (
        f"openai_compatible: cannot connect to http://127.0.0.1:{port}/v1/chat/completions: "
        "connection refused"
    )
    assert error.retryable


@pytest.mark.parametrize(
    ("exception", "reason", "retryable"),
    [
        (httpx2.ConnectError("[Errno -2] Name or service not known"), "cannot connect to", True),
        (httpx2.ConnectTimeout("timed out"), "cannot connect to", True),
        (httpx2.ReadTimeout("timed out"), "no response within 7.00 s (read timeout)", False),
        (httpx2.RemoteProtocolError("Server disconnected"), "Server disconnected", True),
    ],
)
def test_transport_errors_are_one_clear_line(
    exception: httpx2.TransportError, reason: str, retryable: bool
) -> None:
    error = transport_error("openai_compatible", "http://h.test/v1/chat/completions", exception, 7)
    assert reason in error.message
    assert "http://h.test/v1/chat/completions" in error.message
    assert error.retryable is retryable


@pytest.mark.parametrize(
    ("detail", "reason"),
    [
        ("[Errno 111] Connection refused", "connection refused"),
        ("[Errno -2] Name or service not known", "host name not found"),
        ("[Errno 8] nodename nor servname provided, or not known", "host name not found"),
        ("[Errno -3] Temporary failure in name resolution", "host name not found"),
        ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", "TLS error"),
    ],
)
def test_connect_failures_say_why(detail: str, reason: str) -> None:
    assert connect_reason(httpx2.ConnectError(detail)).startswith(reason)


@pytest.mark.parametrize(
    ("cause", "reason"),
    [
        (ConnectionRefusedError(111, "Connect call failed"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "host name not found"),
        (ssl.SSLError(1, "wrong version number"), "TLS error"),
        (OSError(113, "No route to host"), "[Errno 113] No route to host"),
    ],
)
def test_connect_failures_look_under_httpx_vague_message(cause: OSError, reason: str) -> None:
    try:
        try:
            raise cause
        except OSError as os_error:
            raise OSError("All connection attempts failed") from os_error
    except OSError as vague:
        error = httpx2.ConnectError("All connection attempts failed")
        error.__cause__ = vague
    assert connect_reason(error).startswith(reason)


async def test_connect_timeout_message_names_the_limit() -> None:
    error = transport_error(
        "openai_compatible", "http://h.test/v1/chat/completions", httpx2.ConnectTimeout(""), 300
    )
    assert error.message == (
        "openai_compatible: cannot connect to http://h.test/v1/chat/completions: "
        "timed out after 10.0 s"
    )


async def test_a_silent_server_hits_the_turn_timeout(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.counted(3, delay=2.0))
    request = turn_for(openai_server)
    request.timeout = 0.3
    error = await fail(provider, request)
    assert error.message == (
        f"openai_compatible: {endpoint(openai_server)}: "
        "no data from the server for 0.30 s (read timeout)"
    )


# --- broken streams ------------------------------------------------------------------------


async def test_a_malformed_event_is_reported(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.malformed())
    error = await fail(provider, turn_for(openai_server))
    assert error.message == (
        f"openai_compatible: {endpoint(openai_server)}: malformed stream: "
        "event is not JSON: {not json"
    )


async def test_a_non_sse_response_is_a_malformed_stream(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply(raw="<html>login</html>", content_type="text/html"))
    error = await fail(provider, turn_for(openai_server))
    assert f"{endpoint(openai_server)}: malformed stream: " in error.message
    assert "text/html" in error.message


@pytest.mark.parametrize(
    "raw",
    [
        'data: ["a list"]\n\n',
        'data: {"choices": {"index": 0}}\n\n',
        'data: {"choices": [{"index": 0, "delta": "text"}]}\n\n',
    ],
)
async def test_events_of_the_wrong_shape_are_malformed(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, raw: str
) -> None:
    openai_server.script(Reply(raw=raw + "data: [DONE]\n\n"))
    error = await fail(provider, turn_for(openai_server))
    assert ": malformed stream: " in error.message


async def test_an_error_event_in_the_stream_is_reported(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    raw = 'data: {"error": {"message": "context length exceeded"}}\n\n'
    openai_server.script(Reply(raw=raw))
    error = await fail(provider, turn_for(openai_server))
    assert error.message.endswith(": server error in stream: context length exceeded")


async def test_a_stream_cut_mid_way_keeps_what_was_streamed(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.counted(10, cut_after=3))
    events: list[object] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(turn_for(openai_server, api_key=API_KEY)):
            events.append(event)
    assert all(isinstance(e, TextDelta) for e in events)  # those read before the cut
    assert "".join(e.text for e in events) == " t0 t1 t2"  # type: ignore[attr-defined]
    assert caught.value.message.startswith(
        f"openai_compatible: {endpoint(openai_server)}: stream ended before [DONE]"
    )
    assert API_KEY not in str(caught.value)


async def test_a_stream_ending_without_done_is_incomplete(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.text("almost there", end_without_done=True))
    error = await fail(provider, turn_for(openai_server))
    assert error.message == (
        f"openai_compatible: {endpoint(openai_server)}: stream ended before [DONE]"
    )
    assert error.retryable  # the engine still only retries when nothing was streamed


# --- max_tokens negotiation ----------------------------------------------------------------


async def test_max_tokens_falls_back_once_and_is_remembered(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.reject_max_completion_tokens = True
    events = await collect(provider.stream(turn_for(openai_server, max_tokens=20)))
    assert isinstance(events[-1], Final)
    bodies = [r.body for r in openai_server.requests]
    assert [("max_completion_tokens" in b, b.get("max_tokens")) for b in bodies] == [
        (True, None),
        (False, 20),
    ]
    await collect(provider.stream(turn_for(openai_server, max_completion_tokens=30)))
    assert len(openai_server.requests) == 3  # no second refusal
    assert openai_server.requests[-1].body["max_tokens"] == 30


async def test_other_400s_are_not_resent(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.error(400, "unknown model"))
    error = await fail(provider, turn_for(openai_server, max_tokens=20))
    assert error.message.endswith("bad request (HTTP 400): unknown model")
    assert len(openai_server.requests) == 1


async def test_max_tokens_field_can_be_forced(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    await collect(
        provider.stream(turn_for(openai_server, max_tokens=9, max_tokens_field="max_tokens"))
    )
    body = openai_server.requests[-1].body
    assert body["max_tokens"] == 9
    assert "max_completion_tokens" not in body


async def test_a_forced_field_is_not_switched(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.reject_max_completion_tokens = True
    options = {"max_tokens": 9, "max_tokens_field": "max_completion_tokens"}
    error = await fail(provider, turn_for(openai_server, **options))
    assert "bad request (HTTP 400)" in error.message
    assert len(openai_server.requests) == 1


# --- the history on the wire, translated once per message ---------------------------------


def odd_history() -> list[Message]:
    return [
        Message("system", "Be brief."),
        Message("user", 'Quote "this" and \\ that, é ✓ \u2028 \U0001f600'),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall("call_1", "Read", '{"path": "a.txt"}'),
                ToolCall("call_2", "Glob", "not json"),
            ),
        ),
        Message("tool", "alpha\n", tool_call_id="call_1", name="Read"),
        Message("tool", "", tool_call_id="call_2", name="Glob"),
        Message("assistant", "Done.\x00"),
    ]


def fresh(messages: list[Message]) -> bytes:
    """The messages as httpx's `json=` would encode their fresh translation."""
    wire = [wire_message(m) for m in messages]
    return json.dumps(wire, ensure_ascii=False, separators=(",", ":")).encode()


def test_the_body_is_one_dict_with_the_messages_after_the_model() -> None:
    history = odd_history()
    specs = [
        ToolSpec("Read", "Read a file.", {"type": "object", "properties": {"path": {}}}),
        ToolSpec("Grep", "Search «text».", {"type": "object"}),
    ]
    head = {"model": "m", "stream": True, "seed": 7}
    body = request_body(head, history, specs, "auto")
    assert list(body) == ["model", "messages", "stream", "seed", "tools", "tool_choice"]
    assert json.dumps(body["messages"]).encode() == json.dumps(json.loads(fresh(history))).encode()
    assert body["tools"] == [wire_tool(spec) for spec in specs]
    # without tools, no tool keys at all (servers that know nothing of tools)
    assert list(request_body(head, [], [], "auto")) == ["model", "messages", "stream", "seed"]


async def test_every_tool_round_sends_the_history_as_a_fresh_translation(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    """Round after round the history grows by the same message objects (the engine's
    list): the server gets each request exactly as a fresh translation would be."""
    history = [Message("user", "Read them all.")]
    for round_number in range(4):
        request = TurnRequest(
            prompt="",
            system_prompt="You read.",
            history=list(history),
            continues=round_number > 0,
            options={"base_url": openai_server.base_url, "model": "m"},
        )
        openai_server.script(Reply.text(f"Round {round_number} é."))
        await collect(provider.stream(request))
        sent = openai_server.requests[-1]
        expected = [Message("system", "You read."), *history]
        if round_number == 0:
            expected.append(Message("user", ""))
        assert sent.body["messages"] == json.loads(fresh(expected))
        assert sent.headers["content-type"] == "application/json"
        call = ToolCall(f"c{round_number}", "Read", json.dumps({"n": round_number}))
        history += [
            Message("assistant", "", tool_calls=(call,)),
            Message("tool", f"text {round_number}", tool_call_id=call.id, name="Read"),
        ]


# --- context window ------------------------------------------------------------------------


async def test_the_oldest_exchanges_are_dropped_to_fit_the_window(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    history = [
        Message("user", "u" * 400),
        Message("assistant", "a" * 400),
        Message("user", "v" * 400),
        Message("assistant", "b" * 400),
        Message("user", "w" * 40),
        Message("assistant", "c" * 40),
    ]
    request = TurnRequest(
        prompt="p" * 40,
        system_prompt="s" * 40,
        history=history,
        options={"base_url": openai_server.base_url, "model": "m", "context_window": 100},
    )
    events = await collect(provider.stream(request))
    sent = openai_server.requests[-1].body["messages"]
    assert [m["content"][0] for m in sent] == ["s", "w", "c", "p"]
    notices = of_type(events, Notice)
    assert [n.truncated_turns for n in notices] == [2]
    assert "dropped the 2 oldest exchanges" in notices[0].message
    assert isinstance(events[-1], Final)
    assert events.index(notices[0]) > events.index(of_type(events, Usage)[0])


async def test_the_window_keeps_room_for_the_answer(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    history = [Message("user", "u" * 200), Message("assistant", "a" * 200)]
    options = {"base_url": openai_server.base_url, "model": "m", "context_window": 200}
    fits = TurnRequest(prompt="p" * 40, history=history, options=options)
    assert not of_type(await collect(provider.stream(fits)), Notice)
    tight = TurnRequest(prompt="p" * 40, history=history, options={**options, "max_tokens": 100})
    assert of_type(await collect(provider.stream(tight)), Notice)[0].truncated_turns == 1


# --- cancellation --------------------------------------------------------------------------


async def test_cancelling_the_turn_closes_the_connection_promptly(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.counted(200, delay=0.02))
    got_two = asyncio.Event()
    deltas: list[TextDelta] = []

    async def consume() -> None:
        async for event in provider.stream(turn_for(openai_server)):
            if isinstance(event, TextDelta):
                deltas.append(event)
                if len(deltas) == 2:
                    got_two.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_two.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = await asyncio.to_thread(openai_server.wait_stream_ended, 0, 5.0)
    assert record.client_gone_at is not None, "the server never saw the client go away"
    assert record.tokens_sent < 100
    assert not record.finished


async def test_closing_the_stream_generator_closes_the_connection(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.counted(200, delay=0.02))
    stream = provider.stream(turn_for(openai_server))
    assert await anext(stream) == TextDelta(" t0")
    await stream.aclose()
    record = await asyncio.to_thread(openai_server.wait_stream_ended, 0, 5.0)
    assert record.client_gone_at is not None
    assert record.tokens_sent < 100
    # The provider is still usable afterwards, on a fresh connection.
    events = await collect(provider.stream(turn_for(openai_server)))
    assert isinstance(events[-1], Final)
    assert openai_server.requests[-1].connection == 2


# --- the API key never leaks ---------------------------------------------------------------


@pytest.fixture
def leaky_replies() -> Iterator[list[Reply]]:
    yield [
        Reply.error(401, f"bad key {API_KEY}"),
        Reply.error(403, f"key {API_KEY} may not use this model"),
        Reply.rate_limited(retry_after="1"),
        Reply.error(500, API_KEY),
        Reply(raw=f"data: {{{API_KEY}\n\n"),
        Reply(raw=f'data: {{"error": {{"message": "{API_KEY}"}}}}\n\n'),
        Reply.counted(5, cut_after=1),
    ]


async def test_the_api_key_appears_in_no_error(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, leaky_replies: list[Reply]
) -> None:
    for reply in leaky_replies:
        openai_server.script(reply)
        await fail(provider, turn_for(openai_server, api_key=API_KEY))
    assert len(openai_server.requests) == len(leaky_replies)


def test_prompt_tokens_of_the_test_server_differ_from_the_estimate() -> None:
    # Guards the usage tests: they could not tell real usage from the len/4 estimate if
    # the test server counted the same way.
    messages = [{"role": "user", "content": "Hello there, how are you today?"}]
    assert prompt_tokens(messages) == 9


async def test_credential_headers_are_masked_too(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    token = "tok-9f8e7d6c5b4a"
    openai_server.script(Reply.error(400, f"token {token} expired; team docs"))
    headers = {"X-Api-Token": token, "X-Team": "docs"}
    error = await fail(provider, turn_for(openai_server, headers=headers))
    assert error.message.endswith("bad request (HTTP 400): token *** expired; team docs")


async def test_a_full_endpoint_url_is_accepted_as_base_url(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    request = turn_for(openai_server)
    request.options["base_url"] = endpoint(openai_server) + "/"
    events = await collect(provider.stream(request))
    assert isinstance(events[-1], Final)
    assert openai_server.requests[-1].path == ENDPOINT


async def test_odd_tool_call_pieces_do_not_crash(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    pieces = [
        {"index": [0], "function": {"name": "grep", "arguments": {"q": 1}}},
        {"index": 1, "function": "not an object"},
        "not a piece",
    ]
    chunk = {"choices": [{"index": 0, "delta": {"content": "ok", "tool_calls": pieces}}]}
    openai_server.script(Reply(raw=f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"))
    events = await collect(provider.stream(turn_for(openai_server)))
    # The piece without a function (index 1) never named a call: nothing to run.
    assert of_type(events, ToolCall) == [ToolCall("call_1", "grep", '{"q": 1}')]
    assert events[-1] == Final("ok")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(["choices", "delta", "index", "content", "tool_calls", "function",
                         "name", "arguments", "usage", "prompt_tokens", "message", "error"]),
        inner,
        max_size=4,
    ),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(_json)
def test_any_json_event_gives_events_or_a_provider_error(value: Any) -> None:
    reader = StreamReader(
        "openai_compatible",
        "http://h.test/v1/chat/completions",
        [],
        max_reply_bytes=1 << 20,
        max_tool_calls=10,
    )
    try:
        events = reader.feed(f"data: {json.dumps(value)}\n\n".encode())
        if reader.failure is not None:
            raise reader.failure
    except ProviderError as error:
        assert error.message.startswith("openai_compatible: http://h.test/v1/chat/completions: ")
    else:
        assert all(isinstance(e, TextDelta) for e in events)
        assert all(isinstance(e, ToolCall) for e in reader.finish())
        reader.usage([])


# --- the end of the stream, cancellation before the reply -------------------------------------------------------


async def test_a_stream_held_open_after_done_does_not_hold_the_turn(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.text("All done.", hold_open=60), Reply.text("Next."))
    events = await asyncio.wait_for(collect(provider.stream(turn_for(openai_server))), 20)
    assert events[-1] == Final("All done.")
    # the held connection was given up; the next turn gets a fresh one
    events = await asyncio.wait_for(collect(provider.stream(turn_for(openai_server))), 20)
    assert events[-1] == Final("Next.")
    assert [r.connection for r in openai_server.requests] == [1, 2]


async def test_cancelling_before_the_reply_starts_closes_the_connection(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    """A model still reading a long prompt: Ctrl-C then drops the connection, so the
    server's first write finds the client gone."""
    openai_server.script(Reply.counted(50, headers_after=1.0))
    task = asyncio.create_task(collect(provider.stream(turn_for(openai_server))))
    await until(lambda: bool(openai_server.requests), "the request to arrive")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = await asyncio.to_thread(openai_server.wait_stream_ended, 0, 10.0)
    assert record.client_gone_at is not None, "the server never saw the client go away"
    assert not record.finished


def _stream_in_child(base_url: str) -> None:
    async def turn() -> None:
        provider = OpenAICompatibleProvider()
        request = TurnRequest(prompt="Hi", options={"base_url": base_url, "model": "m"})
        events = await asyncio.wait_for(collect(provider.stream(request)), 20)
        await provider.aclose()
        assert isinstance(events[-1], Final)

    asyncio.run(turn())


def test_a_forked_process_streams_too(openai_server: OpenAIServer) -> None:
    """A child forked while the parent's loop holds a client (and its pooled connection)
    streams with clients of its own: nothing of the parent's is shared."""

    async def parent() -> None:
        provider = OpenAICompatibleProvider()
        await collect(provider.stream(turn_for(openai_server)))
        assert loop_clients(asyncio.get_running_loop())
        child = multiprocessing.get_context("fork").Process(
            target=_stream_in_child, args=(openai_server.base_url,)
        )
        child.start()
        await asyncio.to_thread(child.join, 60)
        if child.is_alive():
            child.kill()
        assert child.exitcode == 0
        await collect(provider.stream(turn_for(openai_server)))  # the parent's still works
        await provider.aclose()

    asyncio.run(parent())


# --- reads handed over in batches ----------------------------------------------------------


async def test_pieces_read_while_the_turn_is_busy_come_as_one_delta(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    """A fast server sends a token per HTTP chunk: what arrived while the turn was busy
    with the last delta reaches it as one delta (the frontend gets a delta per batch of
    reads, not per token)."""
    openai_server.script(Reply.counted(300))
    stream = provider.stream(turn_for(openai_server))
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    await asyncio.to_thread(openai_server.wait_stream_ended, 0, 10.0)  # all of it sent
    await until(lambda: openai_server.streams[0].finished, "the server to finish")
    rest = [event async for event in stream]
    deltas = of_type(rest, TextDelta)
    assert first.text + "".join(d.text for d in deltas) == "".join(f" t{i}" for i in range(300))
    assert len(deltas) <= 10  # a delta per read (the reads while the turn waited: one)


async def test_a_turn_slower_than_the_server_holds_the_reading_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At most MAX_PENDING events wait for the turn: the reading waits for room."""
    monkeypatch.setattr(BatchedReads, "MAX_PENDING", 10)
    produced: list[int] = []

    async def answer() -> AsyncIterator[list[Any]]:
        for number in range(100):
            produced.append(number)
            yield [TextDelta(f"{number},")]
            await asyncio.sleep(0)  # a read: the loop runs other tasks

    batches = BatchedReads(answer()).batches()
    first = await anext(batches)
    for _ in range(50):  # turns of the loop for a reading that would not wait to run ahead
        await asyncio.sleep(0)
    taken = first[0].text.count(",")
    assert len(produced) - taken <= 10  # waiting for the turn: no more than that
    rest = [batch async for batch in batches]
    text = "".join(e.text for batch in [first, *rest] for e in batch)
    assert text == "".join(f"{n}," for n in range(100))
    assert all(len(batch) == 1 for batch in rest)  # a batch's text is one delta
