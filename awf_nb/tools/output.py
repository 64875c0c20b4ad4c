"""What a tool sends back to the model: text that is secret-masked and of bounded size.

Masking comes first, cutting second: cutting first could split a secret and leave its
first half unmasked. When a text itself stops in the middle of something longer (a read
cut at its size limit, a command stopped for printing too much), whatever at its end could
be the beginning of a secret is held back (`Masker.stream`), since the rest of that secret
was never seen.
"""

from __future__ import annotations

from awf_nb.secrets import Masker

# About what a model can use in one result (Claude Code's Bash caps its output the same
# way); longer output is shown as its beginning and its end, which is where the errors are.
MAX_OUTPUT_CHARS = 30_000


class ToolError(Exception):
    """A tool call failed in a way the model should be told about (the result's text)."""


def masked(text: str, masker: Masker, *, cut: bool = False) -> str:
    """`text` with its secrets masked; `cut` when `text` stops short of its real end."""
    if not cut:
        return masker.mask(text)
    return masker.stream().feed(text)  # no flush: the held-back tail is dropped


def capped(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """`text`, or its first two thirds and last third of `limit` with a note between."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[len(text) - limit // 3 :]
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n[... {omitted} characters omitted ...]\n{tail}"


def finish(text: str, masker: Masker, *, cut: bool = False, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Masked, then capped to `limit` characters."""
    return capped(masked(text, masker, cut=cut), limit)
