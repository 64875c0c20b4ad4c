"""One way to start a run: `awf_nb.runs.prepare_run(workflow | Resume, RunOptions)`.

The three entry points (`awf run`, `%%awf`, `awf_nb.arun`) prepare their runs through it;
nothing else makes a `RunConfig`, and a run's configuration cannot change once built. Runs
prepared side by side on one event loop (what an evaluation does) each keep their own
sink, replies, simulated user, cassette and limits, and touch nothing process-wide.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

import awf_nb
from awf_nb.engine import events as ev
from awf_nb.engine.partner import SimulatedUser
from awf_nb.errors import UserError
from awf_nb.frontends.cli import main
from awf_nb.runs import Resume, RunOptions, prepare_run, setup
from awf_nb.store import Store
from tests.support.events import Collect

ROOT = Path(__file__).resolve().parents[2]

CHAT = """\
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Hello"
    options:
      replies: ["one", "two", "three", "four", "five", "six"]
    on_success: done
  done: {type: terminal, message: "{{.states.talk.Conversation.TotalTurns}} replies"}
"""


@pytest.fixture
def prepared_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every run prepared while the test runs, through `setup.prepare_run`."""
    seen: list[Any] = []
    real = setup.prepare_run

    def spy(*args: Any, **kwargs: Any) -> setup.PreparedRun:
        prepared = real(*args, **kwargs)
        seen.append(prepared)
        return prepared

    monkeypatch.setattr(setup, "prepare_run", spy)
    return seen


def test_the_cli_the_magic_and_the_api_prepare_their_runs_in_one_place(
    prepared_runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "storage"))
    (tmp_path / "chat.yaml").write_text(CHAT)

    assert main(["run", "chat.yaml", "--reply", "hi", "--reply", "", "--output", "silent"]) == 0
    assert awf_nb.run("chat.yaml", replies=["hi", ""], show=False).ok
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("awf_nb")
    outcome = shell.run_cell("%%awf --out chat --reply hi --reply ''\n" + CHAT)
    assert outcome.success, outcome.error_in_exec
    assert shell.user_ns["chat"].result().ok
    run_id = prepared_runs[0].run_id
    assert main(["resume", run_id, "--from", "talk", "--reply", "", "--output", "silent"]) == 0

    assert len(prepared_runs) == 4
    assert [p.state.status for p in prepared_runs] == ["completed"] * 4
    assert prepared_runs[-1].run_id == run_id  # the resumed run


def test_an_eval_prepares_each_of_its_runs_there_too(
    prepared_runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`awf eval` and `awf_nb.evaluate`: each (case, epoch) is a run prepared by the same
    set-up, with the case's replies as the person's side."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "storage"))
    (tmp_path / "chat.yaml").write_text(CHAT)
    (tmp_path / "cases.jsonl").write_text(
        '{"id": "a", "replies": ["hi", ""]}\n{"id": "b", "replies": ["hello", "more", ""]}\n'
    )
    (tmp_path / "e.eval.yaml").write_text(
        "workflow: chat.yaml\ndataset: cases.jsonl\nepochs: 2\n"
        "scorers: [{name: ended, condition: 'status == \"completed\"'}]\n"
    )

    assert main(["eval", "e.eval.yaml", "--json"]) == 0
    assert awf_nb.evaluate("e.eval.yaml", epochs=1).summary.scorers["ended"].pass_rate == 1.0

    assert len(prepared_runs) == 6
    assert [p.state.status for p in prepared_runs] == ["completed"] * 6
    turns = sorted(p.state.steps["talk"].conversation.total_turns for p in prepared_runs)
    assert turns == [2, 2, 2, 3, 3, 3]


def test_only_the_set_up_makes_a_run_configuration() -> None:
    """`RunConfig(` is written in one place; a called workflow's is a copy (`replace`)."""
    makers = []
    for path in sorted((ROOT / "awf_nb").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bRunConfig\(", line) and not line.lstrip().startswith("class "):
                makers.append(f"{path.relative_to(ROOT)}:{number}")
    assert [m.split(":")[0] for m in makers] == ["awf_nb/runs/setup.py"], makers


def test_a_run_s_configuration_cannot_change_once_built(tmp_path: Path) -> None:
    prepared = prepare_run(CHAT, storage=False, cwd=tmp_path, replies=["hi"])
    config = prepared.runner.config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.reader = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.runner.config.sink = Collect()  # type: ignore[misc]


def test_options_are_checked_when_they_are_made(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with pytest.raises(UserError, match="record and replay cannot be used together"):
        RunOptions(record=cassette, replay=cassette)
    with pytest.raises(UserError, match="replay and record_missing cannot be used together"):
        RunOptions(replay=cassette, record_missing=cassette)
    with pytest.raises(UserError, match="limits: max_tokens: Input should be greater than"):
        RunOptions(limits={"max_tokens": 0})
    with pytest.raises(UserError, match="replies must be a list of messages"):
        RunOptions(replies="hi")
    replies = ["a"]
    options = RunOptions(replies=replies, limits={"timeout": "5m"})
    replies.append("b")  # the caller's list is theirs: the options keep what they were given
    assert options.replies == ("a",)
    assert options.limits.timeout == 300  # type: ignore[union-attr]


async def test_runs_side_by_side_on_one_loop_keep_their_own_everything(tmp_path: Path) -> None:
    """What an evaluation does: many runs prepared at once, each with its own sink,
    replies (or simulated user), limits and store, on the running loop."""
    store = Store(tmp_path / "storage")
    handlers_before = list(logging.getLogger("awf_nb").handlers)
    sigint_before = signal.getsignal(signal.SIGINT)
    runs = []
    for number in range(12):
        sink = Collect()
        options = RunOptions(
            storage=store,
            cwd=tmp_path,
            sink=sink,
            limits={"max_agent_turns": 2} if number % 3 == 0 else None,
            user=SimulatedUser("a tester", provider="scripted",
                               options={"replies": [f"sim {number}", "exit"]})
            if number % 3 == 1 else None,
            replies=[f"person {number}", ""] if number % 3 == 2 else ["x", "y", "z", ""],
        )  # fmt: skip
        runs.append((number, sink, prepare_run(CHAT, options)))
    results = await asyncio.gather(*(prepared.run() for _, _, prepared in runs))

    assert len({r.run_id for r in results}) == 12
    for (number, sink, prepared), result in zip(runs, results, strict=True):
        assert {e.run_id for e in sink.events} == {prepared.run_id}, "another run's events"
        said = [e.text for e in sink.of(ev.UserMessage)]
        if number % 3 == 0:  # its own limit: two agent turns, on top of the workflow's none
            assert result.status == "failed" and "limits.max_agent_turns (2)" in result.error
        elif number % 3 == 1:  # its simulated user's messages stream, as a partner's do
            simulated = [e.text for e in sink.of(ev.TurnFinished) if e.speaker]
            assert result.ok and simulated == [f"sim {number}", "exit"]
        else:
            assert result.ok and said == ["Hello", f"person {number}"]
        assert store.load_state(prepared.run_id).status == result.status
    assert logging.getLogger("awf_nb").handlers == handlers_before
    assert signal.getsignal(signal.SIGINT) == sigint_before


async def test_record_missing_records_a_missing_cassette_then_replays_it(tmp_path: Path) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"

    def no_provider(name: str) -> Any:
        raise AssertionError(f"a replay must not make provider {name}")

    first = prepare_run(
        CHAT, storage=False, cwd=tmp_path, record_missing=cassette, replies=["hi there", ""]
    )
    recorded = await first.run()
    assert recorded.ok and cassette.exists()
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [line["text"] for line in lines if line["type"] == "input"] == ["hi there", ""]

    sink = Collect()
    again = prepare_run(
        CHAT, storage=False, cwd=tmp_path, record_missing=cassette, providers=no_provider, sink=sink
    )
    replayed = await again.run()
    assert replayed.ok, replayed.error
    assert replayed.steps["talk"].output == recorded.steps["talk"].output
    assert [e.text for e in sink.of(ev.UserMessage)] == ["Hello", "hi there"]


async def test_a_resume_is_prepared_like_a_new_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "storage")
    first = await prepare_run(CHAT, storage=store, cwd=tmp_path, replies=["a", ""]).run()
    again = prepare_run(Resume(first.run_id, from_step="talk"), storage=store, replies=["b", ""])
    result = await again.run()
    assert result.run_id == first.run_id and result.ok
    with pytest.raises(UserError, match="already completed; use --from STEP"):
        prepare_run(Resume(first.run_id), storage=store)
    with pytest.raises(UserError, match="can only be resumed from its storage"):
        prepare_run(Resume(first.run_id), storage=False)
