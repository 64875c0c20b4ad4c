"""Real peers that must be present: the switch that turns their absence into a failure.

Tests that drive a real peer (a llama.cpp server, an agent CLI from npm, JupyterLab in
Chromium, a Jupyter kernel, the bundled model, a pseudo-terminal, an optional package)
skip with a reason when the peer is not installed, so a developer without them can still
run the rest. CI sets `AWF_REQUIRE_PEERS=1`: then every such skip is reported as a
failure, and a missing install can never pass CI green.

- A test with a real-peer marker that skips fails instead (`fail_skipped_peer`).
- `require_module("llama_cpp")` imports an optional package for the test (or fixture)
  that needs it: a skip of that test only, or a failure when peers are required.
- A skip at collection time (a module-level `pytest.importorskip`, `pytest.skip(...,
  allow_module_level=True)`) would silently drop a whole file: when peers are required it
  is an error of that file (`fail_skipped_collection`).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

REQUIRE_PEERS_VARIABLE = "AWF_REQUIRE_PEERS"

# The markers of tests that drive a real peer (declared in pyproject.toml).
PEER_MARKERS = frozenset(
    {"real_server", "real_model", "real_cli", "kernel", "browser", "pty", "ray"}
)

REPO_ROOT = Path(__file__).resolve().parents[2]
# Where tests/providers/cli/install_clis.sh puts the npm peers (`$AWF_NPM_PREFIX`, default
# `<repo>/.npm-cli`): the agent CLIs and the MCP filesystem server.
NPM_BIN = Path(os.environ.get("AWF_NPM_PREFIX") or REPO_ROOT / ".npm-cli") / "node_modules" / ".bin"
FILESYSTEM_SERVER = NPM_BIN / "mcp-server-filesystem"


def peers_required() -> bool:
    """True when a missing real peer must fail the run instead of skipping."""
    return os.environ.get(REQUIRE_PEERS_VARIABLE, "").strip() not in ("", "0", "false", "no")


def drives_a_peer(item: pytest.Item) -> bool:
    """True when the test carries one of the real-peer markers."""
    return any(item.get_closest_marker(name) for name in PEER_MARKERS)


def fail_skipped_peer(item: pytest.Item, report: pytest.TestReport) -> None:
    """Turn the skip of a real-peer test into a failure (when peers are required)."""
    if not (report.skipped and peers_required() and drives_a_peer(item)):
        return
    if hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"{REQUIRE_PEERS_VARIABLE} is set, so a missing real peer is a failure, "
        f"not a skip: {reason}"
    )


def require_module(name: str, install: str) -> ModuleType:
    """Import `name` for the test that needs it: skip that test when it is missing, or fail
    it when peers are required. `install` says how to get it."""
    try:
        return pytest.importorskip(
            name, reason=f"{name} is not installed ({install})", exc_type=ImportError
        )
    except pytest.skip.Exception as missing:
        if peers_required():
            pytest.fail(
                f"{REQUIRE_PEERS_VARIABLE} is set, so a missing peer is a failure: {missing}"
            )
        raise


def fail_skipped_collection(report: pytest.CollectReport) -> None:
    """Turn a skip of a whole file at collection time into an error (when peers are
    required): its tests would otherwise vanish and the run pass."""
    if not (report.skipped and peers_required()):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"{REQUIRE_PEERS_VARIABLE} is set, so a file skipped when it is collected is a "
        f"failure, not a skip ({report.nodeid}): {reason}"
    )
