"""The `awf` command table: each command's name, help, arguments and handler.

Both command lines are built from it: the `awf` program (`frontends/cli`) and the
notebook's `%awf` / `%%awf` (`frontends/notebook/parsers.py`), which import it sideways —
a command is defined once, by `@command(...)` in one of the modules below, and has the
same arguments in both places.

- `workflows.py`: validate, list, schema, diagram
- `runs.py`: run, resume, status, history (and `flags.py`: the flags `run` and `resume`
  share with `%%awf`, turned into `RunOptions`)
- `serve.py`: mcp-serve
- `doctor.py`: doctor (the checks themselves are in `awf_nb/runs/doctor.py`)
- `evals.py`: eval, evals, eval-rescore, eval-show, eval-report, eval-export
- `traces.py`: trace

Handlers return the process exit code and raise `AwfError` for the person's mistakes;
the caller (`main`, or the magic) turns those into a message. Heavy modules are imported
inside the handlers, so that `awf --help` stays instant.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["COMMANDS", "Command", "command"]

Handler = Callable[[argparse.Namespace], int]
Configure = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """One sub-command: its name, one-line help, how to add its arguments, what runs it."""

    name: str
    help: str
    configure: Configure
    handler: Handler
    description: str = ""


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, configure: Configure | None = None
) -> Callable[[Handler], Handler]:
    """Register a handler as `awf NAME`; `configure` adds its arguments to its sub-parser."""

    def register(handler: Handler) -> Handler:
        COMMANDS[name] = Command(
            name,
            help,
            configure or (lambda parser: None),
            handler,
            description=(handler.__doc__ or help).strip(),
        )
        return handler

    return register
