"""Bounded memory whatever a server streams: the SSE decoder's line limit, and property
tests over random bytes for the providers' line parsers (the local provider's replies are
bounded by max_tokens, and every reply by the engine: tests/engine/test_reply_limits.py)."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.engine.ports import ProviderEvent
from awf_nb.providers.cli.base import OutputParser, parse_line
from awf_nb.providers.cli.claude import ClaudeParser
from awf_nb.providers.cli.codex import CodexParser
from awf_nb.providers.cli.copilot import CopilotParser
from awf_nb.providers.cli.gemini import GeminiParser
from awf_nb.providers.cli.opencode import OpencodeParser
from awf_nb.providers.sse import LineTooLong, SSEDecoder

PEAK_LIMIT = 8 << 20  # bytes: a few times the 1 MiB line limit, far below "unbounded"
PARSERS = [ClaudeParser, CodexParser, CopilotParser, GeminiParser, OpencodeParser]
_KEYS = ["type", "subtype", "role", "content", "delta", "text", "message", "session_id",
         "sessionID", "id", "item", "part", "usage", "result", "error", "tool", "name",
         "input", "arguments", "data", "thread_id", "msg", "is_error", "status"]  # fmt: skip


def test_events_split_anywhere_are_put_back_together() -> None:
    stream = b'data: {"a": 1}\r\n\r\n: keep-alive\n\nevent: x\ndata: two\ndata: lines\n\ndata: last'
    for cut in range(1, len(stream)):
        decoder = SSEDecoder()
        events = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:]) + decoder.end()
        assert events == ['{"a": 1}', "two\nlines", "last"], cut


def test_a_line_without_end_is_refused_at_the_limit() -> None:
    decoder = SSEDecoder(max_line_bytes=1000)
    decoder.feed(b"data: " + b"x" * 900)
    with pytest.raises(LineTooLong, match="longer than 1000 bytes"):
        decoder.feed(b"x" * 200)


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert SSEDecoder().feed(b"data: caf\xe9\n\n") == ["caf\ufffd"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=300_000), max_size=40))
def test_random_bytes_keep_the_sse_decoder_bounded(chunks: list[bytes]) -> None:
    decoder = SSEDecoder(max_line_bytes=1 << 20)
    tracemalloc.start()
    try:
        for chunk in chunks:
            try:
                decoder.feed(chunk)
            except LineTooLong:
                break
        decoder.end()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT


# JSON objects of the shapes the CLIs print (type/role/content/delta/... keys with odd
# values), so the parsers' own paths run, not only the "not JSON" path.
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=2_000),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=30,
)
_CLI_LINES = st.lists(
    st.one_of(
        st.binary(max_size=200_000).map(lambda raw: raw.decode("utf-8", errors="replace")),
        st.dictionaries(st.sampled_from(_KEYS), _JSON_VALUES, max_size=8).map(json.dumps),
    ),
    max_size=20,
)


@pytest.mark.parametrize("parser_class", PARSERS, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(lines=_CLI_LINES)
def test_random_lines_through_every_cli_parser_are_a_clean_outcome(
    parser_class: type[OutputParser], lines: list[str]
) -> None:
    parser = parser_class()
    diagnostics: list[str] = []
    tracemalloc.start()
    try:
        for line in lines:
            events = parse_line(parser, line, diagnostics)
            assert all(isinstance(event, ProviderEvent.__args__) for event in events)  # type: ignore[attr-defined]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT
