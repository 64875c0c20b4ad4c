"""The haiku-judge example end to end: the writer (a scripted stand-in for the local model)
drafts, the example's own Python judge answers each draft, and the exchange stops on its
APPROVED."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from awf_nb.api import arun
from awf_nb.engine.ports import TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import with_providers

EXAMPLE = Path(__file__).resolve().parents[2] / "workflows" / "haiku-judge.yaml"
DRAFTS = [
    "Snow falls on the hill",
    "White hush on the hill\nthe first snow settles softly\non the sleeping pines",
]


class Writer(ScriptedProvider):
    """Replies with DRAFTS, whatever options the example gives the local model."""

    def stream(self, turn: TurnRequest):  # type: ignore[override]
        return super().stream(dataclasses.replace(turn, options={"replies": DRAFTS}))


async def test_the_judge_rejects_a_one_line_draft_and_approves_three_lines(tmp_path: Path):
    result = await arun(
        EXAMPLE, {"topic": "first snow"}, providers=with_providers(local=Writer),
        storage=tmp_path / "runs", cwd=tmp_path,
    )  # fmt: skip
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "condition" and conv.total_turns == 2
    judged = [t.content for t in conv.turns if t.speaker == "judge"]
    assert judged == ["That has 1 lines; a haiku has exactly three. Rewrite it.", "APPROVED"]
    assert result.message.startswith("Haiku (condition after 2 drafts):\nWhite hush")
    assert [(e.speaker, e.turn) for e in result.exchange] == [
        ("system", 0), ("user", 1), ("agent", 1), ("judge", 2), ("agent", 2), ("judge", 2),
    ]  # fmt: skip
