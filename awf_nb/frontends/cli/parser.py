"""The `awf` argument parser: one sub-parser per registered command.

Apart from `awf_nb.frontends.cli` so that `awf --version` is answered without importing
argparse or any command module (`frontends/commands` imports them all to register them).
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from awf_nb._version import __version__

__all__ = ["UsageError", "build_parser"]


class UsageError(Exception):
    """A bad command line: argparse's message, shown with the usage of the command."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class Parser(argparse.ArgumentParser):
    # argparse exits with status 2 on a bad command line, which in awf means "invalid
    # workflow"; a bad command line is a user error (1), so raise and let main decide.
    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    """The `awf` argument parser, with one sub-parser per registered command."""
    from awf_nb.frontends.commands import COMMANDS  # every command module: not for --version

    parser = Parser(
        prog="awf",
        description="Run AWF agent workflows: YAML state machines of shell and LLM steps.",
    )
    parser.add_argument("--version", action="version", version=f"awf-nb {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors and debug messages"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show what awf logs (a provider that failed to close, …)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for cmd in COMMANDS.values():
        sub_parser = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # Accept --debug / --verbose after the command too (`awf validate x --debug`);
        # SUPPRESS keeps the sub-parser from resetting one given before the command.
        for flags in (("--debug",), ("-v", "--verbose")):
            sub_parser.add_argument(
                *flags, action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
            )
        cmd.configure(sub_parser)
        sub_parser.set_defaults(handler=cmd.handler)
    return parser
