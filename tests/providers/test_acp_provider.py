"""`provider: acp` against real ACP agents: one built on the SDK (tests/support/acp_agent.py)
and awf's own `awf acp` (awf driving awf)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import awf_nb
from tests.support.acp_peers import ROOT
from tests.support.processes import process_alive

AGENT = [sys.executable, str(ROOT / "tests" / "support" / "acp_agent.py")]


@pytest.fixture(autouse=True)
def agent_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACP_TEST_STATE", str(tmp_path / "agent-state.json"))
    monkeypatch.setenv("ACP_TEST_PID_DIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return tmp_path


def _workflow(tmp_path: Path, steps: str, name: str = "wf") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nstates:\n{steps}\n  done:\n    type: terminal\n")
    return path


def _step(name: str, prompt: str, after: str, command: list[str], extra: str = "") -> str:
    return (
        f"  {name}:\n    type: agent\n    provider: acp\n"
        f"    options: {{command: {json.dumps(command)}}}\n"
        f"    prompt: {json.dumps(prompt)}\n{extra}    on_success: {after}\n"
    )


async def _run(tmp_path: Path, path: Path, **options: object) -> awf_nb.RunResult:
    return await awf_nb.arun(path, show=False, storage=tmp_path / "store", cwd=tmp_path, **options)


async def test_single_turn_streams_the_agents_reply(tmp_path: Path) -> None:
    steps = "  initial: ask\n" + _step("ask", "hello", "done", AGENT)
    result = await _run(tmp_path, _workflow(tmp_path, steps))
    assert result.status == "completed", result.state.error
    assert result.outputs["ask"] == "echo: hello (turn 1)"
    assert result.tokens == 7
    pids = [int(p.stem.split("-")[1]) for p in tmp_path.glob("agent-*.pid")]
    assert pids and not any(process_alive(pid) for pid in pids)  # the agent was stopped


async def test_conversation_keeps_one_session(tmp_path: Path) -> None:
    steps = "  initial: talk\n" + _step("talk", "first", "done", AGENT, "    mode: conversation\n")
    result = await _run(tmp_path, _workflow(tmp_path, steps), replies=["second", "third"])
    assert result.status == "completed", result.state.error
    assert result.outputs["talk"] == "echo: third (turn 3)"


@pytest.mark.parametrize(("load", "expected"), [(True, "(turn 2)"), (False, "so far")])
async def test_continue_from_loads_the_session_or_replays(
    tmp_path: Path, load: bool, expected: str
) -> None:
    command = AGENT if load else [*AGENT, "--no-load"]
    steps = (
        "  initial: seed\n"
        + _step("seed", "the word is marmalade", "recall", command, "    conversation: {}\n")
        + _step(
            "recall",
            "what was the word?",
            "done",
            command,
            "    conversation: {continue_from: seed}\n",
        )
    )
    result = await _run(tmp_path, _workflow(tmp_path, steps))
    assert result.status == "completed", result.state.error
    assert expected in result.outputs["recall"]
    if not load:
        assert "marmalade" in result.outputs["recall"]  # the earlier turn was replayed


async def test_permission_follows_the_confirm_policy(tmp_path: Path) -> None:
    steps = "  initial: w\n" + _step("w", "write marker.txt written", "done", AGENT)
    path = _workflow(tmp_path, steps)
    refused = await _run(tmp_path, path)  # nobody to ask, no --yes: refused
    assert refused.outputs["w"] == "not allowed"
    assert not (tmp_path / "marker.txt").exists()
    allowed = await _run(tmp_path, path, yes=True)
    assert allowed.outputs["w"] == "wrote marker.txt"
    assert (tmp_path / "marker.txt").read_text() == "written"


async def test_file_access_is_confined_to_the_workspace(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("buy milk")
    (tmp_path / "secret.txt").write_text("outside")
    steps = (
        "  initial: r\n"
        + _step("r", "read notes.txt", "out", AGENT)
        + _step("out", "read ../secret.txt", "w", AGENT)
        + _step("w", "write ../escaped.txt x", "done", AGENT)
    )
    result = await awf_nb.arun(
        _workflow(tmp_path, steps), show=False, storage=tmp_path / "store", cwd=work, yes=True
    )
    assert result.outputs["r"] == "read: buy milk"
    assert "outside the working directory" in result.outputs["out"]
    assert "outside the working directory" in result.outputs["w"]
    assert not (tmp_path / "escaped.txt").exists()


async def test_awf_drives_awf_acp(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "echo.yaml").write_text(
        "name: echo\ninputs:\n  - {name: topic, required: true}\nstates:\n  initial: say\n"
        "  say:\n    type: agent\n    provider: scripted\n    prompt: 'About {{.inputs.topic}}'\n"
        "    on_success: done\n  done:\n    type: terminal\n"
    )
    command = [
        sys.executable,
        "-m",
        "awf_nb.cli",
        "acp",
        "--workflows",
        str(served),
        "--storage",
        str(tmp_path / "inner-store"),
    ]
    steps = "  initial: ask\n" + _step("ask", "/echo topic=bread", "done", command)
    result = await _run(tmp_path, _workflow(tmp_path, steps), env={**os.environ})
    assert result.status == "completed", result.state.error
    assert result.outputs["ask"] == "About bread"
    assert list((tmp_path / "inner-store" / "runs").iterdir())  # the inner run is stored


async def test_a_missing_agent_program_is_a_clear_error(tmp_path: Path) -> None:
    steps = "  initial: ask\n" + _step("ask", "hi", "done", ["/nonexistent/acp-agent"])
    result = await _run(tmp_path, _workflow(tmp_path, steps))
    assert result.status == "failed"
    assert "cannot start /nonexistent/acp-agent" in result.state.error


class _Person:
    """A person at the keyboard: allows what is asked, and remembers the question."""

    def __init__(self) -> None:
        self.questions: list[str] = []

    async def read(self, prompt: str) -> str | None:
        return None

    async def confirm(self, question: str) -> bool | None:
        self.questions.append(question)
        return True


async def test_permission_is_asked_of_the_person(tmp_path: Path) -> None:
    steps = "  initial: w\n" + _step("w", "write marker.txt written", "done", AGENT)
    person = _Person()
    result = await _run(tmp_path, _workflow(tmp_path, steps), reader=person)
    assert result.outputs["w"] == "wrote marker.txt"
    assert person.questions == ['Allow Write({"path": "marker.txt"})?']
