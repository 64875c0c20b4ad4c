"""The `%%awf` and `%awf` command lines, built from the `awf` command line's own commands.

Every `awf` command is also a `%awf` command, with the same arguments: each is defined once,
by the command's `configure` function in the command table (`awf_nb.frontends.commands`,
which the `awf` program uses too). The notebook adds
three flags of its own to `%awf run`, `%awf resume` and `%%awf` (`NOTEBOOK_RUN_FLAGS`:
`--out`, `--no-interactive`, `--wait`), and `%%awf` adds `--diagram`. In a notebook,
`{name}` in an input value or a RUN_ID is replaced by the Python variable `name`.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser

from awf_nb.errors import AwfError
from awf_nb.frontends.commands import COMMANDS, flags
from awf_nb.frontends.notebook.handle import DEFAULT_HANDLE, cell_error
from awf_nb.frontends.notebook.run_mode import is_headless

if TYPE_CHECKING:
    from awf_nb.workflow.model import Workflow

__all__ = [
    "NOTEBOOK_RUN_FLAGS",
    "CellOptions",
    "HelpShown",
    "build_cell_parser",
    "build_line_parser",
    "cell_options",
    "cell_workflow",
    "expand_braces",
    "parse_line",
]

NOTEBOOK_RUN_FLAGS = ("--out", "--no-interactive", "--wait", "--no-wait")
_BRACED_NAME = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}(?!\})")
_YAML_NAME = re.compile(r"^name[ \t]*:[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_LINE_HELP = (
    "Run, validate, draw and list workflows; see past runs: the `awf` commands, in a "
    "notebook. {name} in an input value or a RUN_ID inserts the Python variable `name`."
)


class HelpShown(Exception):
    """`-h` was given: the help has been printed, nothing else to do."""


class _HelpAction(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.print_help()
        raise HelpShown


def _parser(prog: str, description: str) -> MagicArgumentParser:
    parser = MagicArgumentParser(
        prog=prog,
        description=description,
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-h", "--help", action=_HelpAction, help="show this help")
    return parser


def add_notebook_run_flags(parser: argparse.ArgumentParser) -> None:
    """What only a notebook run has: the handle's name, headless mode, waiting or not."""
    parser.add_argument(
        "--out", metavar="NAME", default=DEFAULT_HANDLE, help="bind the run handle to NAME"
    )
    parser.add_argument(
        "--no-interactive",
        action="store_true",
        help="headless: a conversation ends instead of waiting for input",
    )
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="make the cell wait for the run to end (--wait) or return at once (--no-wait)",
    )


def build_cell_parser() -> MagicArgumentParser:
    parser = _parser("%%awf", "Run the workflow written (as YAML) in the cell body.")
    parser.add_argument(
        "workflow",
        nargs="?",
        metavar="WORKFLOW_NAME",
        help="the workflow's name when the YAML has none; with an empty body, the workflow "
        "to run from the search path",
    )
    flags.configure_run_io(parser)
    flags.configure_dry_run(parser)
    add_notebook_run_flags(parser)
    parser.add_argument(
        "--diagram", action="store_true", help="show the workflow as a diagram; do not run it"
    )
    return parser


def build_line_parser() -> MagicArgumentParser:
    """`%awf COMMAND …`: one sub-command per `awf` command, with that command's arguments."""
    parser = _parser("%awf", _LINE_HELP)
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=MagicArgumentParser
    )
    for command in COMMANDS.values():
        sub = commands.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            add_help=False,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("-h", "--help", action=_HelpAction, help="show this help")
        command.configure(sub)
        if command.name in ("run", "resume"):
            add_notebook_run_flags(sub)
    return parser


def parse_line(parser: MagicArgumentParser, line: str) -> argparse.Namespace:
    """Split like a POSIX shell (`-i topic="Go channels"` is one value) and parse."""
    try:
        argv = shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(f"{parser.prog}: cannot split the line: {exc}") from None
    return parser.parse_args(argv)


# --- what a run command asked for ----------------------------------------------------------


@dataclass
class CellOptions:
    """What a `%%awf` cell or a `%awf run|resume` line asked for."""

    inputs: dict[str, str]
    replies: list[str] | None
    out: str
    headless: bool
    wait: bool | None
    output: str | None  # streaming | buffered | silent (None: the frontend's default)
    json: bool  # print the final state as JSON when the run ends
    # --simulate-user, --record / --replay / --record-missing / --replay-speed, --yes,
    # --storage: the `RunOptions` fields they set (`commands.flags.run_flags`)
    flags: dict[str, Any] = field(default_factory=dict)

    @property
    def user(self) -> Any:
        """The SimulatedUser playing the person (--simulate-user), or None."""
        return self.flags.get("user")


def cell_options(args: argparse.Namespace, namespace: Mapping[str, Any]) -> CellOptions:
    from awf_nb.engine.inputs import parse_input_args

    if not args.out.isidentifier() or keyword.iskeyword(args.out):
        raise UsageError(f"--out {args.out}: not a Python variable name")
    given = [expand_braces(pair, namespace) for pair in args.input]
    try:
        inputs = parse_input_args(given, cwd=Path.cwd())
        run_flags = flags.run_flags(args)
    except AwfError as exc:
        raise cell_error(exc) from None
    return CellOptions(
        inputs=inputs,
        replies=args.reply,
        out=args.out,
        headless=is_headless(args.no_interactive),
        wait=args.wait,
        output=args.output,
        json=args.json,
        flags=run_flags,
    )


def expand_braces(value: str, namespace: Mapping[str, Any]) -> str:
    """`{name}` / `{obj.attr}` -> str(value of that Python variable); anything else (YAML or
    Go-template braces, names that are not defined) is left as written."""

    def replace(match: re.Match[str]) -> str:
        head, *attrs = match.group(1).split(".")
        if head not in namespace:
            return match.group(0)
        found: Any = namespace[head]
        for attr in attrs:
            if not hasattr(found, attr):
                return match.group(0)
            found = getattr(found, attr)
        return str(found)

    return _BRACED_NAME.sub(replace, value)


def cell_workflow(name: str | None, body: str) -> Workflow:
    """The workflow of a `%%awf` cell: the YAML body (named `name` when it has no `name:`),
    or the workflow `name` from the search path when the body is empty."""
    from awf_nb.workflow.loader import load_text, load_workflow

    if not body.strip():
        if not name:
            raise UsageError(
                "%%awf needs a workflow: YAML in the cell body, or a workflow name on the line"
            )
        return load_workflow(name, cwd=Path.cwd())
    # A leading newline makes YAML line N the cell's line N (line 1 is the %%awf line).
    text = "\n" + body
    if name:
        declared = _YAML_NAME.search(body)
        if declared is None:
            text = text.rstrip("\n") + f"\nname: {json.dumps(name)}\n"
        elif declared.group(1).strip("\"'") != name:
            raise UsageError(
                f'%%awf {name}: the YAML names the workflow "{declared.group(1).strip()}"; '
                "use one name (or drop it from the line)"
            )
    return load_text(text, file="<cell>", base_dir=Path.cwd())
