"""Tool calls in the run panel, without a browser: the events of chat mode are fed in the
order the engine emits them, and Allow / Deny are clicked the way the browser sends clicks
(`_handle_msg`). The engine's side of a confirmation (emit `AwaitingConfirmation`, then
`await reader.confirm(question)`) is played by `ask`."""

from __future__ import annotations

import asyncio
from typing import Any

import ipywidgets as widgets

from awf_nb.engine import events as ev
from awf_nb.engine.ports import Confirmer
from awf_nb.frontends.notebook.panel import RunPanel
from awf_nb.frontends.notebook.panel_static import static_html
from awf_nb.frontends.notebook.reader import WidgetReader
from awf_nb.frontends.notebook.stream_view import StreamHTML
from tests.support.panel_widgets import click, find, press, send
from tests.support.waiting import until

ARGS = '{"command": "ls -la"}'


def panel_with_step(*, interactive: bool = True, flush_interval: float = 0.1) -> RunPanel:
    panel = RunPanel("tools", interactive=interactive, flush_interval=flush_interval)
    panel.emit(ev.RunStarted("r", "tools"))
    panel.emit(ev.StepStarted("r", "assist", "agent", mode="conversation"))
    return panel


def items(panel: RunPanel) -> list[tuple[str, str]]:
    """The step's section, top to bottom: (css class, what it shows)."""
    shown = []
    for child in panel._sections["assist"].body.children:
        kind = child._dom_classes[0]
        if isinstance(child, StreamHTML):
            shown.append((kind, child.value or child.html))
        elif isinstance(child, widgets.HTML):
            shown.append((kind, child.value))
        else:  # a tool call's box: its block
            shown.append((kind, child.children[0].value))
    return shown


def tool_boxes(panel: RunPanel) -> list[widgets.VBox]:
    body = panel._sections["assist"].body.children
    return [c for c in body if "awf-tool-call" in c._dom_classes]


def buttons(panel: RunPanel) -> list[str]:
    """The buttons of the panel's tool calls (the composer's are drawn by composer.js)."""
    return [b.description for b in find(panel.widget, widgets.Button)]


def started(call_id: str = "c1", name: str = "Bash", arguments: str = ARGS) -> ev.ToolCallStarted:
    return ev.ToolCallStarted("r", "assist", call_id, name, arguments)


def finished(call_id: str = "c1", name: str = "Bash", **fields: Any) -> ev.ToolCallFinished:
    fields.setdefault("result", "total 0")
    return ev.ToolCallFinished("r", "assist", call_id, name, **fields)


async def test_a_call_is_a_block_after_the_reply_text_that_led_to_it() -> None:
    # Streamed text waits for the next flush (a long way off here): the call must send it.
    panel = panel_with_step(flush_interval=60)
    panel.emit(ev.TurnStarted("r", "assist", 1))
    panel.emit(ev.AgentText("r", "assist", "Let me list the files."))
    reply_widget = panel._sections["assist"].body.children[-1]
    shown_when_the_block_came: list[str] = []
    panel._sections["assist"].body.observe(
        lambda _: shown_when_the_block_came.append(reply_widget.value or reply_widget.html),
        names="children",
    )

    panel.emit(started())

    # The reply's text was sent before the block came (not left for a later flush).
    assert shown_when_the_block_came == ["<p>Let me list the files.</p>\n"]
    (reply, block) = items(panel)
    assert reply[0] == "awf-assistant" and "Let me list the files." in reply[1]
    assert block[0] == "awf-tool-call"
    assert "<summary>⚙ <b>Bash</b>" in block[1] and "running…" in block[1]

    panel.emit(finished(result="total 0\na.txt\n", duration=0.12))

    (_, block) = items(panel)
    call = "({&quot;command&quot;: &quot;ls -la&quot;})"
    assert f"{call} → total 0 (+1 line) · 0.12 s</summary>" in block[1]
    assert "<pre>total 0\na.txt\n</pre>" in block[1]
    assert "running" not in block[1]


def test_text_before_and_after_calls_in_one_turn_event_is_never_said_twice() -> None:
    # Not the engine's order today (a round ends before its calls start), but a turn that
    # spans its calls must not repeat its text either.
    panel = panel_with_step()
    panel.emit(ev.TurnStarted("r", "assist", 1))
    panel.emit(ev.AgentText("r", "assist", "Looking."))
    panel.emit(started())
    panel.emit(finished())
    panel.emit(ev.AgentText("r", "assist", "There is nothing."))
    # The turn's whole text, as an engine may give it at the end of the turn.
    panel.emit(ev.TurnFinished("r", "assist", 1, 5, 0.3, text="Looking.There is nothing."))

    shown = items(panel)
    assert [kind for kind, _ in shown] == ["awf-assistant", "awf-tool-call", "awf-assistant"]
    assert "Looking." in shown[0][1] and "nothing" not in shown[0][1]
    assert "There is nothing." in shown[2][1] and "Looking" not in shown[2][1]


def test_a_reply_of_tool_calls_only_leaves_no_empty_bubble() -> None:
    # The engine's order: each round of a turn is a TurnStarted … TurnFinished of its own,
    # and the calls of a round come after its TurnFinished.
    panel = panel_with_step()
    panel.emit(ev.TurnStarted("r", "assist", 1))
    panel.emit(ev.TurnFinished("r", "assist", 1, 5, 0.3, text=""))
    panel.emit(started("c1", "Glob", '{"pattern": "*.py"}'))
    panel.emit(started("c2", "Grep", '{"pattern": "TODO"}'))
    panel.emit(finished("c2", "Grep", result="12 matches"))
    panel.emit(finished("c1", "Glob", result="a.py"))
    panel.emit(ev.TurnStarted("r", "assist", 1))
    panel.emit(ev.AgentText("r", "assist", "Done."))
    panel.emit(ev.TurnFinished("r", "assist", 1, 5, 0.3, text="Done."))

    shown = items(panel)
    assert [kind for kind, _ in shown] == ["awf-tool-call", "awf-tool-call", "awf-assistant"]
    # Calls running at once keep their own blocks, whatever order they end in.
    assert "<b>Glob</b>" in shown[0][1] and "→ a.py · " in shown[0][1]
    assert "<b>Grep</b>" in shown[1][1] and "→ 12 matches · " in shown[1][1]
    assert "(empty reply)" not in str(shown)


def test_an_empty_reply_without_calls_still_says_so() -> None:
    panel = panel_with_step()
    panel.emit(ev.TurnStarted("r", "assist", 1))
    panel.emit(ev.TurnFinished("r", "assist", 1, 5, 0.3, text=""))
    panel.emit(ev.AwaitingInput("r", "assist"))
    panel.emit(ev.UserMessage("r", "assist", "hello?", 2, ev.PERSON))
    panel.emit(ev.TurnStarted("r", "assist", 2))
    panel.emit(started())

    assert [kind for kind, _ in items(panel)] == ["awf-assistant", "awf-user", "awf-tool-call"]
    assert "(empty reply)" in items(panel)[0][1]


def test_errors_refusals_and_interruptions_are_said_plainly() -> None:
    panel = panel_with_step()
    for call_id in ("e", "r", "i"):
        panel.emit(started(call_id))
    panel.emit(finished("e", result="no such file", is_error=True))
    panel.emit(finished("r", result="refused by the user", outcome="refused"))
    panel.emit(finished("i", result="interrupted", outcome="interrupted", duration=2.0))

    error, refused, interrupted = (value for _, value in items(panel))
    assert '<span class="awf-tool-error">error: no such file</span>' in error
    assert '<pre class="awf-tool-error">no such file</pre>' in error
    assert '→ <span class="awf-tool-refused">refused</span></summary>' in refused
    assert '<span class="awf-tool-refused">interrupted</span> · 2.00 s' in interrupted


def test_everything_the_model_and_the_tool_wrote_is_escaped() -> None:
    panel = panel_with_step()

    panel.emit(started("x", "<img src=x onerror=alert(1)>", '{"q": "<script>alert(1)</script>"}'))
    panel.emit(finished("x", "<b>", result="<script>alert(2)</script>\x1b[31mred\x1b[0m"))

    ((_, block),) = items(panel)
    assert "<script>" not in block and "<img" not in block
    assert "&lt;script&gt;alert(1)" in block and "&lt;script&gt;alert(2)" in block
    assert "\x1b" not in block and "red" in block


async def ask(panel: RunPanel, reader: WidgetReader, call_id: str = "c1") -> bool | None:
    """The engine's side of a confirmation: the event, then the question."""
    panel.emit(ev.AwaitingConfirmation("r", "assist", call_id, "Bash", ARGS))
    return await reader.confirm(f"Allow Bash({ARGS})?")


def attached(panel: RunPanel, stop: Any = None) -> WidgetReader:
    reader = WidgetReader(asyncio.get_running_loop())
    panel.attach(reader=reader, stop=stop, loop=asyncio.get_running_loop())
    return reader


async def test_allow_answers_the_question_and_the_buttons_go() -> None:
    panel = panel_with_step()
    reader = attached(panel)
    assert isinstance(reader, Confirmer)
    panel.emit(started())

    question = asyncio.create_task(ask(panel, reader))
    await until(lambda: reader.confirming, "the question")
    assert buttons(panel) == ["Allow", "Deny"]
    assert "waiting for your answer" in items(panel)[0][1]
    assert "waiting for your answer" in panel.status.value
    (box,) = tool_boxes(panel)
    assert "awf-confirm" in box.children[1]._dom_classes

    click(find(box, widgets.Button)[0])

    assert await asyncio.wait_for(question, 5) is True
    assert buttons(panel) == []
    assert box.children == (box.children[0],)
    assert "allowed · running…" in items(panel)[0][1]
    assert "waiting" not in panel.status.value
    panel.emit(finished(result="a.txt"))
    assert "→ a.txt · " in items(panel)[0][1]


async def test_deny_refuses_and_a_second_click_does_nothing() -> None:
    panel = panel_with_step()
    reader = attached(panel)
    panel.emit(started())
    question = asyncio.create_task(ask(panel, reader))
    await until(lambda: reader.confirming, "the question")
    deny = find(tool_boxes(panel)[0], widgets.Button)[1]
    assert deny.description == "Deny"

    click(deny)
    click(deny)  # a double click, or a click that raced the buttons going away

    assert await asyncio.wait_for(question, 5) is False
    assert "denied" in items(panel)[0][1]
    # The extra click is not kept to answer the next question.
    panel.emit(finished(result="refused by the user", outcome="refused"))
    panel.emit(started("c2"))
    second = asyncio.create_task(ask(panel, reader, "c2"))
    await until(lambda: reader.confirming, "the second question")
    assert not second.done()
    click(find(tool_boxes(panel)[1], widgets.Button)[0])
    assert await asyncio.wait_for(second, 5) is True


async def test_stop_while_waiting_cancels_the_question_and_the_buttons_go() -> None:
    panel = panel_with_step()
    engine: list[asyncio.Task[Any]] = []

    def interrupt() -> str:  # what Runner.interrupt does to a turn: cancel its task
        engine[0].cancel()
        return "turn"

    reader = attached(panel, stop=interrupt)

    async def turn() -> None:
        panel.emit(started())
        try:
            await ask(panel, reader)
        except asyncio.CancelledError:
            panel.emit(finished(result="interrupted by the user", outcome="interrupted"))
            raise

    engine.append(asyncio.create_task(turn()))
    await until(lambda: reader.confirming, "the question")
    (box,) = tool_boxes(panel)
    allow = find(box, widgets.Button)[0]

    press(panel.input.composer, "stop")
    await asyncio.wait({engine[0]}, timeout=5)

    assert engine[0].cancelled() and not reader.confirming
    assert box.children == (box.children[0],)
    assert buttons(panel) == []
    assert "interrupted" in items(panel)[0][1]
    status = panel.status.value
    click(allow)  # a click on the button that just went: it changes nothing...
    handled = asyncio.Event()
    panel.on_loop(handled.set)  # queued after the click's own handling, which runs first
    await asyncio.wait_for(handled.wait(), 5)
    assert panel.status.value == status
    panel.emit(started("c2"))
    second = asyncio.create_task(ask(panel, reader, "c2"))
    await until(lambda: reader.confirming or second.done(), "the next question")
    assert not second.done()  # ...and answers no later question
    second.cancel()


async def test_without_a_text_box_nobody_is_shown_buttons() -> None:
    panel = panel_with_step(interactive=False)
    panel.emit(started())

    panel.emit(ev.AwaitingConfirmation("r", "assist", "c1", "Bash", ARGS))

    assert buttons(panel) == []
    assert "waiting for an answer" in items(panel)[0][1]


async def test_a_run_that_ends_while_asking_leaves_no_buttons() -> None:
    panel = panel_with_step()
    reader = attached(panel)
    panel.emit(started())
    question = asyncio.create_task(ask(panel, reader))
    await until(lambda: reader.confirming, "the question")
    question.cancel()

    panel.emit(ev.StepFinished("r", "assist", "cancelled", 1.0))

    assert "Allow" not in buttons(panel)
    assert "stopped" in items(panel)[0][1]


def test_the_saved_static_html_has_the_tool_blocks() -> None:
    panel = panel_with_step()
    panel.emit(ev.TurnStarted("r", "assist", 1))
    panel.emit(ev.AgentText("r", "assist", "Checking."))
    panel.emit(started("c1", "Read", '{"path": "a.txt"}'))
    panel.emit(ev.AwaitingConfirmation("r", "assist", "c1", "Read", '{"path": "a.txt"}'))
    panel.emit(finished("c1", "Read", result="<hello> & bye", duration=0.05))
    panel.emit(ev.TurnFinished("r", "assist", 1, 5, 0.3))

    saved = static_html(panel.widget).split("</style>", 1)[1]

    assert "Checking." in saved
    assert '<div class="widget-html awf-tool-block">' in saved
    assert "<summary>⚙ <b>Read</b>" in saved and "&lt;hello&gt; &amp; bye" in saved
    assert "Allow" not in saved and "Deny" not in saved
    assert saved.index("Checking.") < saved.index("<b>Read</b>")


# --- with the engine: a conversation whose model calls a tool that needs approval ----------

TOOLS_CHAT = """
name: tidy
states:
  initial: assist
  assist:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Say hello in a file."
    options:
      replies:
        - {text: "I will write it.", tool_calls: [{name: Bash, arguments: {command: "echo hi > hello.txt; echo written"}}]}
        - "Done: hello.txt says hi."
        - {tool_calls: [{name: Bash, arguments: {command: "rm hello.txt"}}]}
        - "Kept it."
    tools: {builtin: [Bash], confirm: [Bash]}
    on_success: done
  done: {type: terminal}
"""


async def test_allow_and_deny_through_the_engine_with_a_scripted_model(tmp_path: Any) -> None:
    from awf_nb.api import load
    from awf_nb.frontends.notebook.handle import RunHandle
    from awf_nb.providers.scripted import ScriptedProvider
    from awf_nb.runs import prepare_run
    from tests.support.panel_frontend import PanelFrontend

    workflow = load(TOOLS_CHAT)
    panel = RunPanel(workflow.name, interactive=True)
    reader = WidgetReader()
    model = ScriptedProvider()
    prepared = prepare_run(
        workflow,
        frontend=PanelFrontend(panel, reader),
        storage=False,
        cwd=tmp_path,
        providers=lambda name: model,
    )
    handle = RunHandle(prepared, name="tidy")
    handle.start()

    await until(lambda: "Allow" in buttons(panel), "the question about the first call")
    assert [kind for kind, _ in items(panel)] == ["awf-user", "awf-assistant", "awf-tool-call"]
    click(find(tool_boxes(panel)[0], widgets.Button)[0])  # Allow
    await until(lambda: panel.input.composer.can_send, "the prompt after the reply")
    assert (tmp_path / "hello.txt").read_text() == "hi\n"
    assert "→ written · " in items(panel)[2][1]
    assert "hello.txt says hi" in items(panel)[3][1]

    send(panel.input, "now remove it")
    await until(lambda: "Allow" in buttons(panel), "the question about the second call")
    click(find(tool_boxes(panel)[1], widgets.Button)[1])  # Deny
    await until(lambda: panel.input.composer.can_send, "the prompt after the reply")
    press(panel.input.composer, "end")
    result = await asyncio.wait_for(handle.wait(), 30)

    assert result.ok, result.error
    assert (tmp_path / "hello.txt").exists()
    shown = items(panel)
    assert [kind for kind, _ in shown] == [
        "awf-user", "awf-assistant", "awf-tool-call", "awf-assistant",
        "awf-user", "awf-tool-call", "awf-assistant",
    ]  # fmt: skip
    assert '<span class="awf-tool-refused">refused</span>' in shown[5][1]
    assert "Allow" not in buttons(panel) and "Deny" not in buttons(panel)
    assert "refused by the user" in static_html(panel.widget)


SLOW_TOOL = """
name: slow
states:
  initial: assist
  assist:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Build it."
    options:
      replies:
        - {text: "Building.", tool_calls: [{name: Bash, arguments: {command: "touch started; sleep 60"}}]}
        - "Stopped."
    tools: {builtin: [Bash]}
    on_success: done
  done: {type: terminal}
"""


async def test_stop_during_a_running_call_interrupts_it_and_opens_the_prompt(
    tmp_path: Any,
) -> None:
    from awf_nb.api import load
    from awf_nb.frontends.notebook.handle import RunHandle
    from awf_nb.providers.scripted import ScriptedProvider
    from awf_nb.runs import prepare_run
    from tests.support.panel_frontend import PanelFrontend

    workflow = load(SLOW_TOOL)
    panel = RunPanel(workflow.name, interactive=True)
    model = ScriptedProvider()
    reader = WidgetReader()
    prepared = prepare_run(
        workflow,
        frontend=PanelFrontend(panel, reader),
        storage=False,
        cwd=tmp_path,
        providers=lambda name: model,
    )
    handle = RunHandle(prepared, name="slow")
    handle.start()
    await until(lambda: (tmp_path / "started").exists(), "the command to start")
    assert "running…" in items(panel)[-1][1]

    press(panel.input.composer, "stop")
    await until(lambda: panel.input.composer.can_send, "the prompt after Stop")

    assert not handle.done()
    assert '<span class="awf-tool-refused">interrupted</span>' in items(panel)[-1][1]
    press(panel.input.composer, "end")
    result = await asyncio.wait_for(handle.wait(), 30)
    assert result.ok, result.error
