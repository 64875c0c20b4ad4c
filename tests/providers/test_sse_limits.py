"""Bounded memory whatever a server streams: the SSE decoder's line limit, and property
tests over random bytes for the providers' line parsers (the local provider's replies are
bounded by max_tokens, and every reply by the engine: tests/engine/test_reply_limits.py)."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.providers.cli.base import OutputParser, parse_line
from awf_nb.providers.cli.claude import ClaudeParser
from awf_nb.providers.sse import LineTooLong, SSEDecoder

PEAK_LIMIT = 8 << 20  # bytes: a few times the 1 MiB line limit, far below "unbounded"


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


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200_000))
def test_random_bytes_through_a_cli_parser_are_a_clean_outcome(raw: bytes) -> None:
    parser: OutputParser = ClaudeParser()
    diagnostics: list[str] = []
    tracemalloc.start()
    try:
        parse_line(parser, raw.decode("utf-8", errors="replace"), diagnostics)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT
