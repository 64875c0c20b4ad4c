"""`StreamHTML` sends only what the browser lacks, and the Markdown cutter finds finished
blocks; a reply followed flush by flush ends as the whole reply rendered at once."""

from __future__ import annotations

from typing import Any

import pytest

from awf_nb.frontends.notebook.markdown_stream import BlockCutter
from awf_nb.frontends.notebook.panel_items import Reply, render_markdown
from awf_nb.frontends.notebook.stream_view import StreamHTML
from tests.support import stream_view


class Browser:
    """A browser showing `widget` (tests/support/stream_view.py does what the JS does)."""

    def __init__(self, widget: StreamHTML) -> None:
        self.sealed = widget.value
        self.tail = widget.initial_tail
        self.sent: list[dict[str, Any]] = []
        original = widget.send

        def spy(content: dict[str, Any], buffers: Any = None) -> None:
            self.sent.append(content)
            self.receive(content)
            original(content, buffers)

        widget.send = spy  # type: ignore[method-assign]
        widget.observe(lambda change: self.reset(change["new"]), names="value")

    def receive(self, message: dict[str, Any]) -> None:
        self.sealed, self.tail = stream_view.apply(self.sealed, self.tail, message)

    def reset(self, value: str) -> None:
        self.sealed, self.tail = value, ""

    @property
    def shows(self) -> str:
        return self.sealed + self.tail


def test_only_the_difference_is_sent() -> None:
    widget = StreamHTML(tail="…")
    browser = Browser(widget)

    assert widget.push("", "<p>Hello</p>")
    assert widget.push("", "<p>Hello world</p>")
    assert browser.sent[-1] == {"keep": len("<p>Hello"), "tail": " world</p>"}
    assert not widget.push("", "<p>Hello world</p>"), "nothing changed, nothing sent"
    # The tail became a finished block: sealed in the browser, not sent again.
    assert widget.push("<p>Hello world</p>", "<p>Next</p>")
    assert browser.sent[-1] == {"seal": len("<p>Hello world</p>"), "keep": 0, "tail": "<p>Next</p>"}
    assert browser.shows == widget.html == "<p>Hello world</p><p>Next</p>"


def test_a_tail_finished_along_with_more_blocks_is_sealed_not_sent_again() -> None:
    widget = StreamHTML()
    browser = Browser(widget)
    widget.push("", "<p>Hello world</p>")
    # Within one flush the paragraph grew, ended, and a code block followed it.
    widget.push("<p>Hello world, again</p><pre>code</pre>", "<p>Ne</p>")

    sent = browser.sent[-1]
    assert (sent["seal"], sent["append"]) == (len("<p>Hello world"), ", again</p><pre>code</pre>")
    assert browser.shows == widget.html == "<p>Hello world, again</p><pre>code</pre><p>Ne</p>"


def test_offsets_count_like_javascript_with_emoji() -> None:
    widget = StreamHTML()
    browser = Browser(widget)
    for tail in (
        "<p>🌱",
        "<p>🌱 tomatoes",
        "<p>🌱 tomatoes 🍅</p>",
        "<p>🌱 tomatoes 🍅 and basil</p>",
    ):
        widget.push("", tail)
        assert browser.shows == widget.html == tail
    widget.push("<p>🌱 tomatoes 🍅 and basil</p>", "<p>é</p>")
    assert browser.shows == widget.html


def test_finish_sets_the_value_once() -> None:
    widget = StreamHTML()
    browser = Browser(widget)
    widget.push("", "<p>a</p>")
    widget.finish("<p>a</p>\n")

    assert widget.value == "<p>a</p>\n" == browser.shows == widget.html


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("one paragraph still going", 0),
        ("first\n\nsecond", len("first\n\n")),
        ("first\n\n", 0),  # the next block has not begun: it might be indented
        ("- item\n\n  continued", 0),
        ("```\ncode\n\nmore code\n", 0),
        ("```\ncode\n\n```\n\nafter", len("```\ncode\n\n```\n\n")),
        ("a\n\nb\n\nc", len("a\n\nb\n\n")),
    ],
)
def test_the_cut_is_after_finished_blocks_only(text: str, cut: int) -> None:
    assert BlockCutter().cut(text) == cut


MARKDOWN = (
    "Here is a plan for the **garden**:\n\n"
    "1. Tomatoes 🍅 in the sun\n2. Basil next to them\n\n"
    "```python\nwater = 'daily'\n\nprint(water)\n```\n\n"
    "| crop | days |\n|---|---|\n| beans | 60 |\n\n"
    "A closing paragraph with <b>raw html</b> that stays escaped.\n"
)


@pytest.mark.parametrize("step", [1, 3, 7, 40])
def test_a_reply_followed_piece_by_piece_shows_what_the_whole_renders(step: int) -> None:
    widget = StreamHTML(tail="…")
    browser = Browser(widget)
    reply = Reply(widget)
    for start in range(0, len(MARKDOWN), step):
        reply.parts.append(MARKDOWN[start : start + step])
        reply.flush()
        assert browser.shows == widget.html
    assert browser.shows == render_markdown(MARKDOWN)  # the blocks, rendered one by one
    reply.finish("", interrupted=False)
    assert browser.shows == widget.value == render_markdown(MARKDOWN)
    assert "&lt;b&gt;raw html&lt;/b&gt;" in widget.value
