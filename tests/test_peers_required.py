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


# --- skips at collection time, optional packages -------------------------------------------

# What a test file does when a whole file needs a package that is missing.
SKIPPED_FILE = """
import pytest

pytest.importorskip("awf_no_such_package")


def test_never_collected():
    pass
"""
# The suite's own hooks, for a folder outside tests/ (as pytester would run it).
HOOKS = """
from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
"""


def _pytest(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **env}
    if "AWF_REQUIRE_PEERS" not in env:
        environment.pop("AWF_REQUIRE_PEERS", None)
    return subprocess.run(
        [sys.executable, *args, "-q", "-p", "no:cacheprovider", "-rfEs"],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_file_skipped_at_collection_fails_when_peers_are_required(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(HOOKS)
    (tmp_path / "test_needs_a_package.py").write_text(SKIPPED_FILE)
    (tmp_path / "test_other.py").write_text("def test_runs():\n    pass\n")
    relaxed = _pytest(["-m", "pytest", "."], tmp_path)
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "1 passed, 1 skipped" in relaxed.stdout
    required = _pytest(["-m", "pytest", "."], tmp_path, AWF_REQUIRE_PEERS="1")
    assert required.returncode != 0, required.stdout + required.stderr
    assert "Interrupted: 1 error during collection" in required.stdout
    assert "a file skipped when it is collected is a failure" in required.stdout
    assert "awf_no_such_package" in required.stdout


# Runs pytest with llama_cpp made impossible to import, as on a machine without it.
WITHOUT_LLAMA_CPP = (
    "import sys; sys.modules['llama_cpp'] = None; import pytest; "
    "sys.exit(pytest.main(sys.argv[1:]))"
)
LOCAL_TOOLS = "tests/providers/test_local_tools.py"


def test_only_the_tests_that_need_llama_cpp_depend_on_it() -> None:
    relaxed = _pytest(["-c", WITHOUT_LLAMA_CPP, LOCAL_TOOLS], REPO)
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "10 passed, 7 skipped" in relaxed.stdout
    assert "llama_cpp is not installed (pip install 'awf-nb[local]')" in relaxed.stdout
    required = _pytest(["-c", WITHOUT_LLAMA_CPP, LOCAL_TOOLS], REPO, AWF_REQUIRE_PEERS="1")
    assert required.returncode == 1, required.stdout + required.stderr
    assert "10 passed, 7 errors" in required.stdout
    assert "AWF_REQUIRE_PEERS is set, so a missing peer is a failure" in required.stdout
