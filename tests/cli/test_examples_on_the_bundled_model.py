"""Every example workflow in workflows/, run as a new user runs it — `awf run FILE` in a
terminal-less process on the default (bundled) model — finishes its job, or says at once
what it needs instead (marker `real_model`).

- chat.yaml asks one short question first; --simulate-user answers like the person;
- writer-reviewer.yaml ends approved, or says why not (the reviewer's last note);
- haiku-judge.yaml ends when its script approves three lines, or after its drafts;
- code-review.yaml gives its JSON verdict (or a clear error), never approving code the
  linter flags;
- session-demo.yaml and parallel-foreach.yaml run to the end;
- tidy-notes.yaml (needs a model that calls tools) and pair-review.yaml (needs agent CLIs)
  stop before doing anything, saying what they need.

Each run is a fresh process, so the first reply also shows the model being loaded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from awf_nb.engine.state import RunState
from awf_nb.store import Store
from tests.support.cli import run_awf

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "workflows"
RUN_TIMEOUT = 900  # seconds: a shared, busy CI machine generates a few tokens per second
COVERED = {
    "chat.yaml", "writer-reviewer.yaml", "code-review.yaml", "session-demo.yaml",
    "parallel-foreach.yaml", "tidy-notes.yaml", "pair-review.yaml", "haiku-judge.yaml",
}  # fmt: skip
# What an assistant says and a person asking for help does not.
ASSISTANT_VOICE = re.compile(
    r"how can i (help|assist)|i'?d be (happy|glad) to|let me know if|is there anything else|"
    r"feel free to|as an ai",
    re.IGNORECASE,
)


def awf(tmp_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`awf …` as a person runs it, minus a terminal: its own process, no agent CLIs on
    PATH, ruff from this environment, no model switch, runs stored under tmp_path."""
    unset: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("AWF_", "OPENAI_"))
    }
    env = {
        **unset,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "AWF_STORAGE": str(tmp_path / "runs"),
    }
    return run_awf(*args, cwd=cwd or ROOT, env=env, timeout=RUN_TIMEOUT)


def last_run(tmp_path: Path) -> RunState:
    store = Store(tmp_path / "runs")
    [entry] = store.history(limit=1)
    return store.load_state(entry.run_id)


def test_every_example_is_covered_here() -> None:
    assert {path.name for path in EXAMPLES.glob("*.yaml")} == COVERED


def test_chat_asks_one_short_question_first(tmp_path: Path) -> None:
    done = awf(tmp_path, "run", "workflows/chat.yaml", "--reply", "")
    assert done.returncode == 0, done.stderr
    assert "loading model SmolLM2-135M-Instruct.Q4_1.gguf…" in done.stderr
    assert "(model ready in " in done.stderr
    conv = last_run(tmp_path).steps["clarify"].conversation
    assert conv is not None
    [first] = [t.content for t in conv.turns if t.role == "assistant"]
    assert first.count("?") == 1, first
    assert len(first.split()) <= 40, first
    assert first.strip() in done.stdout


def test_chat_on_the_issue_s_topic_asks_one_question(tmp_path: Path) -> None:
    topic = "topic=a birthday party for a 6-year-old"
    done = awf(tmp_path, "run", "workflows/chat.yaml", "-i", topic, "--reply", "")
    assert done.returncode == 0, done.stderr
    conv = last_run(tmp_path).steps["clarify"].conversation
    assert conv is not None
    [first] = [t.content for t in conv.turns if t.role == "assistant"]
    assert first.count("?") == 1, first
    assert not re.search(r"i'?m sorry|can'?t assist", first, re.IGNORECASE), first


def test_the_simulated_user_answers_like_the_person(tmp_path: Path) -> None:
    done = awf(
        tmp_path, "run", "workflows/chat.yaml", "-i", "topic=learning to bake bread",
        "--simulate-user", "A beginner baker; says exit when done", "--max-turns", "3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    conv = last_run(tmp_path).steps["clarify"].conversation
    assert conv is not None
    said = [t.content for t in conv.turns if t.speaker == "user (simulated)"]
    assert said, "the simulated user said nothing"
    for message in said:
        assert not ASSISTANT_VOICE.search(message), message
        assert len(message.split()) <= 60, message


def test_writer_reviewer_ends_approved_or_says_why_not(tmp_path: Path) -> None:
    done = awf(tmp_path, "run", "workflows/writer-reviewer.yaml")
    assert done.returncode == 0, done.stderr
    state = last_run(tmp_path)
    conv = state.steps["draft"].conversation
    assert conv is not None and conv.stopped_by in ("condition", "max_turns")
    if conv.stopped_by == "condition":
        assert state.message.startswith("Approved by the reviewer at draft ")
    else:
        note = state.message.split("the reviewer's last note: ", 1)
        assert state.message.startswith(f"Not approved after {conv.total_turns} drafts")
        assert len(note) == 2 and note[1].split("\nLast draft:")[0].strip()
    assert state.steps["draft"].output.strip() in state.message
    reviews = [t.content for t in conv.turns if t.speaker == "reviewer"]
    assert reviews and all(r.strip() for r in reviews)


def test_haiku_judge_ends_on_the_script_s_verdict_or_after_its_drafts(tmp_path: Path) -> None:
    done = awf(tmp_path, "run", "workflows/haiku-judge.yaml")
    assert done.returncode == 0, done.stderr
    state = last_run(tmp_path)
    conv = state.steps["draft"].conversation
    assert conv is not None and conv.stopped_by in ("condition", "max_turns")
    verdicts = [t.content for t in conv.turns if t.speaker == "judge"]
    assert verdicts and all(
        v == "APPROVED" or v.endswith("a haiku has exactly three. Rewrite it.") for v in verdicts
    )
    assert state.message.startswith(f"Haiku ({conv.stopped_by} after {conv.total_turns} drafts)")


def _project(tmp_path: Path, source: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(source)
    return project


def test_code_review_approves_clean_code_with_its_json(tmp_path: Path) -> None:
    project = _project(tmp_path, "def add(a, b):\n    return a + b\n")
    workflow = str(EXAMPLES / "code-review.yaml")
    done = awf(tmp_path, "run", workflow, "-i", "target=.", cwd=project)
    state = last_run(tmp_path)
    review = state.steps["review"]
    assert isinstance(review.json_, dict), review.output
    assert isinstance(review.json_["approved"], bool) and isinstance(review.json_["summary"], str)
    assert "▶ review [agent, local]" in done.stderr
    if done.returncode == 0:
        assert state.message == f"Approved: {review.json_['summary']}"
    else:  # the model did not approve clean code: said plainly, after one fix round
        assert done.returncode == 3 and state.message.startswith("Not approved after")


def test_code_review_never_approves_what_the_linter_flags(tmp_path: Path) -> None:
    # `sys` unused (fixable) and a bare except (not fixable): one fix round leaves a problem.
    source = "import sys\n\ntry:\n    pass\nexcept:\n    pass\n"
    project = _project(tmp_path, source)
    workflow = str(EXAMPLES / "code-review.yaml")
    done = awf(tmp_path, "run", workflow, "-i", "target=.", cwd=project)
    state = last_run(tmp_path)
    assert done.returncode == 3, done.stderr
    assert state.message.startswith("Not approved after an automatic fix round: ")
    assert "import sys" not in (project / "app.py").read_text()  # the fix round ran
    assert isinstance(state.steps["review"].json_, dict)


def test_session_demo_recalls_the_code_word(tmp_path: Path) -> None:
    done = awf(tmp_path, "run", "workflows/session-demo.yaml")
    assert done.returncode == 0, done.stderr
    assert last_run(tmp_path).message == "The code word is marmalade."


def test_parallel_foreach_greets_everyone(tmp_path: Path) -> None:
    done = awf(tmp_path, "run", "workflows/parallel-foreach.yaml")
    assert done.returncode == 0, done.stderr
    assert "3/3: hello Linus (the last one)" in done.stdout


def test_tidy_notes_says_at_once_that_it_needs_a_larger_model(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("TODO\n")
    workflow = str(EXAMPLES / "tidy-notes.yaml")
    done = awf(tmp_path, "run", workflow, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "needs a larger model" in done.stderr and "--model" in done.stderr
    assert "loading model" not in done.stderr  # it stopped before loading anything
    assert (tmp_path / "notes" / "a.md").read_text() == "TODO\n"


def test_pair_review_says_at_once_which_agent_cli_it_needs(tmp_path: Path) -> None:
    done = awf(tmp_path, "run", "workflows/pair-review.yaml")
    assert done.returncode == 1, done.stderr
    assert 'executable "claude" not found on PATH (npm install -g' in done.stderr
