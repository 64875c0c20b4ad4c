"""The pairwise judge of an eval with variants, against a real OpenAI-compatible server
playing the judge: both position orders asked, a win only when they agree, ties and
unreadable answers counted as such, the outcome compared over cases with known figures,
kept in the eval's folder (resume judges only what is left), recorded and replayed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from awf_nb.cli import main
from tests.support.eval_project import Project
from tests.support.openai_server import OpenAIServer, Reply

# One reply per conversation; the variants differ in what the agent says.
WORKFLOW = """\
name: helper
inputs: [{name: topic, required: true}]
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Help me with {{.inputs.topic}}"
    options: {replies: ["a curt answer"]}
    on_success: done
  done: {type: terminal}
"""

EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
variants:
  curt: {}
  kind:
    set: {states.chat.options.replies: ["a kind and complete answer"]}
pairwise:
  provider: openai_compatible
  options: {base_url: "URL", model: judge}
  retries: 1
scorers:
  - name: done
    condition: 'status == "completed"'
"""


def judge(body: dict[str, Any]) -> Reply:
    """Prefers the kind conversation, wherever it is shown; for a topic containing
    "biased" it always says A (position bias: the two orders disagree, a tie); for
    "confused" it never gives a verdict."""
    text = json.dumps(body["messages"])
    if "confused" in text:
        return Reply.text("Both are interesting in their own ways.")
    if "biased" in text:
        return Reply.text("The first one.\nWINNER: A")
    a = re.search(r"Conversation A:(.*)Conversation B:", text, re.S)
    assert a is not None
    return Reply.text("WINNER: A" if "kind and complete" in a.group(1) else "Reasons.\nWINNER: B")


@pytest.fixture
def server(project: Project) -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        server.responder = judge
        project.write("wf.yaml", WORKFLOW)
        topics = [f"topic {n}" for n in range(10)] + [f"biased {n}" for n in range(4)]
        rows = [{"id": f"c{n:02}", "topic": t, "replies": ["exit"]} for n, t in enumerate(topics)]
        project.rows("cases.jsonl", rows)
        project.write_eval(EVAL.replace("URL", server.base_url))
        yield server


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_wins_count_only_when_both_orders_agree(
    project: Project, server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = ["--storage", str(project.store.root)]
    code, out, err = run(capsys, "eval", "t.eval.yaml", "--json", *storage)
    assert code == 0, err
    data = json.loads(out)
    # 14 pairs, each asked twice, the positions swapped
    prompts = [json.dumps(r.body["messages"]) for r in server.requests]
    assert len(prompts) == 28
    first = [p for p in prompts if p.index("a curt answer") < p.index("kind and complete")]
    assert len(first) == 14  # once with A = curt (the baseline) first, once the other way
    (comparison,) = data["comparisons"]
    pairwise = next(s for s in comparison["scorers"] if s["scorer"] == "pairwise")
    assert (pairwise["better"], pairwise["worse"], pairwise["cases"]) == (10, 0, 14)
    assert pairwise["p_value"] == pytest.approx(2 * 0.5**10)
    assert pairwise["difference"] == pytest.approx(10 / 14)
    assert pairwise["verdict"] == "better"
    assert [f["case"] for f in pairwise["flips"]] == [f"c{n:02}" for n in range(10)]
    code, out, _ = run(capsys, "eval-show", data["eval_id"], *storage)
    assert "pairwise (wins - losses): +0.71" in out and "cases won 10, lost 0, tied 4" in out
    # each pair is a line of the eval's folder, both picks kept
    folder = project.store.root / "evals" / data["eval_id"] / "pairwise.jsonl"
    lines = [json.loads(line) for line in folder.read_text().splitlines()]
    biased = next(line for line in lines if line["case"] == "c12")
    assert (biased["first"], biased["second"], biased["outcome"]) == ("A", "B", "tie")
    won = next(line for line in lines if line["case"] == "c03")
    assert (won["first"], won["second"], won["outcome"]) == ("B", "B", "win")


def test_an_unreadable_judge_is_asked_again_then_an_error_not_a_tie(
    project: Project, server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project.rows(
        "cases.jsonl",
        [{"id": "ok", "topic": "topic", "replies": ["exit"]},
         {"id": "lost", "topic": "confused", "replies": ["exit"]}],
    )  # fmt: skip
    storage = ["--storage", str(project.store.root)]
    _code, out, _ = run(capsys, "eval", "t.eval.yaml", "--json", *storage)
    data = json.loads(out)
    lines = (project.store.root / "evals" / data["eval_id"] / "pairwise.jsonl").read_text()
    found = {json.loads(line)["case"]: json.loads(line) for line in lines.splitlines()}
    assert found["ok"]["outcome"] == "win"
    assert found["lost"]["outcome"] == "error" and found["lost"]["retries"] == 1
    assert (
        "holds no WINNER: A, WINNER: B or WINNER: TIE line (asked 2 times)"
        in (found["lost"]["error"])
    )
    pairwise = next(s for s in data["comparisons"][0]["scorers"] if s["scorer"] == "pairwise")
    assert pairwise["cases"] == 1  # the error is left out, not counted as a tie


def test_resume_judges_only_the_pairs_left_and_cassettes_replay_them(
    project: Project, server: OpenAIServer, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    storage = ["--storage", str(project.store.root)]
    tapes = tmp_path / "tapes"
    code, out, _ = run(capsys, "eval", "t.eval.yaml", "--record", str(tapes), "--seed", "2",
                       "--json", *storage)  # fmt: skip
    recorded = json.loads(out)
    assert len(list((tapes / "pairwise" / "kind").iterdir())) == 14
    # an eval interrupted while judging: 4 of its pairs are lost, then resumed
    folder = project.store.root / "evals" / recorded["eval_id"]
    lines = (folder / "pairwise.jsonl").read_text().splitlines()
    (folder / "pairwise.jsonl").write_text("\n".join(lines[:10]) + "\n")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["status"] = "cancelled"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    asked = len(server.requests)
    code, out, err = run(capsys, "eval", "--resume", recorded["eval_id"], "--json", *storage)
    assert code == 0, err
    assert len(server.requests) - asked == 8  # 4 pairs, both orders
    resumed = json.loads(out)
    assert resumed["comparisons"] == recorded["comparisons"]
    # replayed: the same pairs, no judge asked
    asked = len(server.requests)
    _code, out, _ = run(capsys, "eval", "t.eval.yaml", "--replay", str(tapes), "--seed", "2",
                       "--json", *storage)  # fmt: skip
    assert len(server.requests) == asked
    replayed = json.loads(out)
    pairwise = [s for s in replayed["comparisons"][0]["scorers"] if s["scorer"] == "pairwise"]
    assert pairwise[0]["better"] == 10 and pairwise[0]["cases"] == 14


def test_a_pairwise_judge_needs_two_variants(project: Project, server: OpenAIServer) -> None:
    from awf_nb.errors import DefinitionError
    from awf_nb.evals.loader import load_eval

    text = (project.root / "t.eval.yaml").read_text()
    project.write_eval(
        re.sub(r"variants:\n(  .*\n)+", "", text, count=1).replace(
            '    set: {states.chat.options.replies: ["a kind and complete answer"]}\n', ""
        )
    )
    with pytest.raises(DefinitionError, match="a pairwise judge compares variants"):
        load_eval("t.eval.yaml")
