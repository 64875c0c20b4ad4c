"""The `awf` program (spec §9): the argument parser built from the command table, and the
error handling around every command.

The commands themselves are in `frontends/commands` (shared with the notebook's `%awf`).
`main` turns every `AwfError` into its message and exit code (1 user error, 2 definition
error, 3 execution error, 4 system error) and never shows a traceback unless `--debug` is
given; `--verbose` / `--debug` (or `AWF_LOG`) show what awf logs on stderr. Heavy modules
(pydantic, the loader) are imported inside the handlers so `awf --help` stays instant;
`awf --version` is answered before even the parser (`parser.py`) and the command modules
are imported.

The console script `awf` runs `entry`; `python -m awf_nb.cli` does too (see
`awf_nb/cli.py`).
"""

from __future__ import annotations

import os
import sys

from awf_nb._version import __version__

# Not `typing.TYPE_CHECKING`: `awf --version` imports nothing it does not need (see
# awf_nb/__init__.py); type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import NoReturn

    from awf_nb.frontends.commands.table import Handler

__all__ = ["build_parser", "entry", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The `awf` argument parser, with one sub-parser per registered command."""
    from awf_nb.frontends.cli.parser import build_parser as build

    return build()


def main(argv: list[str] | None = None) -> int:
    """Run `awf` with `argv` (default: the process arguments); return the exit code."""
    _tolerant_streams()
    if _version_only(sys.argv[1:] if argv is None else argv):
        print(f"awf-nb {__version__}")
        return 0
    from awf_nb.errors import EXIT_USER, UserError
    from awf_nb.frontends.cli.parser import UsageError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USER
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USER
    try:
        _configure_logging(args)
    except UserError as err:  # a bad AWF_LOG
        print(str(err), file=sys.stderr)
        return err.exit_code
    return _run(handler, args)


def _version_only(argv: list[str]) -> bool:
    """`awf --version`: answered as argparse's own `--version` would, before argparse, the
    commands or anything else is imported (the parser knows the option too, for --help)."""
    return argv == ["--version"]


def _configure_logging(args: argparse.Namespace) -> None:
    """Warnings always; `--verbose` adds info, `--debug` debug messages (with tracebacks);
    without either, `AWF_LOG` decides."""
    import logging

    from awf_nb import logs

    if getattr(args, "debug", False):
        level = logging.DEBUG
    elif getattr(args, "verbose", False):
        level = logging.INFO
    else:
        level = logs.level_from_env() or logging.WARNING
    logs.configure(level)


def _tolerant_streams() -> None:
    """Bytes that are not UTF-8 on stdin, and text that cannot be encoded on the way out,
    must never crash a run (and leave it marked running): stdin keeps such bytes as
    surrogate escapes (readers turn them into U+FFFD), stdout/stderr replace what they
    cannot write."""
    for stream, errors in ((sys.stdin, "surrogateescape"), (sys.stdout, "replace"),
                           (sys.stderr, "replace")):  # fmt: skip
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:  # noqa: SIM105 - contextlib is not imported for `awf --version`
                reconfigure(errors=errors)
            except (ValueError, OSError):
                pass


def _run(handler: Handler, args: argparse.Namespace) -> int:
    import traceback

    from awf_nb.errors import EXIT_CANCELLED, EXIT_SYSTEM, AwfError

    debug = bool(getattr(args, "debug", False))
    try:
        return handler(args)
    except AwfError as err:
        if debug:
            traceback.print_exc()
        print(str(err), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_CANCELLED
    except BrokenPipeError:
        # `awf list | head`: the reader left; say nothing more and exit quietly.
        _silence_stdout()
        return 0
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if not debug:
            print("rerun with --debug to see the traceback, and report it", file=sys.stderr)
        return EXIT_SYSTEM


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def entry() -> NoReturn:
    """The `awf` program: run `main` and exit with its code.

    The first Ctrl-C outside a run (where the terminal frontend handles it the chat way)
    stops the command with code 130; later presses, from a key held down while the
    command is already stopping, are ignored instead of killing it by SIGINT.
    """
    if _version_only(sys.argv[1:]):
        sys.exit(main())
    import signal

    from awf_nb.errors import EXIT_CANCELLED

    def first_press_only(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first_press_only)
    try:
        code = main()
        # Python's finalization puts SIGINT back to the system default (death) unless it
        # is ignored; the work is done, so it is ignored from here.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # first_press_only already ignores the presses after it
        code = EXIT_CANCELLED
    sys.exit(code)
