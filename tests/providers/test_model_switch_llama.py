"""The example workflows on "a real model" with one switch: a real llama.cpp server
(`python -m llama_cpp.server`) on 127.0.0.1 stands in for Ollama, vLLM or a hosted API
(marker `real_server`).

Each example is run unedited, through each entry point a person uses — `awf run --model`,
`AWF_MODEL` in the environment, `awf_nb.arun(model=…)` — and a recording proxy in front
of the server shows that every agent turn went to the server (with the examples' local-only
options left behind) and that no bundled model was loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from awf_nb.api import arun
from awf_nb.store import Store
from tests.support.cli import run_awf
from tests.support.recording_proxy import RecordingProxy

pytestmark = [pytest.mark.real_server, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "workflows"
RUN_TIMEOUT = 900
LOCAL_ONLY = {"max_tokens", "max_completion_tokens", "repeat_penalty", "json_schema", "min_p"}


def awf(
    tmp_path: Path, *args: str, cwd: Path = ROOT, **env: str
) -> subprocess.CompletedProcess[str]:
    unset: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("AWF_", "OPENAI_"))
    }
    settings = {
        **unset,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "AWF_STORAGE": str(tmp_path / "runs"),
        **env,
    }
    return run_awf(*args, cwd=cwd, env=settings, timeout=RUN_TIMEOUT)


def sent_to_the_server(proxy: RecordingProxy, first: int = 0) -> list[dict]:
    bodies = proxy.requests[first:]
    assert bodies, "nothing reached the server"
    for body in bodies:
        assert body["model"] == "smollm2"
        assert not LOCAL_ONLY & set(body), body
    return bodies


def test_chat_with_the_model_flag(llama_server: str, tmp_path: Path) -> None:
    with RecordingProxy(llama_server) as proxy:
        done = awf(tmp_path, "run", "workflows/chat.yaml", "--reply", "",
                   "--model", f"smollm2@{proxy.base_url}")  # fmt: skip
        [body] = sent_to_the_server(proxy)
    assert done.returncode == 0, done.stderr
    assert f"[agent, conversation, local → smollm2@{proxy.base_url}]" in done.stderr
    assert "loading model" not in done.stderr
    assert body["messages"][-1]["content"].startswith("I need help with learning to bake bread.")
    assert body["temperature"] == 0  # the example's sampling goes along


def test_writer_reviewer_with_awf_model_in_the_environment(
    llama_server: str, tmp_path: Path
) -> None:
    with RecordingProxy(llama_server) as proxy:
        done = awf(tmp_path, "run", "workflows/writer-reviewer.yaml",
                   AWF_MODEL=f"smollm2@{proxy.base_url}")  # fmt: skip
        bodies = sent_to_the_server(proxy)
    assert done.returncode == 0, done.stderr
    store = Store(tmp_path / "runs")
    state = store.load_state(store.history(limit=1)[0].run_id)
    conv = state.steps["draft"].conversation
    assert conv is not None
    # every message of both sides came from the server: writer, reviewer, writer, …
    assert len(bodies) == conv.total_turns + conv.partner_turns
    assert bodies[1]["messages"][-1]["content"].startswith("Poem:\n")
    assert state.message.startswith(("Approved by the reviewer", "Not approved after"))


async def test_code_review_from_python(llama_server: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    with RecordingProxy(llama_server) as proxy:
        result = await arun(
            EXAMPLES / "code-review.yaml",
            {"target": "."},
            model=f"smollm2@{proxy.base_url}",
            cwd=project,
            env={"PATH": path},
            storage=tmp_path / "runs",
            show=False,
        )
        [body, *_] = sent_to_the_server(proxy)
    assert "Linter report for .:" in body["messages"][-1]["content"]
    # the server's reply is JSON, or the run says plainly that it was not
    review = result.steps["review"]
    if result.status == "failed":
        assert result.error.startswith(("the review failed: ", "Not approved after"))
    else:
        assert isinstance(review.json_, dict)


def test_tidy_notes_offers_its_tools_to_the_server(llama_server: str, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("TODO buy milk\nTODO buy milk\n")
    with RecordingProxy(llama_server) as proxy:
        done = awf(tmp_path, "run", str(EXAMPLES / "tidy-notes.yaml"),
                   "--model", f"smollm2@{proxy.base_url}", cwd=tmp_path)  # fmt: skip
        [body, *_] = sent_to_the_server(proxy)
    # llama-cpp-python's server answers in text when the model is left to choose (see
    # docs/providers.md); headless, the chat then ends after that reply.
    assert done.returncode == 0, done.stderr
    assert [t["function"]["name"] for t in body["tools"]] == ["Read", "Glob", "Grep", "Write"]
    assert "needs a larger model" not in done.stderr
