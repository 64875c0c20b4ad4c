"""An exchange between two agents on the bundled local model (marker `real_model`): the
example workflow, both sides on SmolLM2, three drafts."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.api import arun, load
from awf_nb.engine.events import TurnFinished
from tests.support.events import Collect

pytestmark = pytest.mark.real_model

EXAMPLE = Path(__file__).resolve().parents[2] / "workflows" / "writer-reviewer.yaml"


async def test_the_local_model_on_both_sides_for_three_turns(tmp_path: Path):
    text = EXAMPLE.read_text()
    assert """until: 'lower(trim(message)) startsWith "yes"'""" in text
    text = text.replace("max_turns: 4", "max_turns: 3").replace(
        """until: 'lower(trim(message)) startsWith "yes"'""", "until: 'message == \"never\"'"
    )
    sink = Collect()
    result = await arun(load(text, cwd=tmp_path), storage=tmp_path, sink=sink)
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "max_turns" and conv.total_turns == 3
    assert conv.partner_turns == 2
    speakers = [(e.speaker, e.turn) for e in sink.of(TurnFinished)]
    assert speakers == [("", 1), ("reviewer", 1), ("", 2), ("reviewer", 2), ("", 3)]
    said = [t for t in conv.turns if t.role != "system"]
    assert [t.speaker for t in said if t.role == "user"] == ["", "reviewer", "reviewer"]
    assert all(t.content.strip() for t in said)
    assert result.outputs["draft"] == said[-1].content
    assert result.state.message.startswith("Not approved after 3 drafts; the reviewer's last note:")


CHAT = Path(__file__).resolve().parents[2] / "workflows" / "chat.yaml"


async def test_the_local_model_plays_the_user_of_chat_yaml_until_max_turns(tmp_path: Path):
    import awf_nb

    user = awf_nb.SimulatedUser(
        persona="You are planning a small vegetable garden. Answer questions in one sentence.",
        provider="local",
        options={"max_tokens": 30},
        max_turns=2,
    )
    result = await arun(CHAT, storage=tmp_path, user=user, show=False)
    assert result.ok, result.error
    conv = result.steps["clarify"].conversation
    assert conv.stopped_by == "max_turns" and conv.total_turns == 2
    simulated = [t for t in conv.turns if t.speaker == "user (simulated)"]
    assert len(simulated) == 1 and simulated[0].content.strip()
    assert simulated[0].tokens > 0  # a real model's reply, with its own usage


async def test_a_scripted_persona_ends_chat_yaml_with_exit(tmp_path: Path):
    import awf_nb

    user = awf_nb.SimulatedUser(
        persona="Says one thing, then exit.",
        provider="scripted",
        options={"replies": ["About twenty guests.", "exit"]},
    )
    result = await arun(CHAT, storage=tmp_path, user=user, show=False)
    assert result.ok, result.error
    conv = result.steps["clarify"].conversation
    assert conv.stopped_by == "user_exit" and conv.total_turns == 2
    assert "Turns: 2" in result.state.message
