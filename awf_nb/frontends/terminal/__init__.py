"""The terminal frontend: a run shown in this terminal, and the person answering at it.

- `frontend.py`: `TerminalFrontend` opens a `TerminalSession` per run, which runs it (and,
  for `awf run`, owns the event loop, SIGINT and SIGTERM);
- `sink.py`: `TerminalSink`, the run's events written to stdout (content) and stderr
  (progress), one method per kind of event;
- `reader.py`: `TerminalReader`, the `> ` prompt and `[y/N]` questions;
- `ctrl_c.py`: `CtrlC`, what Ctrl-C does during a run;
- `debugger.py`: breakpoints answered at the prompt;
- `eval_progress.py`: an evaluation's progress bar and summary;
- `style.py`, `text.py`, `wrap.py`: colours, untrusted text made safe to show, lines broken
  between words.

The sink, the reader and Ctrl-C share one terminal — the reader must know what the sink has
written on the prompt's line, Ctrl-C must reach the reader waiting at the prompt and the
reply being streamed — and the session ties them to one run.
"""

from __future__ import annotations

from awf_nb.frontends.terminal.ctrl_c import CtrlC, Interruptible
from awf_nb.frontends.terminal.reader import TerminalReader
from awf_nb.frontends.terminal.sink import STREAM_FLUSH_DELAY, OutputMode, TerminalSink

__all__ = [
    "STREAM_FLUSH_DELAY",
    "CtrlC",
    "Interruptible",
    "OutputMode",
    "TerminalReader",
    "TerminalSink",
]
