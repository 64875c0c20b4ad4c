"""The `awf` commands, shared by the `awf` program and the notebook's `%awf` (see
`table.py`). Importing the package registers every command."""

from __future__ import annotations

from awf_nb.frontends.commands.table import COMMANDS, Command, command

# isort: off
# Imported in the order `awf --help` lists the commands (each module registers its own).
from awf_nb.frontends.commands import workflows
from awf_nb.frontends.commands import runs
from awf_nb.frontends.commands import serve
from awf_nb.frontends.commands import doctor
from awf_nb.frontends.commands import traces
from awf_nb.frontends.commands import evals

# isort: on

__all__ = [
    "COMMANDS",
    "Command",
    "command",
    "doctor",
    "evals",
    "runs",
    "serve",
    "traces",
    "workflows",
]
