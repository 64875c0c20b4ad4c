"""A real Ray cluster for the tests: a head node started as its own processes with Ray's
command line (`ray start --head`), stopped with `ray stop`.

- Usage reporting off (`RAY_USAGE_STATS_ENABLED=0`, `--disable-usage-stats`).
- Loopback only: with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` every Ray socket binds
  127.0.0.1 (without it Ray listens on the machine's other addresses too). The cluster is
  therefore one node; its CPUs (`--num-cpus`) are the worker processes it may start.
- Token authentication, as Ray does by default, with a token of its own given in the
  environment (`RAY_AUTH_MODE=token`, `RAY_AUTH_TOKEN`): nothing of the user's `~/.ray` is
  read or written. A driver connects with `env` (the cluster's address among it).
- Its own temp dir, short: Ray's Unix sockets live under it (a socket path has a 107-byte
  limit).

Every wait is bounded: `ray start` at `COMMAND_TIMEOUT`, the stop at `STOP_TIMEOUT`.
`ray start` gives its node a fixed 30 s to register, which a machine whose CPUs are busy
with other work can miss; a start that fails is cleaned up and tried again, up to
`START_ATTEMPTS` times.
`stop()` ends this cluster's processes by their ids (those that name its temp dir or its
address, and their children), not every Ray process of the machine as `ray stop` would.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from tests.support.waiting import free_port

COMMAND_TIMEOUT = 240.0  # `ray start` on a busy CPU: Ray's own wait for its node is 30 s
STOP_TIMEOUT = 30.0  # from SIGTERM to SIGKILL
START_ATTEMPTS = 3
# Ray's variables for every process of the cluster and for the drivers that use it.
RAY_BASE_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "token",
}


def ray_command() -> list[str]:
    """Ray's command line, from the Python running the tests."""
    script = Path(sys.executable).parent / "ray"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "ray.scripts.scripts"]


class RayCluster:
    """A one-node Ray cluster of its own processes (see the module docstring)."""

    def __init__(self, cpus: int) -> None:
        self.cpus = cpus
        self.temp = Path(tempfile.mkdtemp(prefix="awf-ray-"))
        self.env = {**RAY_BASE_ENV, "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.address = ""

    def _ray(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*ray_command(), *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )

    def start(self) -> None:
        failures = []
        for _ in range(START_ATTEMPTS):
            started = self._ray(
                "start", "--head", "--port=0", "--include-dashboard=false",
                "--disable-usage-stats", f"--num-cpus={self.cpus}", f"--temp-dir={self.temp}",
                # ports of their own: Ray's defaults (8265, 10001) may be another cluster's
                f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}",
            )  # fmt: skip
            if started.returncode == 0:
                break
            failures.append(started.stderr.strip().splitlines()[-1:] or ["?"])
            self.stop()  # what the failed start left running
            self.temp = Path(tempfile.mkdtemp(prefix="awf-ray-"))
        else:
            raise RuntimeError(f"ray start failed {START_ATTEMPTS} times: {failures}")
        self.address = (self.temp / "ray_current_cluster").read_text().strip()
        if not self.address.startswith("127.0.0.1:"):
            raise RuntimeError(f"the Ray cluster is not on loopback: {self.address}")
        self.env["RAY_ADDRESS"] = self.address

    def processes(self) -> list[psutil.Process]:
        """The cluster's processes: those naming its temp dir or address, their children."""
        marks = [str(self.temp)] + ([f"--address={self.address}"] if self.address else [])
        roots = []
        for process in psutil.process_iter(["cmdline"]):
            command = " ".join(process.info["cmdline"] or [])
            if process.pid != os.getpid() and any(mark in command for mark in marks):
                roots.append(process)
        found: dict[int, psutil.Process] = {}
        for root in roots:
            try:
                for process in [root, *root.children(recursive=True)]:
                    found[process.pid] = process
            except psutil.NoSuchProcess:
                continue
        return list(found.values())

    def stop(self) -> None:
        processes = self.processes()
        for process in processes:
            try:
                process.terminate()
            except psutil.NoSuchProcess:
                continue
        _, alive = psutil.wait_procs(processes, timeout=STOP_TIMEOUT)
        for process in alive:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(alive, timeout=STOP_TIMEOUT)
        shutil.rmtree(self.temp, ignore_errors=True)
