"""The OpenAI-compatible test server itself: its command line (used by benchmarks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).parents[2]


def test_command_line_serves_n_tokens_per_request() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--tokens", "50"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        assert base_url.endswith("/v1")
        body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True}
        with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=10) as reply:
            events = [line for line in reply.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]"
        assert sum('"content": " t' in line for line in events) == 50
        assert httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
