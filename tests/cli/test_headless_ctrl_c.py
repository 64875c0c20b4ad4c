"""Ctrl-C in a headless `awf run` (stdin not a terminal: CI, a script, `nohup`) cancels the
run wherever it lands — exit 130, the run resumable — and never keeps half a reply as a
step's output for the next steps to publish. CI systems send SIGINT when they cancel a job.
(In a terminal, Ctrl-C during a reply keeps its meaning: tests/cli/test_terminal_pty.py.)"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from awf_nb.store import Store
from tests.support.cli import Output, only_run_id, run_awf, spawn_awf
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import wait_until

AGENT = """\
name: publish
states:
  initial: write
  write:
    type: agent
    provider: openai_compatible
    options: {{base_url: "{url}", model: awf-test-model}}
    {mode}prompt: Write the release notes.
    on_success: publish
  publish:
    type: step
    command: echo "{{{{.states.write.Output}}}}" > published.txt
    on_success: done
  done: {{type: terminal}}
"""


@pytest.mark.parametrize("mode", ["", "mode: conversation\n    "], ids=["single", "conversation"])
def test_sigint_while_a_reply_streams_cancels_a_headless_run(tmp_path: Path, mode: str) -> None:
    with OpenAIServer() as server:
        server.script(Reply.counted(400, delay=0.02), Reply.text("Notes, whole."))
        (tmp_path / "wf.yaml").write_text(AGENT.format(url=server.base_url, mode=mode))
        storage = tmp_path / "s"
        awf = spawn_awf("run", "wf.yaml", "--reply", "", storage=storage, cwd=tmp_path)
        out = Output(awf.stdout)
        try:
            wait_until(lambda: " t5" in out.text, "the reply to stream")
            awf.send_signal(signal.SIGINT)  # what a CI system sends to cancel a job
            code = awf.wait(60)
        finally:
            awf.kill()
        assert awf.stderr is not None
        err = awf.stderr.read()
        assert code == 130, (out.text, err)
        assert "Traceback" not in err
        assert not (tmp_path / "published.txt").exists()  # no step ran on half a reply

        run_id = only_run_id(storage)
        assert Store(storage).load_state(run_id).status == "cancelled"
        resumed = run_awf(
            "resume", run_id, "--reply", "", cwd=tmp_path, env={"AWF_STORAGE": str(storage)}
        )
        assert resumed.returncode == 0, resumed.stderr
        assert (tmp_path / "published.txt").read_text().strip() == "Notes, whole."
