"""The tidy-notes example end to end: a fake OpenAI-compatible server plays a model that
lists, reads and greps the notes, then asks to write; the person allows the write at the
confirmation and ends the chat. The file is written inside the folder, and only there."""

from __future__ import annotations

import json
from pathlib import Path

from awf_nb.api import arun
from awf_nb.engine.events import AwaitingConfirmation, ToolCallFinished
from awf_nb.runs.replies import ScriptedReader
from tests.support.events import Collect
from tests.support.openai_server import OpenAIServer, Reply

EXAMPLE = Path(__file__).resolve().parents[2] / "workflows" / "tidy-notes.yaml"


def calls(*pairs: tuple[str, dict[str, str]]) -> Reply:
    return Reply.calls(
        *({"name": name, "arguments": json.dumps(arguments)} for name, arguments in pairs)
    )


async def test_the_tidy_notes_example_reads_and_writes_with_the_person_s_consent(tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("TODO water tomatoes\nTODO water tomatoes\n")
    (notes / "shop.md").write_text("milk\n")
    sink = Collect()
    with OpenAIServer() as server:
        server.script(
            calls(("Glob", {"pattern": "notes/*.md"}), ("Grep", {"pattern": "TODO"})),
            calls(("Read", {"path": "notes/garden.md"})),
            Reply.text("garden.md repeats a TODO. Shall I remove the copy?"),
            calls(("Write", {"path": "notes/garden.md", "content": "TODO water tomatoes\n"})),
            Reply.text("Done: the copy is gone."),
        )
        result = await arun(
            EXAMPLE,
            model=f"test-model@{server.base_url}",
            reader=ScriptedReader(["yes please", "y", ""]),  # a message, then Allow, then end
            sink=sink,
            cwd=tmp_path,
            storage=tmp_path / "runs",
        )
        bodies = [request.body for request in server.requests]
    assert result.ok, result.error
    assert (notes / "garden.md").read_text() == "TODO water tomatoes\n"
    assert [e.name for e in sink.of(AwaitingConfirmation)] == ["Write"]
    finished = {e.name: e for e in sink.of(ToolCallFinished)}
    assert "notes/garden.md" in finished["Glob"].result and "shop.md" in finished["Glob"].result
    assert finished["Grep"].result.count("TODO water tomatoes") == 2
    assert not finished["Write"].is_error and finished["Write"].outcome == ""
    # every request offers the four tools; the second carries the first round's results
    assert all(
        [t["function"]["name"] for t in body["tools"]] == ["Read", "Glob", "Grep", "Write"]
        for body in bodies
    )
    assert [m["role"] for m in bodies[1]["messages"]][-3:] == ["assistant", "tool", "tool"]
    assert result.state.message == "Tidied notes in 2 replies."
