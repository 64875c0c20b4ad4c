"""Real peers that must be present: the switch that turns their absence into a failure.

Tests that drive a real peer (a llama.cpp server, an agent CLI from npm, JupyterLab in
Chromium, a Jupyter kernel, the bundled model, a pseudo-terminal) skip with a reason when
the peer is not installed, so a developer without them can still run the rest. CI sets
`AWF_REQUIRE_PEERS=1`: then every such skip is reported as a failure, and a missing
install can never pass CI green.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_PEERS_VARIABLE = "AWF_REQUIRE_PEERS"

# The markers of tests that drive a real peer (declared in pyproject.toml).
PEER_MARKERS = frozenset(
    {"real_server", "real_model", "real_cli", "kernel", "browser", "pty", "ray"}
)


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
