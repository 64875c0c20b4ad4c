"""Run modes: the cell transformer, the mode choice, and the panel driven through the magic.

A kernel is emulated where it matters: `in_kernel` and `kernel_version` are patched so the
magic draws the widget panel and decides as it would on ipykernel 6.29 or 7.4 (the tests
named `reported_kernel_…` run in this process, with that version reported; real kernels
are driven in test_kernel_runs.py). Clicks come
from another thread, as ipykernel 7 subshells deliver them.
"""

from __future__ import annotations

import asyncio
import html
import threading
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from awf_nb.api import load
from awf_nb.frontends import auto
from awf_nb.frontends.notebook import handle as handle_module
from awf_nb.frontends.notebook import magic
from awf_nb.frontends.notebook.run_mode import (
    choose_run_mode,
    frontend_takes_input,
    is_headless,
    parse_version,
    workflow_needs_input,
)
from awf_nb.frontends.notebook.transformer import make_transformer
from tests.support.notebook import cell
from tests.support.panel_widgets import press, send
from tests.support.waiting import wait_until

WAIT_SECONDS = 20.0

CHAT = """\
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let's talk."
    options:
      replies: ["First answer.", "Second answer."]
    on_success: done
  done: {type: terminal}
"""

SINGLE = """\
name: single
states:
  initial: ask
  ask: {type: agent, provider: scripted, prompt: "hi", on_success: done}
  done: {type: terminal}
"""


# --- the pure decision ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("needs_input", "version", "wait", "expected"),
    [
        (False, (6, 29, 5), None, "await"),  # no input: always await (Run All order, nbval)
        (False, (7, 3, 0), None, "await"),
        (True, (7, 4, 0), None, "await"),  # widget events reach an awaiting cell
        (True, (7, 10), None, "await"),
        (True, (8, 0), None, "await"),
        (True, (7, 3, 2), None, "background"),  # would deadlock waiting for a click
        (True, (6, 29, 5), None, "background"),
        (True, (0,), None, "background"),  # unknown kernel version: be safe
        (True, None, None, "await"),  # no kernel (terminal IPython): stdin works
        (True, (6, 29), True, "await"),  # --wait forces it
        (False, (7, 4), False, "background"),  # --no-wait forces it
    ],
)
def test_choose_run_mode(needs_input, version, wait, expected) -> None:
    assert choose_run_mode(needs_input=needs_input, kernel_version=version, wait=wait) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("7.4.0", (7, 4, 0)), ("6.29.5", (6, 29, 5)), ("7.0.0a1", (7, 0, 0)), ("dev", ())],
)
def test_parse_version(text: str, expected: tuple[int, ...]) -> None:
    assert parse_version(text) == expected


def test_is_headless() -> None:
    assert is_headless(True, {})
    assert is_headless(False, {"AWF_NO_INTERACTIVE": "1"})
    assert is_headless(False, {"AWF_NO_INTERACTIVE": "true"})
    assert not is_headless(False, {"AWF_NO_INTERACTIVE": "0"})
    assert not is_headless(False, {})
    # A frontend that takes no input (nbclient, nbval) is headless, unless the variable
    # says otherwise; one that does (JupyterLab), or an unknown one, is not.
    assert is_headless(False, {}, takes_input=False)
    assert not is_headless(False, {"AWF_NO_INTERACTIVE": "0"}, takes_input=False)
    assert not is_headless(False, {}, takes_input=True)
    assert not is_headless(False, {}, takes_input=None)


def test_whether_the_frontend_takes_input_is_in_its_request() -> None:
    class Kernel:
        def __init__(self, request: object) -> None:
            self.request = request

        def get_parent(self, channel: str) -> object:
            assert channel == "shell"
            return self.request

    class Shell:
        def __init__(self, kernel: object) -> None:
            self.kernel = kernel

    def request(allow: bool) -> dict[str, object]:
        return {"content": {"code": "", "allow_stdin": allow}}

    assert frontend_takes_input(Shell(Kernel(request(True)))) is True
    assert frontend_takes_input(Shell(Kernel(request(False)))) is False
    assert frontend_takes_input(Shell(Kernel({}))) is None
    assert frontend_takes_input(Shell(None)) is None
    assert frontend_takes_input(None) is None


def test_workflow_needs_input(tmp_path: Path) -> None:
    assert workflow_needs_input(load(CHAT))
    assert not workflow_needs_input(load(SINGLE))
    (tmp_path / "chat.yaml").write_text(CHAT)
    parent = f"""\
name: parent
states:
  initial: sub
  sub: {{type: call_workflow, workflow: {tmp_path / "chat.yaml"}, on_success: done}}
  done: {{type: terminal}}
"""
    assert workflow_needs_input(load(parent, cwd=tmp_path))
    assert not workflow_needs_input(load(parent.replace("chat.yaml", "nothing.yaml")))


# --- the cell transformer -------------------------------------------------------------------


class FakeShell:
    autoawait = True

    def __init__(self) -> None:
        from IPython.core.async_helpers import _asyncio_runner

        self.loop_runner = _asyncio_runner


def test_the_transformer_rewrites_awf_cells_into_one_await() -> None:
    transform = make_transformer(FakeShell())

    rewritten = transform(["%%awf -i a='x y' --out h\n", "name: x\n", "k: '{{.a}}'\n"])
    assert len(rewritten) == 1
    code = rewritten[0]
    assert code.startswith("await __import__(")
    assert ".run_cell(\"-i a='x y' --out h\", \"name: x\\nk: '{{.a}}'\\n\")" in code
    compile(code, "<cell>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT

    assert transform(["%awf run hello -i a=1\n"]) == [
        'await __import__("awf_nb.frontends.notebook.transformer", fromlist=["run_cell"])'
        ".run_line('run hello -i a=1')\n"
    ]
    assert transform(["# a comment\n", "%awf resume 2026-abc\n", "\n"])[0].endswith(
        ".run_line('resume 2026-abc')\n"
    )


@pytest.mark.parametrize(
    "lines",
    [
        ["x = 1\n"],
        ["%awf list\n"],
        ["%awf run a\n", "print(1)\n"],  # more than the magic: left to the line magic
        ["%%awfully\n", "x\n"],
        ["%%awf?\n"],
        ["%%time\n", "%%awf\n"],
        [],
    ],
)
def test_the_transformer_leaves_other_cells_alone(lines: list[str]) -> None:
    assert make_transformer(FakeShell())(lines) == lines


def test_no_rewrite_without_asyncio_autoawait() -> None:
    shell = FakeShell()
    shell.autoawait = False
    assert make_transformer(shell)(["%%awf\n", "name: x\n"]) == ["%%awf\n", "name: x\n"]
    shell.autoawait = True
    shell.loop_runner = object()  # e.g. %autoawait trio
    assert make_transformer(shell)(["%%awf\n", "name: x\n"]) == ["%%awf\n", "name: x\n"]


# --- through a shell --------------------------------------------------------------------------


def as_kernel(monkeypatch: pytest.MonkeyPatch, version: tuple[int, ...]) -> None:
    monkeypatch.setattr(auto, "in_kernel", lambda shell=None: True)
    monkeypatch.setattr(magic, "kernel_version", lambda shell: version)


def give_up(ip: InteractiveShell) -> None:
    """Never leave a cell waiting for a simulated person who failed: cancel the run."""
    handle = ip.user_ns.get("chat")
    if handle is not None and handle.task is not None:
        handle.task.get_loop().call_soon_threadsafe(handle.cancel)


def person_in_another_thread(ip: InteractiveShell, messages: list[str]) -> threading.Thread:
    """Types and sends `messages` into the panel of the run bound to `chat`, then ends."""
    errors: list[BaseException] = []

    def act() -> None:
        try:
            wait_until(lambda: "chat" in ip.user_ns, "the handle")
            panel = ip.user_ns["chat"].panel
            wait_until(lambda: "talk" in panel._sections, "the step to start")
            section = panel._sections["talk"]
            for message in messages:
                wait_until(lambda: panel.input.composer.can_send, "the prompt")
                send(panel.input, message)
                shown = lambda m=message: any(c.value == m for c in section.body.children)  # noqa: E731
                wait_until(shown, "the message in the chat")
            wait_until(lambda: panel.input.composer.can_send, "the last prompt")
            press(panel.input.composer, "end")
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            give_up(ip)

    thread = threading.Thread(target=act, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def test_reported_kernel_7_4_the_cell_awaits_a_conversation_driven_by_clicks(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_kernel(monkeypatch, (7, 4, 0))
    person = person_in_another_thread(ip, ["Hello from a thread"])

    outcome = cell(ip, "%%awf --out chat\n" + CHAT)
    person.join(timeout=WAIT_SECONDS)

    assert not person.errors, person.errors  # type: ignore[attr-defined]
    assert outcome.success, outcome.error_in_exec
    handle = ip.user_ns["chat"]
    assert handle.done()  # the cell waited for the end of the run
    turns = handle.result().steps["talk"].conversation.turns
    assert [t.content for t in turns][2:] == ["Hello from a thread", "Second answer."]
    assert "completed" in handle.panel.status.value


def test_reported_kernel_6_a_conversation_runs_in_the_background(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_kernel(monkeypatch, (6, 29, 5))

    outcome = cell(ip, "%%awf --out chat\n" + CHAT)

    assert outcome.success, outcome.error_in_exec
    handle = ip.user_ns["chat"]
    assert not handle.done()  # the cell returned at once
    assert any("await chat" in w.value for w in handle.panel.notes.children)
    assert handle.task in handle_module._RUNNING  # a strong reference keeps it alive
    person = person_in_another_thread(ip, ["more"])
    outcome = cell(ip, "result = await chat")
    person.join(timeout=WAIT_SECONDS)

    assert not person.errors, person.errors  # type: ignore[attr-defined]
    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["result"].steps["talk"].conversation.total_turns == 2
    assert handle.task not in handle_module._RUNNING


@pytest.mark.parametrize("line", ["--reply ''", "--no-interactive"])
def test_reported_kernel_6_a_run_without_input_still_awaits(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    as_kernel(monkeypatch, (6, 29, 5))

    outcome = cell(ip, f"%%awf --out chat {line}\n" + CHAT)

    assert outcome.success, outcome.error_in_exec
    handle = ip.user_ns["chat"]
    assert handle.done()
    assert handle.panel.summary is not None and handle.panel.summary.status == "completed"
    assert not handle.panel.interactive  # no text box without a person to type


def test_no_wait_forces_the_background(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_kernel(monkeypatch, (7, 4, 0))

    assert cell(ip, "%%awf --no-wait --no-interactive --out chat\n" + CHAT).success
    handle = ip.user_ns["chat"]
    assert not handle.done()
    assert cell(ip, "result = await chat").success
    assert ip.user_ns["result"].ok


def test_cancel_run_at_the_prompt_cancels_an_awaiting_run(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_kernel(monkeypatch, (7, 4, 0))

    def stop() -> None:
        try:
            wait_until(lambda: "chat" in ip.user_ns, "the handle")
            panel = ip.user_ns["chat"].panel
            wait_until(lambda: panel.input.composer.can_send, "the prompt")
            press(panel.input.composer, "cancel")
        except AssertionError:
            give_up(ip)  # the assertions below then report what went wrong

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    outcome = cell(ip, "%%awf --out chat\n" + CHAT)
    thread.join(timeout=WAIT_SECONDS)

    assert isinstance(outcome.error_in_exec, magic.AwfCellError)
    assert "was cancelled" in str(outcome.error_in_exec)
    handle = ip.user_ns["chat"]
    assert handle.state.status == "cancelled"
    assert "cancelled" in handle.panel.status.value


def test_without_autoawait_the_magic_itself_runs_the_workflow(ip: InteractiveShell) -> None:
    ip.autoawait = False

    outcome = cell(ip, "%%awf --reply '' --out chat\n" + CHAT)

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["chat"].result().ok


def test_headless_panel_runs_show_the_summary(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    as_kernel(monkeypatch, (7, 4, 0))
    monkeypatch.setenv("AWF_NO_INTERACTIVE", "1")

    outcome = cell(ip, "%%awf --out chat\n" + CHAT)

    assert outcome.success, outcome.error_in_exec
    panel = ip.user_ns["chat"].panel
    # The panel's text form: empty while live, then the run as a transcript.
    shown = capsys.readouterr().out
    assert "awf run panel" not in shown
    assert "chat · completed in" in shown and "  prompt: Let's talk." in shown
    assert panel.summary is not None and panel.summary.status == "completed"
    assert panel.input.widget not in panel.widget.children


async def test_interrupting_an_awaiting_cell_cancels_its_run(shell: InteractiveShell) -> None:
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.notebook.reader import WidgetReader
    from awf_nb.runs import prepare_run
    from tests.support.panel_frontend import PanelFrontend

    workflow = load(CHAT)
    panel = RunPanel(workflow.name, interactive=True)
    reader = WidgetReader()
    prepared = prepare_run(workflow, frontend=PanelFrontend(panel, reader), storage=False)
    handle = magic.RunHandle(prepared, name="chat")
    magics = magic.AwfMagics(shell)
    cell_task = asyncio.create_task(magics._run_async(handle, "await"))
    async with asyncio.timeout(WAIT_SECONDS):
        while not panel.input.composer.can_send:
            await asyncio.sleep(0.01)

    cell_task.cancel()  # what ipykernel does to an awaiting cell on an interrupt
    with pytest.raises(magic.AwfCellError, match=r"interrupted: run .* was cancelled"):
        await cell_task

    assert handle.state.status == "cancelled"
    assert "cancelled" in panel.status.value


FAILING = """\
name: broken
states:
  initial: build
  build:
    type: command
    command: "echo compiling; echo 'missing header' >&2; exit 3"
    on_success: done
  done: {type: terminal}
"""


def test_a_failed_cell_states_its_error_once(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from awf_nb.frontends.notebook.panel_static import html_to_text, static_html

    as_kernel(monkeypatch, (7, 4, 0))

    outcome = cell(ip, "%%awf --out chat\n" + FAILING)

    error = outcome.error_in_exec
    assert isinstance(error, magic.AwfCellError)
    assert "exit code 3: missing header" in str(error)  # the whole story, for code
    # What the person sees: the panel, then the cell's own red line.
    panel_text = html_to_text(static_html(ip.user_ns["chat"].panel.widget))
    cell_text = "\n".join(error._render_traceback_())
    assert panel_text.count("exit code 3") == 1, panel_text
    assert "exit code" not in cell_text and "missing header" not in cell_text
    assert cell_text == "\x1b[0;31mworkflow broken failed (see the run above)\x1b[0m"
    assert "continue it with %awf resume" in panel_text
    capsys.readouterr()


def test_a_recorded_notebook_conversation_keeps_what_the_person_typed(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With --record, the panel's text box is read through the cassette's recorder: the
    typed messages reach the run, and the cassette holds them for the replay."""
    as_kernel(monkeypatch, (7, 4, 0))
    person = person_in_another_thread(ip, ["Typed in the panel"])

    outcome = cell(ip, "%%awf --out chat --record chat.cassette.jsonl\n" + CHAT)
    person.join(timeout=WAIT_SECONDS)

    assert not person.errors, person.errors  # type: ignore[attr-defined]
    assert outcome.success, outcome.error_in_exec
    recorded = (tmp_path / "chat.cassette.jsonl").read_text()
    assert '"text": "Typed in the panel"' in recorded.replace('":"', '": "')
    outcome = cell(ip, "%%awf --out chat --replay chat.cassette.jsonl\n" + CHAT)
    assert outcome.success, outcome.error_in_exec
    turns = ip.user_ns["chat"].result().steps["talk"].conversation.turns
    assert "Typed in the panel" in [t.content for t in turns]


def test_resume_in_a_notebook_shows_the_conversation_so_far_before_the_next_turn(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`%awf resume RUN_ID` of a conversation cancelled at its prompt: the panel opens with
    what was said so far (dimmed, its own box) before it asks again."""
    as_kernel(monkeypatch, (7, 4, 0))
    errors: list[BaseException] = []

    def person(messages: list[str], then: str, earlier: list[str], old: object) -> None:
        try:
            wait_until(lambda: ip.user_ns.get("chat") not in (None, old), "the handle")
            panel = ip.user_ns["chat"].panel
            wait_until(lambda: "talk" in panel._sections, "the step to start")
            for message in messages:
                wait_until(lambda: panel.input.composer.can_send, "the prompt")
                asked = len(panel.input.reader.prompts)
                send(panel.input, message)
                # The scripted reply comes at once: the box may be enabled again before
                # this thread looks, so wait for the run to ask again instead.
                wait_until(lambda n=asked: len(panel.input.reader.prompts) > n, "the next read")
            wait_until(lambda: panel.input.composer.can_send, "the next prompt")
            body = panel._sections["talk"].body.children
            earlier.extend(c.value for c in body if "awf-earlier" in c._dom_classes)
            press(panel.input.composer, then)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            give_up(ip)

    def cell_with(messages: list[str], then: str, line: str) -> tuple[object, list[str]]:
        earlier: list[str] = []
        old = ip.user_ns.get("chat")
        thread = threading.Thread(target=person, args=(messages, then, earlier, old), daemon=True)
        thread.start()
        outcome = cell(ip, line)
        thread.join(timeout=WAIT_SECONDS)
        assert not errors, errors
        return outcome, earlier

    first, earlier = cell_with(["Remember two things"], "cancel", "%%awf --out chat\n" + CHAT)
    assert isinstance(first.error_in_exec, magic.AwfCellError)
    assert earlier == []  # a new conversation has nothing earlier
    run_id = ip.user_ns["chat"].run_id
    assert ip.user_ns["chat"].state.status == "cancelled"

    again, earlier = cell_with([], "end", f"%awf resume {run_id} --out chat")

    assert again.success, again.error_in_exec
    (shown,) = [html.unescape(text) for text in earlier]
    assert "Earlier in this conversation: 4 messages" in shown
    for said in ("Let's talk.", "First answer.", "Remember two things", "Second answer."):
        assert said in shown
    assert 'class="awf-user awf-prompt"' in shown  # the step's prompt, marked as the workflow's
    assert ip.user_ns["chat"].result().ok
