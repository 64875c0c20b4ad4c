"""`StreamHTML`: a widget for HTML that grows while a run streams, at O(n) traffic.

An ipywidgets `HTML` widget resends its whole value at every change, so a reply re-rendered
at each flush costs O(n²) bytes. `StreamHTML` (an anywidget; its JavaScript,
stream_view.js, ships in the package, nothing is fetched) keeps two parts in the browser:
the *sealed* HTML, final and only ever appended to, and a small *tail* still being written,
sent as a diff against what the browser has; a tail that becomes final is sealed where it
is, not sent again. `finish` sets the `value` trait once to the
whole HTML, which is what a saved widget state and later views show.

Kernel side, `html` is always what the browser shows (for tests and the static rendering).
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

__all__ = ["StreamHTML"]


class StreamHTML(anywidget.AnyWidget):
    """Streamed HTML: `push(append, tail)` per flush, then `finish(html)`."""

    _esm = Path(__file__).with_name("stream_view.js")
    value = traitlets.Unicode("").tag(sync=True)
    tag = traitlets.Unicode("div").tag(sync=True)  # "pre" for command output
    initial_tail = traitlets.Unicode("").tag(sync=True)  # e.g. "…" until the first text

    def __init__(self, value: str = "", *, tail: str = "", **kwargs: object) -> None:
        super().__init__(value=value, initial_tail=tail, **kwargs)
        self.sealed = value
        self.tail = tail
        self.messages = 0  # custom messages sent (for tests and benchmarks)

    @property
    def html(self) -> str:
        """All of it, as the browser shows it now."""
        return self.sealed + self.tail

    def push(self, append: str, tail: str) -> bool:
        """Add `append` to the sealed part and make `tail` the new tail, sending only the
        difference: as much of `append` as the browser's tail already begins with (a block
        that was the tail is now finished) it is told to seal instead of receiving it again.
        Returns whether a message was sent (none when nothing changed)."""
        message: dict[str, object] = {}
        old_tail = self.tail
        # What the browser's tail already holds of `append` (the block that was the tail,
        # finished now, maybe with more blocks after it) is sealed there, not sent again.
        sealed = _common_prefix(old_tail, append) if append else 0
        if sealed:
            message["seal"] = _js_length(append[:sealed])
            old_tail = old_tail[sealed:]
        if sealed < len(append):
            message["append"] = append[sealed:]
        keep = _common_prefix(old_tail, tail)
        if keep < len(old_tail) or keep < len(tail):
            message["keep"] = _js_length(tail[:keep])
            message["tail"] = tail[keep:]
        self.sealed += append
        self.tail = tail
        if not message:
            return False
        self.send(message)
        self.messages += 1
        return True

    def finish(self, html: str) -> None:
        """The final HTML: one value update (skipped when the browser already has it)."""
        if html == self.value:
            if self.sealed != html or self.tail:  # the browser shows something else
                self.send({"reset": html})
                self.messages += 1
        else:
            self.value = html
        self.sealed, self.tail = html, ""


def _js_length(text: str) -> int:
    """The length of `text` as JavaScript counts it (UTF-16 code units: an emoji is 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`."""
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit]:
        return limit
    low, high = 0, limit  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low
