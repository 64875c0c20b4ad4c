"""What is kept of a child's output stream: its beginning and its end, never more than a bound.

A command's stdout and stderr become `{{.states.NAME.Output}}` / `Stderr`, the state file
and error messages, so they are held in memory until the command ends. A command that
prints without end (`yes`, a runaway log, `cat` of a disk image) must not take the run —
or an evaluation with hundreds of runs in one process — down with it. `KeptOutput` keeps
the first and the last half of `limit` bytes and counts what lies between; the command
runs on, and everything it prints is still shown live (the callbacks of
`process.run_process` see every chunk). Both ends are kept because both matter: a JSON
answer or a report starts at the top, and the error that made a build fail is at the
bottom.
"""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import Callable

from awf_nb.workflow.model import DEFAULT_OUTPUT_BYTES_KEPT

# Of each stream, unless the caller says otherwise (a command step: `limits.output_bytes_kept`).
KEPT_OUTPUT_BYTES = DEFAULT_OUTPUT_BYTES_KEPT


class KeptOutput:
    """One stream's kept bytes: the first `limit // 2`, the last `limit - limit // 2`.

    `add` is O(1) amortised per chunk (whole chunks are dropped from the tail's front), so
    a stream of gigabytes costs its reading, not its copying."""

    def __init__(self, limit: int = KEPT_OUTPUT_BYTES) -> None:
        if limit < 2:
            raise ValueError(f"a kept-output limit must be at least 2 bytes, got {limit}")
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0  # whole chunks dropped from the tail's front

    def add(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        # Drop a whole chunk only while what is left still fills the tail.
        while self.tail_size - len(self.tail[0]) >= self.tail_limit:
            first = self.tail.popleft()
            self.tail_size -= len(first)
            self.dropped += len(first)

    def finish(
        self, around_cut: Callable[[str, str], tuple[str, str]] | None = None
    ) -> tuple[str, int]:
        """The kept text, and how many bytes of the stream it does not hold.

        Past the bound, the text is the beginning, a line saying how many bytes are not
        kept, and the end (UTF-8; a character the cut split is left out, not mangled).
        `around_cut(beginning, end)` may leave out more on either side of the cut
        (`Masker.around_cut`: the parts of a secret the cut split)."""
        tail = b"".join(self.tail)
        cut = self.dropped + max(0, self.tail_size - self.tail_limit)
        if not cut:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace"), 0
        tail = tail[len(tail) - self.tail_limit :]
        skipped = 0
        while skipped < len(tail) and tail[skipped] & 0xC0 == 0x80:  # inside a character
            skipped += 1
        # not final: a character the cut split at the end of the head stays in the buffer
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        head = decoder.decode(bytes(self.head))
        cut += len(decoder.getstate()[0]) + skipped
        rest = tail[skipped:].decode("utf-8", errors="replace")
        if around_cut is not None:
            size = len(head.encode()) + len(rest.encode())
            head, rest = around_cut(head, rest)
            cut += size - len(head.encode()) - len(rest.encode())
        return f"{head}\n[… {cut:,} bytes of output not kept …]\n{rest}", cut
