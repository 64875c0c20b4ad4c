"""`%%awf chat` in real kernels: the body is the first message, the panel's text box takes
the next ones (ipykernel 6.29 and 7.4, as test_kernel_runs.py drives them); and on the
bundled model itself, in the test venv's own kernel, as the examples run."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.kernels import KernelSession

pytestmark = pytest.mark.kernel

CELL_SECONDS = 60.0
STEP_SECONDS = 30.0


def test_a_chat_cell_opens_a_conversation_in_the_panel(
    awf_kernel: KernelSession, kernel_python: Any
) -> None:
    cell = awf_kernel.submit(
        "%%awf chat --provider scripted --system 'Echo me.' --out talk\n"
        "How do Go channels differ from queues?\n"
    )

    # The scripted provider echoes the message it gets: the first reply is the cell's body.
    awf_kernel.wait_for_text("awf-assistant", "differ from queues", STEP_SECONDS)
    awf_kernel.wait_for_input_box(STEP_SECONDS)
    awf_kernel.send_message("And buffered ones?")
    awf_kernel.wait_for_text("awf-assistant", "And buffered ones?", STEP_SECONDS)
    awf_kernel.wait_for_input_box(STEP_SECONDS)
    awf_kernel.press("end")
    outcome = awf_kernel.wait_for_cell(cell, CELL_SECONDS)
    assert outcome.status == "ok", outcome.reply["content"]

    check = awf_kernel.execute(
        "import json\n"
        "_r = await talk\n"
        "print(json.dumps([_r.status, _r.state.workflow_name,"
        " [[t.role, t.content] for t in _r.steps['chat'].conversation.turns]]))",
        timeout=CELL_SECONDS,
    )
    assert check.status == "ok", check.reply["content"]
    status, name, turns = json.loads(check.stdout.strip().splitlines()[-1])
    assert (status, name) == ("completed", "chat")
    assert turns == [
        ["system", "Echo me."],
        ["user", "How do Go channels differ from queues?"],
        ["assistant", "How do Go channels differ from queues?"],
        ["user", "And buffered ones?"],
        ["assistant", "And buffered ones?"],
    ]


@pytest.mark.real_model
def test_a_chat_cell_runs_on_the_bundled_model(tmp_path: Path, monkeypatch) -> None:
    """No provider, no model named: the bundled model answers, as in the examples."""
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "storage"))
    monkeypatch.delenv("AWF_MODEL", raising=False)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext awf_nb"),
        nbformat.v4.new_code_cell("%%awf chat --no-interactive --out talk\nSay hello.\n"),
        nbformat.v4.new_code_cell(
            "_r = await talk\n"
            "print(_r.status, talk.prepared.workflow.steps['chat'].provider)\n"
            "print(repr(_r.outputs['chat']))"
        ),
    ]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()

    status_line, reply = notebook.cells[2].outputs[0]["text"].splitlines()[:2]
    assert status_line == "completed local"
    assert len(ast.literal_eval(reply).strip()) > 0  # the model's reply, whatever it says
    static = [o for o in notebook.cells[1].outputs if "text/plain" in o.get("data", {})][-1]
    assert "prompt: Say hello." in static["data"]["text/plain"]
