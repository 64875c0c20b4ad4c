"""What stream_view.js does with a `StreamHTML` widget's messages, in Python, so tests can
follow a streamed reply as a browser would (offsets count UTF-16 code units, like JS)."""

from __future__ import annotations

from typing import Any


def apply(sealed: str, tail: str, message: dict[str, Any]) -> tuple[str, str]:
    """The (sealed, tail) parts after one custom message."""
    if "reset" in message:
        return message["reset"], ""
    units = _utf16(tail)
    appended = _utf16(message.get("append", ""))
    if message.get("seal"):
        appended = units[: 2 * message["seal"]] + appended
        units = units[2 * message["seal"] :]
    if "tail" in message:
        units = units[: 2 * message.get("keep", 0)] + _utf16(message["tail"])
    return sealed + _text(appended), _text(units)


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def _text(data: bytes) -> str:
    return data.decode("utf-16-le", "surrogatepass")
