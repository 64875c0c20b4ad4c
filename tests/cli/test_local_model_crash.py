"""A native crash of the bundled model mid-reply, as the person at `awf run` lives it: the
step fails with the message that says what happened and where to look, the run is saved
and resumable, and the resumed run's next turn works on a new model process (markers
`real_model`, `slow`). The crash is a real SIGSEGV of the model process, sent once the
reply has started streaming (the process is held still first, so the reply cannot end
before the signal lands)."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.store import Store
from tests.support.cli import Output, only_run_id, run_awf, spawn_awf
from tests.support.processes import MODEL_CRASHED as CRASH
from tests.support.processes import crash_mid_reply, model_processes
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

STORY = """\
name: story
states:
  initial: tell
  tell:
    type: agent
    provider: local
    mode: conversation
    prompt: "Tell me a long story about a dragon who learns to cook."
    options: {max_tokens: 400, temperature: 0.8}
    on_success: after
  after:
    type: command
    command: echo after > after.txt
    on_success: done
  done: {type: terminal}
"""
RUN_SECONDS = 600.0


def test_a_crash_mid_reply_fails_the_step_saves_the_run_and_resume_works(tmp_path: Path) -> None:
    (tmp_path / "story.yaml").write_text(STORY)
    storage = tmp_path / "storage"
    awf = spawn_awf("run", "story.yaml", "--reply", "", storage=storage, cwd=tmp_path)
    out, err = Output(awf.stdout), Output(awf.stderr)
    try:
        wait_until(lambda: "model ready" in err.text, "the model to load", RUN_SECONDS)
        # The reply streams on stdout once the model is ready.
        ready_at = len(out.text)
        wait_until(lambda: len(out.text) > ready_at + 20, "the reply to start", RUN_SECONDS)
        [model] = model_processes(awf.pid)
        crash_mid_reply(model)
        code = awf.wait(RUN_SECONDS)
    finally:
        awf.kill()
    wait_until(lambda: CRASH in err.text, "the crash message on stderr")
    assert code == 3, err.text
    assert "Traceback" not in err.text
    assert not (tmp_path / "after.txt").exists()  # the next step did not run on half a reply

    run_id = only_run_id(storage)
    state = Store(storage).load_state(run_id)
    assert state.status == "failed"
    assert CRASH in (state.error or "")

    resumed = run_awf(
        "resume", run_id, "--reply", "", cwd=tmp_path,
        env={"AWF_STORAGE": str(storage)}, timeout=RUN_SECONDS,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    state = Store(storage).load_state(run_id)
    assert state.status == "completed"
    conversation = state.steps["tell"].conversation
    assert conversation is not None
    assert [t.content for t in conversation.turns if t.role == "assistant"][-1].strip()
    assert (tmp_path / "after.txt").read_text().strip() == "after"
