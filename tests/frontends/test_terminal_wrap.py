"""Streamed text broken into terminal lines between words, whatever the pieces it comes in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from awf_nb.frontends.terminal.wrap import WordWrap, display_width


def wrapped(pieces: list[str], width: int, column: int = 0) -> str:
    wrap = WordWrap(width, column)
    return "".join(wrap.feed(piece) for piece in pieces) + wrap.flush()


def test_lines_break_between_words_at_the_width() -> None:
    text = "The quick brown fox jumps over the lazy dog and keeps running far away"
    shown = wrapped([text[i : i + 3] for i in range(0, len(text), 3)], width=20)
    assert shown.split("\n") == [
        "The quick brown fox",
        "jumps over the lazy",
        "dog and keeps",
        "running far away",
    ]


def test_the_first_line_starts_after_a_label() -> None:
    assert wrapped(["one two three four five six"], width=20, column=7).split("\n") == [
        "one two three",
        "four five six",
    ]


def test_a_word_longer_than_a_line_is_cut_at_the_edge() -> None:
    shown = wrapped(["see https://example.org/", "a/very/long/path/to/a/page ok"], width=20)
    assert shown.split("\n") == ["see", "https://example.org/", "a/very/long/path/to/", "a/page ok"]


def test_line_breaks_in_the_text_are_kept_and_reset_the_line() -> None:
    assert wrapped(["- a list item\n- another one that is long\n"], width=20).split("\n") == [
        "- a list item",
        "- another one that",
        "is long",
        "",
    ]


def test_wide_characters_take_two_columns() -> None:
    shown = wrapped(["日本語の文章 です ね 日本語の文章"], width=20)
    assert all(display_width(line) <= 20 for line in shown.split("\n"))
    assert shown.split("\n") == ["日本語の文章 です ね", "日本語の文章"]


def test_a_word_is_held_until_the_space_after_it() -> None:
    wrap = WordWrap(40)
    assert wrap.feed("Hello wor") == "Hello"
    assert wrap.feed("ld, how") == " world,"
    assert wrap.flush() == " how"


words = st.text(
    alphabet=st.sampled_from("abcdefghij語éx-/"), min_size=1, max_size=30
)  # fmt: skip


@given(
    st.lists(words, min_size=1, max_size=40),
    st.integers(min_value=20, max_value=100),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=10),
)
def test_any_text_in_any_pieces_fits_and_keeps_its_words(
    chosen: list[str], width: int, cuts: list[int]
) -> None:
    text = " ".join(chosen)
    pieces, at, index = [], 0, 0
    while at < len(text):
        size = cuts[index % len(cuts)]
        pieces.append(text[at : at + size])
        at, index = at + size, index + 1

    shown = wrapped(pieces, width)

    lines = shown.split("\n")
    assert all(display_width(line) <= width for line in lines), (width, lines)
    # Only whole words move: every word that fits on a line arrives whole on one line.
    for word in chosen:
        if display_width(word) <= width:
            assert any(word in line.split(" ") for line in lines), (word, lines)
    assert "".join(shown.split()) == "".join(text.split())
