"""What breaking replies between words costs a terminal, per streamed token.

On a terminal, `TerminalSink` sends every streamed piece of a reply through
`WordWrap.feed` (awf_nb/frontends/terminal/wrap.py) before writing it. This times, in one
run, a reply of N tokens of about four characters (the size models stream) written to an
in-memory stream by the sink as it writes to a pipe (no wrapping) and as it writes to a
terminal (wrapping at 80 columns), and prints the cost per token and the ratio.

    python benchmarks/terminal_wrap.py [--tokens 200000]
"""

from __future__ import annotations

import argparse
import io
import time

from awf_nb.engine import events as ev
from awf_nb.frontends.terminal import TerminalSink
from awf_nb.frontends.terminal.wrap import WordWrap


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def stream(sink: TerminalSink, tokens: list[str]) -> float:
    started = time.perf_counter()
    for token in tokens:
        sink.emit(ev.AgentText("r", "chat", token))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200_000)
    args = parser.parse_args()
    words = [
        "the",
        "model",
        "writes",
        "a",
        "reply",
        "word",
        "by",
        "word,",
        "and",
        "some",
        "longer",
        "explanations",
        "too",
    ]
    tokens = [(" " if i else "") + words[i % len(words)] for i in range(args.tokens)]

    plain = TerminalSink("streaming", out=io.StringIO(), err=io.StringIO(), color=False)
    wrapped = TerminalSink("streaming", out=Tty(), err=io.StringIO(), color=False)
    wrapped._wrap = WordWrap(80)
    assert plain._wrap is None
    piped, tty = stream(plain, tokens), stream(wrapped, tokens)
    per = 1e6 / args.tokens
    print(
        f"{args.tokens} tokens: to a pipe {piped * per:.2f} µs/token, to a terminal "
        f"(wrapped at 80 columns) {tty * per:.2f} µs/token; ratio {tty / piped:.2f}"
    )


if __name__ == "__main__":
    main()
