"""A real JupyterLab server and notebook files for the browser tests.

`JupyterLabServer(root)` starts `jupyter lab` (of this interpreter or a given venv's, with
extra server config when given) on 127.0.0.1 (a free port, no token, no
password, as in spec/notebook.md), isolated from the user's Jupyter config, settings,
workspaces and kernelspecs, with JupyterLab's news and update checks off so no
notification covers the page. `write_notebook` writes an .ipynb of code cells.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.waiting import free_port

# The checkout under test: its kernels import this awf_nb, not whichever one the
# interpreter has installed (an editable install may point at another checkout).
REPO_ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 90.0
STOP_SECONDS = 15.0

# JupyterLab settings for a quiet page: no news toast, no update check, no autosave
# surprises while the test drives it. Keys are plugin ids.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
}


class JupyterLabServer:
    """`jupyter lab` serving `root` on a free loopback port (a context manager)."""

    def __init__(
        self,
        root: Path,
        home: Path,
        env: dict[str, str] | None = None,
        python: Path | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.root = root
        # The environment JupyterLab runs in: this interpreter's unless another is given
        # (Jupyter AI lives in a venv of its own, tests/support/jupyter_ai.py).
        self.python = str(python or sys.executable)
        self._config = config or {}
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "jupyterlab.log"
        self._extra_env = env or {}
        self._process: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0

    def __enter__(self) -> JupyterLabServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        started = time.monotonic()
        self._write_settings()
        command = [
            self.python, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.root_dir={self.root}", f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--LabApp.user_settings_dir={self.home / 'lab-settings'}",
            f"--LabApp.workspaces_dir={self.home / 'lab-workspaces'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            # Own process group: stopping the server also stops the kernels it started.
            self._process = subprocess.Popen(
                command, cwd=self.root, env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self._wait_until_ready()
        self.start_seconds = time.monotonic() - started

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWF_", "JPY_"))}
        env.pop("VIRTUAL_ENV", None)
        env["PYTHONPATH"] = str(REPO_ROOT)  # nothing of the caller's path but this checkout
        env.update(
            JUPYTER_CONFIG_DIR=str(self.home / "config"),
            JUPYTER_DATA_DIR=str(self.home / "data"),
            JUPYTER_RUNTIME_DIR=str(self.home / "runtime"),
            IPYTHONDIR=str(self.home / "ipython"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
        )
        env.update(self._extra_env)
        return env

    def _write_settings(self) -> None:
        self.reset_lab_settings()
        config = self.home / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "jupyter_server_config.json").write_text(
            json.dumps({"LabApp": {"news_url": None}, **self._config})
        )

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with code {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/api/status", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"jupyter lab not ready after {READY_SECONDS:g}s:\n{self.log_tail()}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        # SIGINT twice is jupyter's own clean shutdown (kernels included); then force.
        for sig, wait in ((signal.SIGINT, 0.5), (signal.SIGINT, STOP_SECONDS)):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.wait(timeout=STOP_SECONDS)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def notebook_url(self, name: str, workspace: str | None = None) -> str:
        """The notebook in JupyterLab; a named workspace opens it alone (no earlier tabs)."""
        if workspace is None:
            return f"{self.url}/lab/tree/{name}"
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset"

    def set_lab_setting(self, plugin_id: str, values: dict[str, Any]) -> None:
        """A user setting (`@scope/package:plugin`), read by pages opened from now on."""
        package, plugin = plugin_id.split(":", 1)
        folder = self.home / "lab-settings" / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{plugin}.jupyterlab-settings").write_text(json.dumps(values))

    def reset_lab_settings(self) -> None:
        """Back to the quiet defaults of LAB_SETTINGS (nothing a test changed survives)."""
        shutil.rmtree(self.home / "lab-settings", ignore_errors=True)
        for plugin_id, values in LAB_SETTINGS.items():
            self.set_lab_setting(plugin_id, values)

    def shut_down_kernels(self) -> None:
        """End every kernel session the server has (between tests; bounded by timeouts)."""
        sessions = httpx.get(f"{self.url}/api/sessions", timeout=10.0).json()
        for session in sessions:
            httpx.delete(f"{self.url}/api/sessions/{session['id']}", timeout=30.0)


def write_notebook(path: Path, cells: list[str]) -> Path:
    """An nbformat-4 notebook of code cells, using the default python3 kernel."""
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "cell_type": "code",
                "id": f"cell-{index}",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": source,
            }
            for index, source in enumerate(cells)
        ],
    }
    path.write_text(json.dumps(notebook, indent=1))
    return path
