"""Helpers for the CLI provider tests: the fake agent CLI, collecting events, process checks."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awf_nb.api import arun
from awf_nb.store import Store
from tests.support.processes import process_alive
from tests.support.waiting import poll

HERE = Path(__file__).parent
SAMPLES = HERE / "samples"


@dataclass
class FakeCli:
    """A fake agent CLI installed as `binary` in a private bin folder."""

    folder: Path
    bin_dir: Path
    workdir: Path

    def install(self, binary: str) -> None:
        script = (HERE / "cli_fake_agent.py").read_text()
        target = self.bin_dir / binary
        # -S: no site-packages to scan, the fake needs only the stdlib (startup is half the cost).
        target.write_text(f"#!{sys.executable} -S\n{script}")
        target.chmod(0o755)

    def plan(self, *steps: dict[str, Any]) -> None:
        (self.folder / "plan.json").write_text(json.dumps(list(steps)))

    @property
    def env(self) -> dict[str, str]:
        """The environment a turn passes so the provider finds the fake first on PATH."""
        return {
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKE_CLI_DIR": str(self.folder),
            "FAKE_CLI_SAMPLES": str(SAMPLES),
        }

    def records(self) -> list[dict[str, Any]]:
        paths = sorted(self.folder.glob("record-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text()) for p in paths]

    def open_gate(self) -> None:
        (self.folder / "gate").touch()

    def gate_passed(self, number: int = 0) -> bool:
        path = self.folder / f"gate-{number}.json"
        return path.exists() and json.loads(path.read_text())["passed"]


def wait_until_gone(pids: list[int | None], seconds: float = 3.0) -> list[int]:
    """The pids still alive after waiting up to `seconds` (a hang guard)."""
    poll(lambda: not any(pid is not None and process_alive(pid) for pid in pids), seconds)
    return [pid for pid in pids if pid is not None and process_alive(pid)]


async def run_claude(fake_cli: FakeCli, tmp_path: Path, options: str = "") -> tuple[Any, Store]:
    """A one-step workflow on the fake claude, run with `options` added to the step's."""
    env = json.dumps(fake_cli.env)
    source = tmp_path / "wf.yaml"
    source.write_text(
        textwrap.dedent(f"""
        name: endless
        states:
          initial: ask
          ask:
            type: agent
            provider: claude
            prompt: RUN_TOOL please
            options: {{env: {env}{options}}}
            on_success: done
          done: {{type: terminal}}
        """)
    )
    store = Store(tmp_path / "runs")
    result = await arun(source, storage=store, cwd=fake_cli.workdir, show=False)
    return result, store
