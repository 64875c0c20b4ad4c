"""awf's log messages: the standard `logging` module, under the `awf_nb` logger.

Every module logs to `logging.getLogger(__name__)` (`awf_nb.engine.run`, …). What is
logged is what a person does not see otherwise: a frontend that keeps failing (a
warning), a provider that failed to close (info), the tracebacks behind them (debug).
Nothing secret is logged: messages that carry a run's text are masked first.

Seeing them:

- `awf --verbose …` (info) and `awf --debug …` (debug, with tracebacks); warnings are
  always shown;
- the `AWF_LOG` environment variable (`debug`, `info`, `warning`, `error`) does the same
  for a notebook or a script (`%load_ext awf_nb` and `awf_nb.run` read it), and for `awf`
  when neither flag is given.

Without either, a library that never configured logging still shows awf's warnings on
stderr (Python's last-resort handler); an application's own logging configuration wins.
Only the entry points call `configure`: the run set-up never touches logging.
"""

from __future__ import annotations

import logging
import os
import sys

from awf_nb.errors import UserError

__all__ = ["LEVELS", "configure", "configure_from_env", "level_from_env"]

LOGGER = "awf_nb"
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
ENV = "AWF_LOG"


class _Stderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a message comes (a notebook cell's output,
    pytest's capture), not to the stream of the moment the handler was made."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


class _Format(logging.Formatter):
    """`awf: warning: message` (with the logger's name at debug level)."""

    def __init__(self, detail: bool) -> None:
        super().__init__()
        self.detail = detail

    def format(self, record: logging.LogRecord) -> str:
        where = f"{record.name}: " if self.detail else ""
        text = f"awf: {record.levelname.lower()}: {where}{record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def level_from_env(env: dict[str, str] | None = None) -> int | None:
    """The level `AWF_LOG` asks for (None when it is not set)."""
    value = (os.environ if env is None else env).get(ENV, "").strip().lower()
    if not value:
        return None
    if value not in LEVELS:
        raise UserError(f"{ENV}={value}: not a log level; use one of {', '.join(LEVELS)}")
    return LEVELS[value]


def configure(level: int) -> logging.Logger:
    """Show awf's messages of `level` and above on stderr (`awf: warning: …`); calling it
    again only changes the level."""
    logger = logging.getLogger(LOGGER)
    handler = next((h for h in logger.handlers if isinstance(h, _Stderr)), None)
    if handler is None:
        handler = _Stderr()
        logger.addHandler(handler)
    handler.setFormatter(_Format(detail=level <= logging.DEBUG))
    logger.setLevel(level)
    return logger


def configure_from_env() -> None:
    """`configure` with the level of `AWF_LOG`, when it is set (else nothing changes)."""
    level = level_from_env()
    if level is not None:
        configure(level)
