"""A fake terminal for the terminal sink's tests: `Screen` records what reached its
`Stream`s (stdout, stderr), in order, and counts the flushes; `TtyStream` passes for a tty."""

from __future__ import annotations


class Screen:
    """stdout and stderr of one terminal: what reached it, in order, and the flushes."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def stream(self, name: str) -> Stream:
        return Stream(self, name)


class Stream:
    """One of the screen's outputs: what is written waits in a buffer until a flush shows it."""

    def __init__(self, screen: Screen, name: str) -> None:
        self.screen, self.name = screen, name
        self.buffer: list[str] = []
        self.flushes = 0

    def write(self, text: str) -> int:
        self.buffer.append(text)
        return len(text)

    def flush(self) -> None:
        self.flushes += 1
        if self.buffer:
            self.screen.shown.append(f"{self.name}:{''.join(self.buffer)}")
            self.buffer = []

    def isatty(self) -> bool:
        return False


class TtyStream(Stream):
    """A stream that says it is a terminal (so the sink may colour it)."""

    def isatty(self) -> bool:
        return True
