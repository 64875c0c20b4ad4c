"""AWF_REQUIRE_PEERS turns a missing real peer into a red run (CI sets it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# A real_cli test whose peer (the claude CLI from npm) is made missing by pointing the
# npm prefix at an empty folder.
PEER_TEST = (
    "tests/providers/cli/test_cli_real.py::test_claude_unknown_session_is_reported_as_not_found"
)


def _run_peer_test(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "AWF_NPM_PREFIX": str(tmp_path / "empty-prefix"), **env}
    if "AWF_REQUIRE_PEERS" not in env:
        environment.pop("AWF_REQUIRE_PEERS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", PEER_TEST, "-q", "-p", "no:cacheprovider", "-rfs"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missing_peer_skips_by_default(tmp_path: Path) -> None:
    result = _run_peer_test(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout


def test_a_missing_peer_fails_when_peers_are_required(tmp_path: Path) -> None:
    result = _run_peer_test(tmp_path, AWF_REQUIRE_PEERS="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout
    assert "AWF_REQUIRE_PEERS is set" in result.stdout
    assert "claude not installed" in result.stdout


def test_install_clis_fails_without_npm_when_peers_are_required(tmp_path: Path) -> None:
    # PATH without npm: only the folder of bash and the coreutils the script uses.
    env = {
        "PATH": "/nonexistent-bin",
        "AWF_NPM_PREFIX": str(tmp_path / "prefix"),
        "HOME": str(tmp_path),
    }
    script = REPO / "tests/providers/cli/install_clis.sh"
    relaxed = subprocess.run(["/bin/bash", str(script)], env=env, capture_output=True, text=True)
    required = subprocess.run(
        ["/bin/bash", str(script)],
        env={**env, "AWF_REQUIRE_PEERS": "1"},
        capture_output=True,
        text=True,
    )
    assert relaxed.returncode == 0, relaxed.stderr
    assert required.returncode != 0
    assert "npm not found" in required.stderr
