"""The `%awf` and `%%awf` flags are the `awf` command line's flags, defined once.

Every `awf COMMAND` has a `%awf COMMAND` with the same options (same names, help, metavar,
default, choices, arity); the notebook adds exactly its own run flags to `run`/`resume`
and to `%%awf`.
"""

from __future__ import annotations

import argparse

import pytest

from awf_nb.frontends import cli, commands
from awf_nb.frontends.notebook.parsers import (
    NOTEBOOK_RUN_FLAGS,
    build_cell_parser,
    build_line_parser,
)

# Not compared: help, which each parser has; `--debug` and `--verbose`, the `awf` program's
# own flags (in a notebook, %tb shows a traceback and AWF_LOG sets what is logged).
NOT_COMPARED = {"-h", "--help", "--debug", "-v", "--verbose"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    """Every option string -> what a user sees and gets from it."""
    shown: dict[str, tuple[object, ...]] = {}
    for action in parser._actions:
        key = (action.dest, action.help, action.metavar, action.default, action.nargs,
               tuple(action.choices or ()), type(action).__name__)  # fmt: skip
        for option in action.option_strings or [action.dest]:
            if option not in NOT_COMPARED:
                shown[option] = key
    return shown


CLI_COMMANDS = _subparsers(cli.build_parser())
MAGIC_COMMANDS = _subparsers(build_line_parser())


def test_every_awf_command_is_a_percent_awf_command() -> None:
    assert set(MAGIC_COMMANDS) == set(CLI_COMMANDS) == set(commands.COMMANDS)


@pytest.mark.parametrize("name", sorted(commands.COMMANDS))
def test_a_percent_awf_command_has_the_cli_flags_and_only_the_notebook_run_flags_besides(
    name: str,
) -> None:
    on_the_cli = _options(CLI_COMMANDS[name])
    in_the_notebook = _options(MAGIC_COMMANDS[name])

    extra = set(in_the_notebook) - set(on_the_cli)
    assert extra == (set(NOTEBOOK_RUN_FLAGS) if name in ("run", "resume") else set())
    for option, described in on_the_cli.items():
        assert in_the_notebook.get(option) == described, option


def test_the_cell_magic_has_the_run_flags_of_awf_run_and_its_own() -> None:
    run_flags = {o: d for o, d in _options(CLI_COMMANDS["run"]).items() if o.startswith("-")}
    cell_flags = {o: d for o, d in _options(build_cell_parser()).items() if o.startswith("-")}

    assert set(cell_flags) - set(run_flags) == {*NOTEBOOK_RUN_FLAGS, "--diagram"}
    for option, described in run_flags.items():
        assert cell_flags.get(option) == described, option
