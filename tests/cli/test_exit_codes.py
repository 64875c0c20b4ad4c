"""Every exit code in docs/cli.md's table, produced by the real command line. The codes are
read from the table, so the doc and the code cannot drift apart."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import spawn_awf
from tests.support.waiting import HANG_GUARD_SECONDS, wait_until

REPO = Path(__file__).resolve().parents[2]


def documented_codes() -> set[str]:
    doc = (REPO / "docs" / "cli.md").read_text()
    table = doc[doc.index("## Exit codes") :]
    return set(re.findall(r"^\| (\d+|N) \|", table, re.M))


def write(tmp_path: Path, text: str, name: str = "wf.yaml") -> str:
    (tmp_path / name).write_text(text)
    return name


TERMINAL = "  d: {type: terminal}\n"


def case_0(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    return awf("run", write(tmp_path, "name: t\nstates:\n  initial: d\n" + TERMINAL))


def case_1(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    # an agent CLI that is not installed: the user's to fix
    text = (
        "name: t\nstates:\n  initial: a\n"
        "  a: {type: agent, provider: claude, prompt: hi, on_success: d}\n" + TERMINAL
    )
    return awf("run", write(tmp_path, text), env={"PATH": str(tmp_path)})


def case_2(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    # a provider option of the wrong type
    text = (
        "name: t\nstates:\n  initial: a\n  a: {type: agent, provider: claude, prompt: hi,"
        " options: {extra_args: 7}, on_success: d}\n" + TERMINAL
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "claude").chmod(0o755)
    return awf("run", write(tmp_path, text), env={"PATH": f"{bin_dir}:/usr/bin:/bin"})


def case_3(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    text = "name: t\nstates:\n  initial: a\n  a: {type: step, command: 'exit 9', on_success: d}\n"
    return awf("run", write(tmp_path, text + TERMINAL))


def case_4(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    storage = tmp_path / "not-a-folder"
    storage.write_text("a file where the storage folder should be")
    return awf(
        "run", write(tmp_path, "name: t\nstates:\n  initial: d\n" + TERMINAL),
        env={"AWF_STORAGE": str(storage)},
    )  # fmt: skip


def case_N(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    text = (
        "name: t\nstates:\n  initial: a\n"
        "  a: {type: step, command: 'false', on_failure: {message: gave up, status: 42}}\n"
    )
    result = awf("run", write(tmp_path, text + TERMINAL))
    assert result.returncode == 42
    result.returncode = "N"  # type: ignore[assignment]
    return result


def case_130(awf, tmp_path: Path) -> subprocess.CompletedProcess:
    marker = tmp_path / "started"
    text = (
        "name: t\nstates:\n  initial: a\n"
        f"  a: {{type: step, command: 'touch {marker}; sleep 30', on_success: d}}\n" + TERMINAL
    )
    proc = spawn_awf("run", write(tmp_path, text), storage=tmp_path / "s", cwd=tmp_path)
    wait_until(marker.exists, "the command to start")
    proc.send_signal(signal.SIGINT)  # Ctrl-C outside a reply cancels the run
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


CASES = {
    name.removeprefix("case_"): fn for name, fn in globals().items() if name.startswith("case_")
}


def test_every_documented_code_has_a_case() -> None:
    assert documented_codes() == set(CASES)


@pytest.mark.parametrize("code", sorted(CASES))
def test_exit_code(code: str, awf, tmp_path: Path) -> None:
    result = CASES[code](awf, tmp_path)
    assert str(result.returncode) == code, (result.stdout, result.stderr)
    if code not in ("0", "N"):
        assert "Traceback" not in result.stderr


def test_ctrl_c_held_down_still_exits_130(tmp_path: Path) -> None:
    """A user leaning on Ctrl-C sends presses after the run is already cancelled, while
    the command is exiting: those late presses must not turn 130 into death-by-signal."""
    marker = tmp_path / "started"
    text = (
        "name: t\nstates:\n  initial: a\n"
        f"  a: {{type: step, command: 'touch {marker}; sleep 30', on_success: d}}\n" + TERMINAL
    )
    proc = spawn_awf("run", write(tmp_path, text), storage=tmp_path / "s", cwd=tmp_path)
    wait_until(marker.exists, "the command to start")
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while proc.poll() is None:  # the key held down: a press every 2 ms until awf exits
        assert time.monotonic() < deadline, "awf did not exit while Ctrl-C was held down"
        proc.send_signal(signal.SIGINT)
        time.sleep(0.002)  # the key's repeat rate, not a wait for anything
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
