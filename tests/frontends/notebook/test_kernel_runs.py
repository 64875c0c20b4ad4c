"""`%%awf` in a real ipykernel (6.29 and 7.4), driven through jupyter_client like a frontend.

Level 4 of the spec's testing pyramid: the run modes of spec/notebook.md were measured on
real kernels, so they are checked on real kernels. Widget clicks are sent the way
JupyterLab sends them: a `comm_msg` updating the Textarea's `value`, then a `custom`
`click` on the Button — on the main shell channel, and (ipykernel >= 7) through a kernel
subshell. Each test starts its own kernel.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from tests.support.kernels import ExecuteOutcome, KernelSession

pytestmark = pytest.mark.kernel

CELL_SECONDS = 60.0
STEP_SECONDS = 30.0

NO_INPUT_WORKFLOW = """
name: quick
states:
  initial: build
  build:
    type: step
    command: echo hello-from-command
    on_success: summarize
  summarize:
    type: agent
    provider: scripted
    prompt: "Summarize {{.states.build.Output}}"
    options: {replies: ["The **summary** is ready."], delay_ms: 20}
    on_success: done
  done: {type: terminal, message: finished}
"""

CONVERSATION_WORKFLOW = """
name: garden
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Plan a garden"
    options:
      delay_ms: 10
      replies: ["What size is the garden?", "Then plant tomatoes first.", "Water them every morning."]
    on_success: done
  done: {type: terminal}
"""

FIRST_REPLY = "What size is the garden?"
SECOND_REPLY = "Then plant tomatoes first."
THIRD_REPLY = "Water them every morning."
USER_MESSAGE = "About ten square metres"
SECOND_USER_MESSAGE = "And how often do I water?"


def awf_cell(workflow: str, flags: str = "") -> str:
    return f"%%awf {flags}".rstrip() + "\n" + textwrap.dedent(workflow).lstrip()


def run_summary(kernel: KernelSession, handle: str, step: str = "chat") -> dict[str, Any]:
    """`await handle` in a new cell; its status and conversation turns as JSON."""
    code = textwrap.dedent(
        f"""
        import json as _json
        _result = await {handle}
        _conversation = _result.steps[{step!r}].conversation
        print(_json.dumps({{
            "status": _result.status,
            "turns": [[t.role, t.content, t.interrupted] for t in _conversation.turns]
            if _conversation else [],
        }}))
        """
    )
    outcome = kernel.execute(code, timeout=CELL_SECONDS)
    assert outcome.status == "ok", failure(kernel, outcome)
    return json.loads(outcome.stdout.strip().splitlines()[-1])


def failure(kernel: KernelSession, outcome: ExecuteOutcome) -> str:
    return f"cell failed: {outcome.reply['content']}\n{kernel.describe()}"


def all_text(kernel: KernelSession) -> str:
    """Everything a person could read so far: widget values and rich outputs."""
    parts = [str(w.value) for w in kernel.widgets.values() if isinstance(w.value, str)]
    for message in kernel.iopub:
        content = message["content"]
        if message["msg_type"] == "stream":
            parts.append(content["text"])
        elif message["msg_type"] in ("display_data", "execute_result", "update_display_data"):
            parts.extend(str(v) for v in content.get("data", {}).values())
    return "\n".join(parts)


def user_turns(summary: dict[str, Any]) -> list[str]:
    return [content for role, content, _ in summary["turns"] if role == "user"]


def assistant_turns(summary: dict[str, Any]) -> list[str]:
    return [content for role, content, _ in summary["turns"] if role == "assistant"]


# ---------------------------------------------------------------------------- mode 1


def test_run_without_input_awaits_in_the_cell(awf_kernel: KernelSession) -> None:
    outcome = awf_kernel.execute(awf_cell(NO_INPUT_WORKFLOW, "--out r"), timeout=CELL_SECONDS)

    # Everything below was read before the cell went idle: the cell awaited the whole run.
    assert outcome.status == "ok", failure(awf_kernel, outcome)
    assert awf_kernel.find_widgets(css_class="awf-panel"), awf_kernel.describe()
    assert any("completed" in text for text in awf_kernel.texts("awf-status")), (
        awf_kernel.describe()
    )
    assert any("summary" in text for text in awf_kernel.texts("awf-assistant"))
    assert "<strong>summary</strong>" in "".join(awf_kernel.texts("awf-assistant"))
    assert "hello-from-command" in all_text(awf_kernel)

    check = awf_kernel.execute("print(r.done(), r.result().status, r.result().outputs['build'])")
    assert check.status == "ok", failure(awf_kernel, check)
    assert check.stdout.split() == ["True", "completed", "hello-from-command"]


def test_all_replies_given_runs_the_conversation_in_the_cell(awf_kernel: KernelSession) -> None:
    flags = f'--out chat --reply "{USER_MESSAGE}" --reply ""'
    outcome = awf_kernel.execute(awf_cell(CONVERSATION_WORKFLOW, flags), timeout=CELL_SECONDS)

    assert outcome.status == "ok", failure(awf_kernel, outcome)
    assert any("completed" in text for text in awf_kernel.texts("awf-status"))
    summary = run_summary(awf_kernel, "chat")
    assert summary["status"] == "completed"
    assert user_turns(summary) == ["Plan a garden", USER_MESSAGE]
    assert assistant_turns(summary) == [FIRST_REPLY, SECOND_REPLY]


# ---------------------------------------------------------------------------- modes 2 and 3


@pytest.mark.parametrize(
    ("kernel_python", "channel"),
    [("6.29", "main"), ("7.4", "main"), ("7.4", "subshell")],
    indirect=["kernel_python"],
    ids=["ipykernel-6.29-main-shell", "ipykernel-7.4-main-shell", "ipykernel-7.4-subshell"],
)
def test_conversation_driven_by_comm_clicks(
    awf_kernel: KernelSession, kernel_python: Any, channel: str
) -> None:
    subshell = awf_kernel.create_subshell() if channel == "subshell" else None
    cell = awf_kernel.submit(awf_cell(CONVERSATION_WORKFLOW, "--out chat"))

    awf_kernel.wait_for_text("awf-assistant", FIRST_REPLY, STEP_SECONDS)
    awf_kernel.wait_for_input_box(STEP_SECONDS)
    awf_kernel.drain(0.3)
    if kernel_python.series == "6.29":
        # Mode 3: an awaiting cell would deadlock on 6.x, so the cell has returned and the
        # run goes on in the background while the panel waits for the user.
        awf_kernel.pump_until(lambda: awf_kernel.is_idle(cell), STEP_SECONDS, "the cell idle")
    else:
        # Mode 2: the cell awaits the conversation and stays busy until it ends.
        assert not awf_kernel.is_idle(cell), "the cell returned while the conversation waits"

    # Two messages, as a person types them: each is one custom message of the composer
    # (the text and the action), which the browser never holds back for an idle status.
    for message, reply in ((USER_MESSAGE, SECOND_REPLY), (SECOND_USER_MESSAGE, THIRD_REPLY)):
        awf_kernel.send_message(message, subshell)
        awf_kernel.wait_for_text("awf-user", message, STEP_SECONDS)
        awf_kernel.wait_for_text("awf-assistant", reply, STEP_SECONDS)
        awf_kernel.wait_for_input_box(STEP_SECONDS)
    awf_kernel.press("end", subshell)

    outcome = awf_kernel.wait_for_cell(cell, CELL_SECONDS)
    assert outcome.status == "ok", failure(awf_kernel, outcome)
    awf_kernel.pump_until(
        lambda: any("completed" in text for text in awf_kernel.texts("awf-status")),
        STEP_SECONDS,
        "the status line to show completed",
    )
    summary = run_summary(awf_kernel, "chat")
    assert summary["status"] == "completed"
    assert user_turns(summary) == ["Plan a garden", USER_MESSAGE, SECOND_USER_MESSAGE]
    assert assistant_turns(summary) == [FIRST_REPLY, SECOND_REPLY, THIRD_REPLY]


STOP_WORKFLOW = """
name: long-story
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Tell stories."
    options:
      delay_ms: 100
      replies: ["Ask me for a story.", "LONG_REPLY", "Short answer after the stop."]
    on_success: done
  done: {type: terminal}
""".replace("LONG_REPLY", " ".join(f"word{n:02d}" for n in range(1, 61)) + " THE-END")


def test_stop_during_a_reply_returns_to_input(awf_kernel: KernelSession) -> None:
    cell = awf_kernel.submit(awf_cell(STOP_WORKFLOW, "--out chat"))
    awf_kernel.wait_for_text("awf-assistant", "Ask me for a story.", STEP_SECONDS)
    awf_kernel.wait_for_input_box(STEP_SECONDS)
    awf_kernel.send_message("A long one, please.")
    awf_kernel.wait_for_text("awf-assistant", "word03", STEP_SECONDS)

    awf_kernel.press("stop")
    awf_kernel.pump_until(
        lambda: any("interrupted" in text.lower() for text in all_text(awf_kernel).splitlines()),
        STEP_SECONDS,
        "the reply marked interrupted",
    )
    awf_kernel.wait_for_input_box(STEP_SECONDS)
    awf_kernel.send_message("A short one?")
    awf_kernel.wait_for_text("awf-assistant", "Short answer after the stop.", STEP_SECONDS)
    awf_kernel.press("end")
    assert awf_kernel.wait_for_cell(cell, CELL_SECONDS).status == "ok"

    summary = run_summary(awf_kernel, "chat")
    assert summary["status"] == "completed"
    replies = [(text, cut) for role, text, cut in summary["turns"] if role == "assistant"]
    assert [cut for _, cut in replies] == [False, True, False], replies
    assert "word03" in replies[1][0] and "THE-END" not in replies[1][0], replies
    assert replies[2][0] == "Short answer after the stop."


@pytest.mark.parametrize(
    ("kernel_python", "flags"),
    [("6.29", ""), ("7.4", "--no-wait")],
    indirect=["kernel_python"],
    ids=["ipykernel-6.29-auto", "ipykernel-7.4-no-wait"],
)
def test_background_run_binds_the_handle_and_a_later_cell_awaits_it(
    awf_kernel: KernelSession, kernel_python: Any, flags: str
) -> None:
    outcome = awf_kernel.execute(awf_cell(CONVERSATION_WORKFLOW, flags), timeout=CELL_SECONDS)
    assert outcome.status == "ok", failure(awf_kernel, outcome)
    awf_kernel.wait_for_input_box(STEP_SECONDS)

    running = awf_kernel.execute("print(_awf.done(), _awf.run_id)")
    assert running.status == "ok", failure(awf_kernel, running)
    done, run_id = running.stdout.split()
    assert done == "False" and run_id

    early = awf_kernel.execute("_awf.result()")
    assert early.status == "error", "result() of a running run must fail clearly"
    assert early.reply["content"]["evalue"], early.reply["content"]

    shown = awf_kernel.execute("_awf")
    results = [m for m in shown.outputs if m["msg_type"] == "execute_result"]
    assert results, failure(awf_kernel, shown)
    bundle = results[0]["content"]["data"]
    assert "text/plain" in bundle and "text/html" in bundle, bundle.keys()

    awf_kernel.press("end")
    summary = run_summary(awf_kernel, "_awf")
    assert summary["status"] == "completed"
    assert assistant_turns(summary) == [FIRST_REPLY]
    final = awf_kernel.execute("print(_awf.done(), _awf.result().status)")
    assert final.stdout.split() == ["True", "completed"]


@pytest.mark.parametrize("kernel_python", ["6.29"], indirect=True, ids=["ipykernel-6.29"])
def test_cancel_a_background_run(awf_kernel: KernelSession) -> None:
    outcome = awf_kernel.execute(awf_cell(CONVERSATION_WORKFLOW, "--out chat"), CELL_SECONDS)
    assert outcome.status == "ok", failure(awf_kernel, outcome)
    awf_kernel.wait_for_input_box(STEP_SECONDS)

    cancel = awf_kernel.execute("chat.cancel()")
    assert cancel.status == "ok", failure(awf_kernel, cancel)
    awf_kernel.pump_until(
        lambda: any("cancelled" in text for text in awf_kernel.texts("awf-status")),
        STEP_SECONDS,
        "the status line to show cancelled",
    )
    check = awf_kernel.execute(
        "import asyncio\n"
        "for _ in range(100):\n"
        "    if chat.done():\n"
        "        break\n"
        "    await asyncio.sleep(0.05)\n"
        "print(chat.done())"
    )
    assert check.stdout.split() == ["True"], failure(awf_kernel, check)


# ---------------------------------------------------------------------------- mode 4


@pytest.mark.parametrize("headless", ["flag", "env", "frontend"])
def test_headless_conversation_does_not_wait(awf_kernel: KernelSession, headless: str) -> None:
    """Headless: `--no-interactive`, `AWF_NO_INTERACTIVE=1`, or a frontend that takes no
    input (nbclient, nbconvert --execute, papermill and nbval send `allow_stdin` false)."""
    if headless == "env":
        setup = awf_kernel.execute("%env AWF_NO_INTERACTIVE=1")
        assert setup.status == "ok", failure(awf_kernel, setup)
    flags = "--out chat --no-interactive" if headless == "flag" else "--out chat"

    outcome = awf_kernel.execute(
        awf_cell(CONVERSATION_WORKFLOW, flags),
        timeout=CELL_SECONDS,
        allow_stdin=headless != "frontend",
    )

    assert outcome.status == "ok", failure(awf_kernel, outcome)
    (panel,) = awf_kernel.find_widgets(css_class="awf-panel")
    shown = {w.model_name for w in awf_kernel.descendants(panel)}
    assert "HTMLModel" in shown, shown
    composers = awf_kernel.find_widgets(css_class="awf-controls")
    assert [w.state.get("interactive") for w in composers] == [False], "headless: no text box"
    summary = run_summary(awf_kernel, "chat")
    assert summary["status"] == "completed"
    assert assistant_turns(summary) == [FIRST_REPLY]


# ---------------------------------------------------------------------------- errors


def assert_short_error(kernel: KernelSession, outcome: ExecuteOutcome, needle: str) -> None:
    content = outcome.reply["content"]
    assert outcome.status == "error", failure(kernel, outcome)
    assert content["ename"] == "AwfCellError", content
    shown = "\n".join(content["traceback"])
    assert needle in shown, shown
    assert "Traceback (most recent call last)" not in shown, shown
    assert "File " not in shown, shown


def test_definition_error_fails_the_cell_with_one_paragraph(awf_kernel: KernelSession) -> None:
    broken = NO_INPUT_WORKFLOW.replace("on_success: summarize", "on_success: nowhere")
    outcome = awf_kernel.execute(awf_cell(broken), timeout=CELL_SECONDS)
    assert_short_error(awf_kernel, outcome, "nowhere")


def test_provider_error_fails_the_cell_and_shows_in_the_panel(awf_kernel: KernelSession) -> None:
    failing = NO_INPUT_WORKFLOW.replace(
        'replies: ["The **summary** is ready."]', 'replies: [{error: "the model is on fire"}]'
    )
    outcome = awf_kernel.execute(awf_cell(failing), timeout=CELL_SECONDS)
    # The error is stated once, in the panel; the cell's red line points at it (the
    # exception itself still carries the whole message, for code that catches it).
    assert_short_error(awf_kernel, outcome, "workflow quick failed (see the run above)")
    assert "the model is on fire" in outcome.reply["content"]["evalue"]
    # The panel's own copy, in the failed step (the summary does not repeat it).
    assert awf_kernel.texts("awf-error") == ["<p>scripted: the model is on fire</p>"]
    assert "on fire" not in "".join(awf_kernel.texts("awf-summary"))
    assert "the model is on fire" in all_text(awf_kernel), awf_kernel.describe()
    assert any("failed" in text for text in awf_kernel.texts("awf-status"))


# ---------------------------------------------------------------------------- awf_nb.arun()


@pytest.mark.parametrize("kernel_python", ["7.4"], indirect=True)
def test_arun_in_a_notebook_shows_the_panel_unless_told_not_to(
    awf_kernel: KernelSession, kernel_python: Any
) -> None:
    code = f"import awf_nb\nr = await awf_nb.arun({NO_INPUT_WORKFLOW!r})\nprint(r.status)"
    outcome = awf_kernel.execute(code, timeout=CELL_SECONDS)

    assert outcome.status == "ok", failure(awf_kernel, outcome)
    assert outcome.stdout.split() == ["completed"]
    assert len(awf_kernel.find_widgets(css_class="awf-panel")) == 1, awf_kernel.describe()
    assert any("completed" in text for text in awf_kernel.texts("awf-status"))

    hidden = f"r = await awf_nb.arun({NO_INPUT_WORKFLOW!r}, show=False)\nprint(r.status)"
    outcome = awf_kernel.execute(hidden, timeout=CELL_SECONDS)

    assert outcome.status == "ok", failure(awf_kernel, outcome)
    assert outcome.stdout.split() == ["completed"]
    assert len(awf_kernel.find_widgets(css_class="awf-panel")) == 1, "a second panel was drawn"
