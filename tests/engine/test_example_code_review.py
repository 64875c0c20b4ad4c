"""The code-review example end to end with a scripted stand-in for the model: its lint
step's real ruff, the JSON verdict, the transitions and the messages a person reads —
including the one that used to end in "did not produce JSON:" and nothing after it."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import ClassVar

from awf_nb.api import arun
from awf_nb.engine.events import StepStarted
from awf_nb.engine.ports import TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import Collect, with_providers

EXAMPLE = Path(__file__).resolve().parents[2] / "workflows" / "code-review.yaml"
ENV = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


class Reviewer(ScriptedProvider):
    """Answers with `REPLIES`, whatever options the example gives the local model; keeps
    the prompts it was sent."""

    REPLIES: ClassVar[list[str]] = []
    prompts: ClassVar[list[str]] = []

    def stream(self, turn: TurnRequest):  # type: ignore[override]
        Reviewer.prompts.append(turn.prompt)
        return super().stream(dataclasses.replace(turn, options={"replies": self.REPLIES}))


async def review(tmp_path: Path, source: str, *replies: str, sink: Collect | None = None):
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(source)
    Reviewer.REPLIES, Reviewer.prompts = list(replies), []
    return await arun(
        EXAMPLE, {"target": "."}, providers=with_providers(local=Reviewer), cwd=project,
        env=ENV, storage=tmp_path / "runs", sink=sink,
    )  # fmt: skip


async def test_clean_code_and_an_approving_review_end_approved(tmp_path: Path) -> None:
    sink = Collect()
    verdict = '{"approved": true, "summary": "No problems."}'
    result = await review(tmp_path, "x = 1\n", verdict, sink=sink)
    assert result.ok, result.error
    assert result.message == "Approved: No problems."
    assert "All checks passed!" in Reviewer.prompts[0]
    assert [e.detail for e in sink.of(StepStarted) if e.step == "review"] == ["local"]


async def test_a_reply_that_is_not_json_says_why(tmp_path: Path) -> None:
    result = await review(tmp_path, "x = 1\n", "Looks fine to me!", "Still fine!")  # 2 tries
    assert result.status == "failed"
    assert result.error.startswith("the review failed: ")
    assert "output_format is json but the reply is not valid JSON" in result.error


async def test_the_agent_s_approval_alone_does_not_approve_flagged_code(tmp_path: Path) -> None:
    verdict = '{"approved": true, "summary": "All good."}'
    # a bare `except` stays after the automatic fix round
    source = "import os\n\ntry:\n    pass\nexcept:\n    pass\n"
    result = await review(tmp_path, source, verdict, verdict)
    assert result.status == "failed"
    assert result.error == "Not approved after an automatic fix round: All good."
    assert "E722" in Reviewer.prompts[-1] and "F401" not in Reviewer.prompts[-1]


async def test_a_long_report_is_cut_so_the_prompt_fits_a_small_window(tmp_path: Path) -> None:
    source = "".join(f"import module_{n}\n" for n in range(200))
    verdict = '{"approved": false, "summary": "Unused imports."}'
    result = await review(tmp_path, source, verdict, verdict)
    assert result.steps["lint"].output.count("\n") <= 29
    assert len(Reviewer.prompts[0]) < 4000  # well inside SmolLM2's 2048-token window
