"""Making a `%%awf` cell await its run: the input transformer, and what the cell awaits.

Magics cannot be async. A cleanup transformer rewrites a `%%awf` cell (and a cell that is a
single `%awf run|resume` line) into `await <this module>.run_cell(line, body)`, so the cell
awaits the run on the kernel's own event loop (when the shell can await at top level).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.magic import AwfMagics

__all__ = ["can_await", "make_transformer", "remove_transformers", "run_cell", "run_line"]

_ENTRY = '__import__("awf_nb.frontends.notebook.transformer", fromlist=["run_cell"])'
_CELL_MAGIC = re.compile(r"^%%awf(?:[ \t]|$)")
_RUN_LINE = re.compile(r"^%awf[ \t]+(?:run|resume)(?:[ \t]|$)")


def _magics(shell: Any) -> AwfMagics:
    magics = shell.magics_manager.registry.get("AwfMagics")
    if magics is None:
        raise UsageError("the awf extension is not loaded: run %load_ext awf_nb")
    return magics


async def run_cell(line: str, body: str) -> None:
    """What a rewritten `%%awf` cell awaits."""
    from IPython import get_ipython

    await _magics(get_ipython()).cell_async(line, body)


async def run_line(line: str) -> None:
    """What a rewritten `%awf run|resume …` cell awaits."""
    from IPython import get_ipython

    await _magics(get_ipython()).line_async(line)


def can_await(shell: Any) -> bool:
    """Top-level `await` works in this shell with asyncio (autoawait on, asyncio runner)."""
    from IPython.core.async_helpers import _asyncio_runner

    return bool(getattr(shell, "autoawait", False)) and shell.loop_runner is _asyncio_runner


def make_transformer(shell: Any) -> Callable[[list[str]], list[str]]:
    """The cleanup input transformer that turns a `%%awf` cell (or a cell that is one
    `%awf run|resume` line) into one top-level `await`."""

    def awf_await_cell(lines: list[str]) -> list[str]:
        if not lines or not can_await(shell):
            return lines
        first = lines[0].rstrip("\r\n")
        if _CELL_MAGIC.match(first):
            line = first[len("%%awf") :].strip()
            body = "".join(lines[1:])
            return [f"await {_ENTRY}.run_cell({line!r}, {body!r})\n"]
        code = [text for text in lines if text.strip() and not text.lstrip().startswith("#")]
        if len(code) == 1 and _RUN_LINE.match(code[0].strip()):
            line = code[0].strip()[len("%awf") :].strip()
            return [f"await {_ENTRY}.run_line({line!r})\n"]
        return lines

    awf_await_cell._awf_transformer = True  # type: ignore[attr-defined]
    return awf_await_cell


def remove_transformers(shell: Any) -> None:
    transforms = shell.input_transformer_manager.cleanup_transforms
    transforms[:] = [t for t in transforms if not getattr(t, "_awf_transformer", False)]
