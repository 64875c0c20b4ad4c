"""One place picks how a run is shown (`frontends.auto`), and one Ctrl-C policy
(`terminal.CtrlC`): `awf run`, `%awf` and `awf_nb.run()` all go through them; a frontend
opens a session that runs the prepared run, acting on it through its `RunControl`."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from awf_nb.engine.config import NullSink
from awf_nb.frontends.auto import in_kernel, pick_frontend
from awf_nb.frontends.base import AskPolicy
from awf_nb.frontends.headless import HeadlessFrontend
from awf_nb.frontends.notebook.frontend import NotebookFrontend, NotebookSession
from awf_nb.frontends.terminal import CtrlC, TerminalSink
from awf_nb.frontends.terminal.frontend import TerminalFrontend, TerminalSession
from awf_nb.runs import Frontend, FrontendRequest, PreparedRun, RunControl, prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.workflow.loader import load_text

A_KERNEL = SimpleNamespace(kernel=object())
A_TERMINAL_IPYTHON = SimpleNamespace(kernel=None)

WORKFLOW = """\
name: hello
states:
  initial: greet
  greet: {type: command, command: "echo hello-from-greet", on_success: done}
  done: {type: terminal}
"""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


# --- pick_frontend --------------------------------------------------------------------------


def test_in_a_kernel_the_notebook_shows_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert isinstance(pick_frontend("auto", shell=A_KERNEL), NotebookFrontend)
    assert isinstance(pick_frontend(True, shell=A_KERNEL), NotebookFrontend)
    assert isinstance(pick_frontend(False, shell=A_KERNEL), HeadlessFrontend)


def test_a_terminal_shows_the_run_when_someone_watches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert isinstance(pick_frontend("auto", shell=A_TERMINAL_IPYTHON), TerminalFrontend)
    assert isinstance(pick_frontend(False, shell=A_TERMINAL_IPYTHON), HeadlessFrontend)


def test_output_nobody_watches_is_headless_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert isinstance(pick_frontend("auto", shell=A_TERMINAL_IPYTHON), HeadlessFrontend)
    assert isinstance(pick_frontend(True, shell=A_TERMINAL_IPYTHON), TerminalFrontend)


def test_asking_whether_this_is_a_kernel_does_not_import_ipython() -> None:
    code = (
        "import sys; from awf_nb.frontends.auto import in_kernel, pick_frontend\n"
        "print(in_kernel(), pick_frontend(), 'IPython' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.split() == ["False", "HeadlessFrontend()", "False"]
    assert in_kernel(A_KERNEL) and not in_kernel(A_TERMINAL_IPYTHON)


# --- the frontend a run is prepared with ------------------------------------------------------


def _prepared(tmp_path: Path, frontend: Frontend, **options: Any) -> PreparedRun:
    workflow = load_text(WORKFLOW, base_dir=tmp_path)
    return prepare_run(workflow, storage=False, cwd=tmp_path, frontend=frontend, **options)


def test_headless_shows_nothing_and_answers_only_from_given_replies(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, HeadlessFrontend())
    assert prepared.session.sink is None and prepared.session.reader is None
    config = prepared.runner.config
    assert config.reader is None and isinstance(config.sink, NullSink)

    prepared = _prepared(tmp_path, HeadlessFrontend(), replies=["yes"])
    assert isinstance(prepared.runner.config.reader, ScriptedReader)


def test_a_terminal_run_streams_to_a_terminal_sink_and_asks_only_if_interactive(
    tmp_path: Path,
) -> None:
    workflow = load_text(WORKFLOW, base_dir=tmp_path)
    prepared = prepare_run(
        workflow,
        storage=False,
        cwd=tmp_path,
        interactive=False,
        frontend=TerminalFrontend("buffered"),
    )
    assert isinstance(prepared.session, TerminalSession)
    sink = prepared.session.sink
    assert isinstance(sink, TerminalSink) and prepared.runner.config.sink is sink
    assert sink.mode == "buffered"
    assert prepared.runner.config.reader is None

    prepared = _prepared(tmp_path, TerminalFrontend(), replies=["a", ""])
    assert isinstance(prepared.runner.config.reader, ScriptedReader)


def test_a_notebook_run_gets_a_panel_with_a_text_box_only_when_it_asks(tmp_path: Path) -> None:
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.notebook.reader import WidgetReader

    prepared = _prepared(tmp_path, NotebookFrontend())
    assert isinstance(prepared.session, NotebookSession)
    panel = prepared.session.panel
    assert isinstance(panel, RunPanel) and prepared.runner.config.sink is panel
    assert panel.interactive and isinstance(prepared.runner.config.reader, WidgetReader)

    prepared = _prepared(tmp_path, NotebookFrontend(), replies=["ok"])
    assert isinstance(prepared.session, NotebookSession)
    panel = prepared.session.panel
    assert isinstance(panel, RunPanel) and not panel.interactive
    assert isinstance(prepared.runner.config.reader, ScriptedReader)


def test_a_frontend_may_ask_only_when_the_workflow_needs_it(tmp_path: Path) -> None:
    """The magic's rule: no text box for a workflow without a conversation, nor for a
    replayed one (`asks_if`, `asks_when_replayed`)."""
    workflow = load_text(WORKFLOW, base_dir=tmp_path)
    frontend = NotebookFrontend(AskPolicy(asks_if=lambda wf: False))
    prepared = prepare_run(workflow, storage=False, cwd=tmp_path, frontend=frontend)
    assert not prepared.session.asks and prepared.runner.config.reader is None
    request = FrontendRequest(workflow, None, asks=True, replayed=True)
    not_on_replay = NotebookFrontend(AskPolicy(asks_when_replayed=False))
    assert not not_on_replay.open(request, RunControl()).asks
    assert NotebookFrontend().open(request, RunControl()).asks


def test_only_a_run_someone_may_answer_pauses_at_breakpoints(tmp_path: Path) -> None:
    """The notebook panel answers breakpoints, but not in a headless run (nbclient, CI):
    there a workflow's own `breakpoint:` is ignored and a --break-before is refused."""
    from awf_nb.errors import UserError
    from awf_nb.frontends.notebook.panel_pause import PanelDebugger

    prepared = _prepared(tmp_path, NotebookFrontend())
    assert isinstance(prepared.runner.config.debugger, PanelDebugger)
    assert prepared.runner.pauses.breakpoints.from_file
    prepared = _prepared(tmp_path, NotebookFrontend(), interactive=False)
    assert prepared.runner.config.debugger is None
    assert not prepared.runner.pauses.may_pause()
    with pytest.raises(UserError, match="breakpoints need someone to answer the pause"):
        _prepared(tmp_path, NotebookFrontend(), interactive=False, break_before=["*"])


# --- awf_nb.run(show=…) ---------------------------------------------------------------------


def _run_in_a_script(tmp_path: Path, show: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "hello.yaml").write_text(WORKFLOW)
    script = textwrap.dedent(
        f"""
        import awf_nb
        result = awf_nb.run("hello.yaml", show={show}, storage=False)
        print("status", result.status)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        stdin=subprocess.DEVNULL,
    )


def test_run_show_true_shows_progress_even_when_nobody_watches(tmp_path: Path) -> None:
    shown = _run_in_a_script(tmp_path, "True")
    assert "status completed" in shown.stdout
    assert "greet" in shown.stderr and "completed" in shown.stderr
    assert "hello-from-greet" in shown.stdout + shown.stderr


@pytest.mark.parametrize("show", ["False", '"auto"'])
def test_run_shows_nothing_when_told_not_to_or_nobody_watches(tmp_path: Path, show: str) -> None:
    shown = _run_in_a_script(tmp_path, show)
    assert shown.stdout.strip() == "status completed"
    assert shown.stderr == ""


# --- Ctrl-C ---------------------------------------------------------------------------------


class _Run:
    def __init__(self, interrupts: str) -> None:
        self.interrupts = interrupts
        self.cancels = 0

    def interrupt(self) -> str:
        return self.interrupts

    def cancel(self) -> None:
        self.cancels += 1


def test_ctrl_c_during_a_reply_cuts_the_reply_and_twice_cancels_the_run() -> None:
    now = [100.0]
    run, cut = _Run("turn"), []
    ctrl_c = CtrlC(run, lambda: cut.append(True), double_press=1.0, clock=lambda: now[0])

    ctrl_c()
    assert cut == [True] and run.cancels == 0 and not ctrl_c.cancelled
    now[0] += 5.0  # a second press much later is again a single press
    ctrl_c()
    assert cut == [True, True] and run.cancels == 0 and not ctrl_c.cancelled
    now[0] += 0.5  # pressed twice within a second: the run is cancelled
    ctrl_c()
    assert run.cancels == 1 and ctrl_c.cancelled


def test_ctrl_c_at_the_prompt_cancels_the_run() -> None:
    run, cut = _Run("run"), []
    ctrl_c = CtrlC(run, lambda: cut.append(True), clock=lambda: 0.0)

    ctrl_c()
    assert ctrl_c.cancelled and cut == [] and run.cancels == 0  # interrupt() did the cancel
