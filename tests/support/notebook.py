"""Running cells in a plain IPython shell (no kernel) for the `%%awf` / `%awf` tests.

The shell itself and the `ip` fixture (that shell in a fresh folder with its own run store)
live in tests/frontends/notebook/conftest.py.
"""

from __future__ import annotations

from IPython.core.interactiveshell import ExecutionResult, InteractiveShell


def cell(ip: InteractiveShell, text: str) -> ExecutionResult:
    """Runs `text` as one cell, outside the shell's history (tests share one shell)."""
    return ip.run_cell(text, store_history=False)
