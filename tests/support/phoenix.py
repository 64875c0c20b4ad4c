"""Arize Phoenix, a real OpenTelemetry collector and viewer, on 127.0.0.1: `started()`
runs one (the trace tests' session fixture, tests/traces/conftest.py); a missing Phoenix
fails, never skips."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.waiting import free_port, poll

READY_SECONDS = 300.0  # hang guard: Phoenix migrates its database on first start (~2 min on a busy 2-core machine)


class Phoenix:
    def __init__(self, url: str) -> None:
        self.url = url

    def spans(self, trace_id: str | None = None) -> list[dict]:
        """Every span Phoenix holds in its default project (of one trace)."""
        response = httpx.get(
            f"{self.url}/v1/projects/default/spans", params={"limit": 1000}, timeout=10
        )
        response.raise_for_status()
        spans = response.json()["data"]
        if trace_id is not None:
            spans = [s for s in spans if s["context"]["trace_id"] == trace_id]
        return spans


@contextlib.contextmanager
def started(work: Path) -> Iterator[Phoenix]:
    """A Phoenix server working in `work`, until the block ends."""
    import phoenix  # noqa: F401  (a missing peer fails here)

    port, grpc = free_port(), free_port()
    env = dict(
        os.environ,
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_TELEMETRY_ENABLED="false",
    )
    log = Path(work / "phoenix.log").open("wb")  # noqa: SIM115  (closed after the server)
    process = subprocess.Popen(
        [sys.executable, "-m", "phoenix.server.main", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            return True
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert poll(ready, READY_SECONDS, 0.5), "Phoenix did not start"
        assert process.poll() is None, (work / "phoenix.log").read_text()[-2000:]
        yield Phoenix(url)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
