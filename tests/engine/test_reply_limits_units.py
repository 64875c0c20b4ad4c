"""The checks of engine/reply_limits.py on their own: JSON nesting without parsing, token
counts a server could mean."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.engine.reply_limits import MAX_TOKEN_COUNT, json_too_deep, token_count


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * 101 + "]" * 101, True),
        ("[" * 100 + "]" * 100, False),
        ('{"a":' * 150 + "1" + "}" * 150, True),
        ('["' + "[" * 500 + '"]', False),  # brackets in a string are text
        ('["\\"' + "[" * 500 + '"]', False),  # an escaped quote does not end the string
        ('["\\\\"' + ",[" * 200 + "]" * 200 + "]", True),  # an escaped backslash does
        ("[]" * 5000, False),  # many, but side by side
        ("[" * 1000, True),  # never closed
    ],
)
def test_nesting_is_measured_without_parsing(text: str, deep: bool) -> None:
    assert json_too_deep(text, 100) is deep


json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=8))
def test_nesting_agrees_with_the_parsed_value(value: Any, limit: int) -> None:
    assert json_too_deep(json.dumps(value), limit) is (depth(value) > limit)


@pytest.mark.parametrize(
    ("value", "count"),
    [(12, 12), (12.0, 12), (0, 0), (None, 0), ("12", 0), (True, 0), ({}, 0),
     (MAX_TOKEN_COUNT, MAX_TOKEN_COUNT), (-1, None), (2.5, None), (float("nan"), None),
     (float("inf"), None), (-float("inf"), None), (MAX_TOKEN_COUNT + 1, None)],
)  # fmt: skip
def test_token_counts(value: Any, count: int | None) -> None:
    assert token_count(value) == count
