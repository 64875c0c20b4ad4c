"""How the terminal frontend paints text: colours only where they reach a terminal
(`NO_COLOR`, `TERM=dumb` and files get plain text), and what it asks of a stream."""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["RESET", "YOU_PROMPT", "YOU_TYPE", "Style", "is_tty", "use_color", "width"]

# The person's side: the `> ` prompt bold cyan, then their typing cyan, until the reset.
YOU_PROMPT, YOU_TYPE, RESET = "\033[1;36m", "\033[0;36m", "\033[0m"


class Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def partner(self, text: str) -> str:
        """A conversation partner's label: its own colour (magenta, bold)."""
        return self._wrap("1;35", text)

    def agent(self, text: str) -> str:
        """The step's agent's label (green, bold)."""
        return self._wrap("1;32", text)


def use_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def is_tty(stream: TextIO) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


def width(stream: TextIO) -> int:
    """The columns of the terminal `stream` shows on (80 when it cannot tell)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 80
