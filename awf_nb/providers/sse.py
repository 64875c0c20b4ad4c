"""A bounded Server-Sent Events decoder: bytes in, the `data` of each event out.

Why not httpx-sse: it buffers a line for as long as the server keeps sending without a
newline, so one endless `data:` line (or a server streaming forever) grows memory without
limit. Here a line longer than `max_line_bytes` is an error, and the caller bounds the
whole reply. Only what a Chat Completions stream uses is kept: `data` fields (joined with
newlines across a multi-line event); comments, `event`, `id` and `retry` are skipped.
"""

from __future__ import annotations

MAX_LINE_BYTES = 1 << 20


class LineTooLong(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"an event line is longer than {limit} bytes")
        self.limit = limit


class SSEDecoder:
    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._pending = b""  # an unfinished line
        self._data: list[str] = []  # the data lines of the event being read

    def feed(self, chunk: bytes) -> list[str]:
        """The events completed by `chunk` (each event's data)."""
        if not chunk:
            return []
        text = self._pending + chunk
        lines = text.splitlines(keepends=True)
        self._pending = b""
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            self._pending = lines.pop()
        elif lines and lines[-1].endswith(b"\r"):
            # "\r" may be the first half of "\r\n" split across reads: wait for more.
            self._pending = lines.pop()
        if len(self._pending) > self.max_line_bytes:
            raise LineTooLong(self.max_line_bytes)
        events: list[str] = []
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if len(line) > self.max_line_bytes:
                raise LineTooLong(self.max_line_bytes)
            if event := self._line(line):
                events.append(event)
        return events

    def end(self) -> list[str]:
        """The last event, when the stream ended without a blank line after it."""
        events = []
        if self._pending:
            if event := self._line(self._pending.rstrip(b"\r\n")):
                events.append(event)
            self._pending = b""
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events

    def _line(self, line: bytes) -> str | None:
        if not line:  # a blank line dispatches the event
            if not self._data:
                return None
            event, self._data = "\n".join(self._data), []
            return event
        if line.startswith(b":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(b":")
        if name == b"data":
            self._data.append(value.removeprefix(b" ").decode("utf-8", errors="replace"))
        return None
