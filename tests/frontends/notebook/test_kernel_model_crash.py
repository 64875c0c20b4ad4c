"""A native crash of the bundled model during a `%%awf chat` reply never takes the Jupyter
kernel down: the run fails with the message, the person's variables are all still there,
and the next cell's chat works on a new model process (markers `kernel`, `real_model`; the
test venv's own kernel, where the bundled model is installed)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.support.kernels import kernel_session
from tests.support.processes import MODEL_CRASHED as CRASH
from tests.support.processes import crash_mid_reply, model_processes

pytestmark = [pytest.mark.kernel, pytest.mark.real_model, pytest.mark.slow]

CELL_SECONDS = 600.0


def words(html: str) -> str:
    """A bubble's text without its markup and placeholders (`…` while it waits)."""
    return re.sub(r"<[^>]*>|…", "", html).strip()


def test_a_crash_mid_reply_leaves_the_kernel_and_its_variables(tmp_path: Path) -> None:
    with kernel_session(Path(sys.executable), tmp_path) as kernel:
        setup = kernel.execute(
            "%load_ext awf_nb\nimport os\nkept = 41\nprint(os.getpid())", timeout=120
        )
        assert setup.status == "ok", setup.reply["content"]
        kernel_pid = int(setup.stdout.strip().splitlines()[-1])

        cell = kernel.submit(
            "%%awf chat --no-interactive --out talk\n"
            "Tell me a long story about a dragon who learns to cook.\n"
        )
        kernel.pump_until(
            lambda: any(len(words(text)) > 20 for text in kernel.texts("awf-assistant")),
            CELL_SECONDS,
            "the reply to start streaming",
        )
        [model] = model_processes(kernel_pid)
        crash_mid_reply(model)
        outcome = kernel.wait_for_cell(cell, CELL_SECONDS)
        # The cell waited for its run (--no-interactive) and reports the failure, in one line.
        assert outcome.status == "error", outcome.reply["content"]
        error = str(outcome.reply["content"].get("evalue"))
        assert CRASH in error and "continue it with %awf resume" in error, error

        check = kernel.execute(
            "import json\nprint(json.dumps([talk.state.status, kept + 1, os.getpid()]))",
            timeout=CELL_SECONDS,
        )
        assert check.status == "ok", check.reply["content"]
        status, value, pid = json.loads(check.stdout.strip().splitlines()[-1])
        assert (status, value, pid) == ("failed", 42, kernel_pid)  # the same kernel, alive

        again = kernel.execute(
            "%%awf chat --no-interactive --out again\nSay hi.\n", timeout=CELL_SECONDS
        )
        assert again.status == "ok", again.reply["content"]
        done = kernel.execute(
            "_a = await again\nprint(json.dumps([_a.status, _a.outputs['chat']]))",
            timeout=CELL_SECONDS,
        )
        status, reply = json.loads(done.stdout.strip().splitlines()[-1])
        assert status == "completed" and reply.strip()
        assert model_processes(kernel_pid) not in ([], [model])  # a new model process


def test_awf_doctor_in_a_cell_checks_the_model_from_the_kernel(tmp_path: Path) -> None:
    with kernel_session(Path(sys.executable), tmp_path) as kernel:
        assert kernel.execute("%load_ext awf_nb", timeout=120).status == "ok"
        doctor = kernel.execute("%awf doctor", timeout=CELL_SECONDS)
        assert doctor.status == "ok", doctor.reply["content"]
        assert "ok    bundled model: loaded and replied in " in doctor.stdout
        assert "ok    store: " in doctor.stdout
        assert kernel.execute("print('alive')", timeout=60).stdout.strip() == "alive"
