"""The writer-reviewer example end to end with scripted stand-ins for both sides: the
reviewer is sent each draft inside its prompt, a "Yes" ends the exchange, and the final
message says whether it was approved — or, after the last draft, the reviewer's last note."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

from awf_nb.api import arun
from awf_nb.engine.ports import TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import with_providers

EXAMPLE = Path(__file__).resolve().parents[2] / "workflows" / "writer-reviewer.yaml"


class BothSides(ScriptedProvider):
    """The writer's drafts and the reviewer's answers, whatever options the example sets."""

    DRAFTS: ClassVar[list[str]] = []
    REVIEWS: ClassVar[list[str]] = []
    sent_to_reviewer: ClassVar[list[str]] = []

    def stream(self, turn: TurnRequest):  # type: ignore[override]
        if turn.speaker == "reviewer":
            BothSides.sent_to_reviewer.append(turn.prompt)
            replies = self.REVIEWS
        else:
            replies = self.DRAFTS
        return super().stream(dataclasses.replace(turn, options={"replies": replies}))


async def exchange(tmp_path: Path, drafts: list[str], reviews: list[str]):
    BothSides.DRAFTS, BothSides.REVIEWS, BothSides.sent_to_reviewer = drafts, reviews, []
    return await arun(
        EXAMPLE, providers=with_providers(local=BothSides), storage=tmp_path, show=False
    )


async def test_a_yes_approves_and_the_message_says_at_which_draft(tmp_path: Path) -> None:
    result = await exchange(
        tmp_path, ["Rain.", "Autumn rain falls\non the quiet roof\nleaves drift down"],
        ["No. Use three lines.", "  Yes, a good haiku."],
    )  # fmt: skip
    assert result.ok, result.error
    assert result.message == (
        "Approved by the reviewer at draft 2:\nAutumn rain falls\non the quiet roof\nleaves drift down"
    )
    assert BothSides.sent_to_reviewer[0].startswith("Poem:\nRain.\n\nIs it a good haiku")


async def test_no_approval_gives_the_reviewer_s_last_note(tmp_path: Path) -> None:
    result = await exchange(
        tmp_path, ["one", "two", "three", "four"], ["No: longer.", "No: calmer.", "No: rain."]
    )
    assert result.ok, result.error
    assert result.message == (
        "Not approved after 4 drafts; the reviewer's last note: No: rain.\nLast draft:\nfour"
    )
