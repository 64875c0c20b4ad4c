"""One place picks how a run is shown (`frontends.connect`), and one Ctrl-C policy
(`terminal.CtrlC`): `awf run`, `%awf` and `awf_nb.run()` all go through them."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from awf_nb.api import prepare_run
from awf_nb.engine.run import NullSink, Runner
from awf_nb.frontends.connect import connect, in_kernel, pick_frontend
from awf_nb.frontends.scripted import ScriptedReader
from awf_nb.frontends.terminal import CtrlC, TerminalSink
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
    assert pick_frontend("auto", shell=A_KERNEL) == "notebook"
    assert pick_frontend(True, shell=A_KERNEL) == "notebook"
    assert pick_frontend(False, shell=A_KERNEL) == "headless"


def test_a_terminal_shows_the_run_when_someone_watches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert pick_frontend("auto", shell=A_TERMINAL_IPYTHON) == "terminal"
    assert pick_frontend(False, shell=A_TERMINAL_IPYTHON) == "headless"


def test_output_nobody_watches_is_headless_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert pick_frontend("auto", shell=A_TERMINAL_IPYTHON) == "headless"
    assert pick_frontend(True, shell=A_TERMINAL_IPYTHON) == "terminal"


def test_asking_whether_this_is_a_kernel_does_not_import_ipython() -> None:
    code = (
        "import sys; from awf_nb.frontends.connect import in_kernel, pick_frontend\n"
        "print(in_kernel(), pick_frontend(), 'IPython' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.split() == ["False", "headless", "False"]
    assert in_kernel(A_KERNEL) and not in_kernel(A_TERMINAL_IPYTHON)


# --- connect --------------------------------------------------------------------------------


def _runner(tmp_path: Path) -> Runner:
    return prepare_run(load_text(WORKFLOW, base_dir=tmp_path), {}, store=None, cwd=tmp_path)


def test_headless_shows_nothing_and_answers_only_from_given_replies(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    assert connect(runner, "headless") is None
    assert runner.config.reader is None and isinstance(runner.config.sink, NullSink)

    assert connect(runner, "headless", replies=["yes"]) is None
    assert isinstance(runner.config.reader, ScriptedReader)


def test_a_terminal_run_streams_to_a_terminal_sink_and_asks_only_if_interactive(
    tmp_path: Path,
) -> None:
    runner = _runner(tmp_path)
    sink = connect(runner, "terminal", interactive=False, output="buffered")
    assert isinstance(sink, TerminalSink) and runner.config.sink is sink
    assert sink.mode == "buffered"
    assert runner.config.reader is None

    connect(runner, "terminal", replies=["a", ""])
    assert isinstance(runner.config.reader, ScriptedReader)


def test_a_notebook_run_gets_a_panel_with_a_text_box_only_when_it_asks(tmp_path: Path) -> None:
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.notebook.reader import WidgetReader

    runner = _runner(tmp_path)
    panel = connect(runner, "notebook")
    assert isinstance(panel, RunPanel) and runner.config.sink is panel
    assert panel.interactive and isinstance(runner.config.reader, WidgetReader)

    panel = connect(runner, "notebook", replies=["ok"])
    assert isinstance(panel, RunPanel) and not panel.interactive
    assert isinstance(runner.config.reader, ScriptedReader)


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
