"""Tool calls in a terminal: one dim line per call when it finishes, and the `[y/N]`
question that allows or refuses a call (the stdin reader's and the scripted reader's
`confirm`)."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterator
from typing import TextIO

import pytest

from awf_nb.engine import events as ev
from awf_nb.engine.ports import Confirmer
from awf_nb.frontends.terminal import TerminalReader, TerminalSink
from awf_nb.frontends.tool_calls import shorten_arguments, shorten_result
from awf_nb.runs.replies import ScriptedReader
from tests.support.screen import Screen, Stream, TtyStream

# --- the line of a finished call -----------------------------------------------------------


def sink_on(screen: Screen, mode: str = "streaming", *, tty: bool = False) -> TerminalSink:
    kind = TtyStream if tty else Stream
    out, err = kind(screen, "out"), kind(screen, "err")
    return TerminalSink(mode, out=out, err=err)  # type: ignore[arg-type]


def call(sink: TerminalSink, name: str, arguments: str, **finished: object) -> None:
    sink.emit(ev.ToolCallStarted("r", "a", "c1", name, arguments))
    sink.emit(ev.ToolCallFinished("r", "a", "c1", name, **finished))  # type: ignore[arg-type]


def flushed(screen: Screen) -> str:
    return "".join(screen.shown)


def test_a_finished_call_is_one_line_with_its_arguments_result_and_duration() -> None:
    screen = Screen()
    sink = sink_on(screen)

    call(sink, "Grep", '{"pattern": "TODO"}', result="12 matches\n", duration=0.12)

    assert screen.shown == ['out:⚙ Grep({"pattern": "TODO"}) → 12 matches · 0.12 s\n']


def test_the_line_is_written_when_the_call_finishes_not_when_it_starts() -> None:
    screen = Screen()
    sink = sink_on(screen)

    sink.emit(ev.ToolCallStarted("r", "a", "c1", "Bash", '{"command": "sleep 5"}'))
    sink.emit(ev.ToolCallStarted("r", "a", "c2", "Glob", '{"pattern": "*.py"}'))
    assert screen.shown == []
    sink.emit(ev.ToolCallFinished("r", "a", "c2", "Glob", "a.py\nb.py", duration=0.01))
    sink.emit(ev.ToolCallFinished("r", "a", "c1", "Bash", "", duration=5.0))

    # Calls running at once: each line is whole and carries its own arguments.
    assert screen.shown == [
        'out:⚙ Glob({"pattern": "*.py"}) → a.py (+1 line) · 0.01 s\n',
        'out:⚙ Bash({"command": "sleep 5"}) → (no output) · 5.00 s\n',
    ]


def test_long_arguments_and_results_are_shortened_to_one_line() -> None:
    screen = Screen()
    sink = sink_on(screen)
    content = "line one\n" + "x" * 500
    arguments = '{\n  "path": "notes.txt",\n  "content": "' + "y" * 300 + '"\n}'

    call(sink, "Write", arguments, result=content + "\nlast\n", duration=0.2)

    (line,) = flushed(screen).removeprefix("out:").splitlines()
    assert line.startswith('⚙ Write({"path": "notes.txt", "content": "yyy')
    assert "…) → line one (+2 lines) · 0.20 s" in line
    assert len(line) < 140


def test_an_error_a_refusal_and_an_interruption_are_said_plainly() -> None:
    screen = Screen()
    sink = sink_on(screen)

    call(sink, "Read", '{"path": "nope"}', result="No such file: nope", is_error=True)
    call(sink, "Bash", '{"command": "rm -r x"}', result="refused by the user", outcome="refused")
    call(sink, "Bash", '{"command": "make"}', result="", outcome="interrupted", duration=2.5)
    call(sink, "Bash", '{"command": "make"}', result="", outcome="interrupted")

    lines = flushed(screen).replace("out:", "").splitlines()
    assert lines == [
        '⚙ Read({"path": "nope"}) → error: No such file: nope · 0.00 s',
        '⚙ Bash({"command": "rm -r x"}) → refused',
        '⚙ Bash({"command": "make"}) → interrupted · 2.50 s',
        '⚙ Bash({"command": "make"}) → interrupted',  # cut short before it had a duration
    ]


def test_a_call_without_arguments_reads_like_a_call() -> None:
    screen = Screen()
    sink = sink_on(screen)

    call(sink, "list_notes", "{}", result="none yet")

    assert screen.shown == ["out:⚙ list_notes() → none yet · 0.00 s\n"]


def test_escape_sequences_from_the_model_and_the_tool_are_made_harmless() -> None:
    screen = Screen()
    sink = sink_on(screen)

    # The C1 CSI arrives escaped in JSON (`\u009b`) and comes back raw when decoded.
    call(
        sink,
        "Bash\x1b]0;pwned\x07",
        '{"command": "\\u009b2J echo \\u001b[8m"}',
        result="\x1b[2Jcleared\rover",
        is_error=True,
    )

    shown = flushed(screen)
    assert "\x1b" not in shown and "\x9b" not in shown and "\x07" not in shown
    assert "\r" not in shown
    assert "Bash␛]0;pwned(" in shown and "error: ␛[2Jcleared (+1 line)" in shown


def test_the_line_follows_the_streamed_reply_text_on_a_fresh_line() -> None:
    screen = Screen()
    sink = sink_on(screen)

    async def scenario() -> None:
        sink.emit(ev.AgentText("r", "a", "Let me look"))
        call(sink, "Glob", '{"pattern": "*"}', result="a.py")

    asyncio.run(scenario())

    shown = flushed(screen).replace("out:", "")
    assert shown == 'Let me look\n⚙ Glob({"pattern": "*"}) → a.py · 0.00 s\n'


def test_a_confirmation_starts_on_a_fresh_line_after_the_streamed_text() -> None:
    screen = Screen()
    sink = sink_on(screen)

    async def scenario() -> None:
        sink.emit(ev.AgentText("r", "a", "I will run it"))
        sink.emit(ev.ToolCallStarted("r", "a", "c1", "Bash", '{"command": "ls"}'))
        sink.emit(ev.AwaitingConfirmation("r", "a", "c1", "Bash", '{"command": "ls"}'))

    asyncio.run(scenario())

    assert flushed(screen).replace("out:", "") == "I will run it\n"


def test_buffered_mode_writes_the_line_at_once_and_silent_mode_not_at_all() -> None:
    buffered, silent = Screen(), Screen()

    call(sink_on(buffered, "buffered"), "Glob", "{}", result="a.py")
    call(sink_on(silent, "silent"), "Glob", "{}", result="a.py")

    assert buffered.shown == ["out:⚙ Glob() → a.py · 0.00 s\n"]
    assert silent.shown == []


def test_a_partner_agents_call_carries_its_name() -> None:
    screen = Screen()
    sink = sink_on(screen)

    sink.emit(ev.ToolCallStarted("r", "a", "c1", "Read", "{}", speaker="reviewer"))
    sink.emit(ev.ToolCallFinished("r", "a", "c1", "Read", "ok", speaker="reviewer"))

    assert screen.shown == ["out:⚙ reviewer: Read() → ok · 0.00 s\n"]


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_the_line_is_dim_and_an_error_red_on_a_terminal_unless_no_color(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, coloured: bool
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    if no_color is not None:
        monkeypatch.setenv("NO_COLOR", no_color)
    screen = Screen()
    sink = sink_on(screen, tty=True)

    call(sink, "Read", "{}", result="gone", is_error=True)

    shown = flushed(screen)
    assert ("\x1b[2m⚙ " in shown) is coloured
    assert ("\x1b[31merror: gone\x1b[0m" in shown) is coloured
    assert "error: gone" in shown


def test_ctrl_c_during_a_tool_call_says_the_call_was_interrupted() -> None:
    screen = Screen()
    sink = sink_on(screen)

    sink.emit(ev.ToolCallStarted("r", "a", "c1", "Bash", '{"command": "sleep 9"}'))
    sink.interrupted_turn()
    sink.emit(ev.ToolCallFinished("r", "a", "c1", "Bash", "", outcome="interrupted"))
    sink.interrupted_turn()  # a reply streaming afterwards

    said = flushed(screen)
    assert said.index("tool call interrupted") < said.index("→ interrupted")
    assert said.rstrip().endswith("^C — reply interrupted")


def test_previews() -> None:
    assert shorten_arguments("") == "" and shorten_arguments(" {} ") == ""
    assert shorten_arguments("{not json\n at all") == "{not json at all"
    assert shorten_arguments('{"a":1}') == '{"a": 1}'
    assert shorten_result("\n\n") == "(no output)"
    assert shorten_result("\n  first  \n\nsecond\nthird") == "first (+2 lines)"


# --- the stdin reader's [y/N] question -------------------------------------------------------


def piped_reader(lines: str) -> tuple[TerminalReader, io.StringIO]:
    shown = io.StringIO()
    return TerminalReader(io.StringIO(lines), prompt_out=shown), shown


def test_the_readers_are_confirmers() -> None:
    assert isinstance(TerminalReader(io.StringIO()), Confirmer)
    assert isinstance(ScriptedReader(), Confirmer)


@pytest.mark.parametrize(
    ("typed", "answer"),
    [("y\n", True), ("YES\n", True), (" yes \n", True), ("n\n", False), ("\n", False)],
)
async def test_y_or_yes_allows_anything_else_refuses(typed: str, answer: bool) -> None:
    reader, shown = piped_reader(typed)

    assert await reader.confirm('Allow Bash({"command": "ls"})?') is answer
    # From a pipe nobody saw the question: it goes on record with the answer read.
    answered = typed.removesuffix("\n")
    assert shown.getvalue() == f'Allow Bash({{"command": "ls"}})? [y/N] {answered}\n'


async def test_end_of_input_is_no_answer() -> None:
    reader, _ = piped_reader("")

    assert await reader.confirm("Allow Write({})?") is None


async def test_the_question_is_made_safe() -> None:
    reader, shown = piped_reader("n\n")

    await reader.confirm("Allow X(\x1b[2J)?")

    assert "\x1b" not in shown.getvalue() and "␛[2J" in shown.getvalue()


async def test_questions_and_messages_take_their_lines_in_turn() -> None:
    reader, _ = piped_reader("hello\ny\nbye\n")

    assert await reader.read("> ") == "hello"
    assert await reader.confirm("Allow Read({})?") is True
    assert await reader.read("> ") == "bye"


@pytest.fixture
def pipe() -> Iterator[tuple[TextIO, TextIO]]:
    """stdin that a test types into when it wants: the reader blocks until then."""
    read_fd, write_fd = os.pipe()
    reading = os.fdopen(read_fd, "r", encoding="utf-8")
    writing = os.fdopen(write_fd, "w", encoding="utf-8")
    yield reading, writing
    writing.close()
    reading.close()


async def test_a_cancelled_question_is_abandoned_and_the_next_line_kept_for_a_message(
    pipe: tuple[TextIO, TextIO],
) -> None:
    stdin, typing = pipe
    reader = TerminalReader(stdin, prompt_out=io.StringIO())

    question = asyncio.create_task(reader.confirm("Allow Bash({})?"))
    await asyncio.sleep(0)  # the question is asked: its read is made
    question.cancel()  # Ctrl-C at the question, like at the `> ` prompt
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(question, 5)

    typing.write("what now?\n")
    typing.flush()
    assert await asyncio.wait_for(reader.read("> "), 5) == "what now?"


async def test_a_line_typed_for_an_abandoned_prompt_never_answers_a_question(
    pipe: tuple[TextIO, TextIO],
) -> None:
    """Whenever the reading thread gets the line (before the question, or after it is
    asked), it came from the abandoned prompt's read: never the answer. No pause in
    between: the order of thread and question is left to chance, and must not matter."""
    stdin, typing = pipe
    reader = TerminalReader(stdin, prompt_out=io.StringIO())
    message = asyncio.create_task(reader.read("> "))
    await asyncio.sleep(0)
    message.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(message, 5)
    typing.write("yes\n")  # meant as a message
    typing.flush()

    question = asyncio.create_task(reader.confirm("Allow Bash({})?"))
    typing.write("n\n")  # the answer to the question on the screen
    typing.flush()

    assert await asyncio.wait_for(question, 5) is False
    assert await asyncio.wait_for(reader.read("> "), 5) == "yes"


async def test_questions_asked_at_once_take_turns(pipe: tuple[TextIO, TextIO]) -> None:
    """Two branches of a parallel step ask at the same time: each question gets its own
    line, in the order they were asked (one would wait forever otherwise)."""
    stdin, typing = pipe
    shown = io.StringIO()
    reader = TerminalReader(stdin, prompt_out=shown)
    first = asyncio.create_task(reader.confirm("Allow A({})?"))
    second = asyncio.create_task(reader.confirm("Allow B({})?"))
    typing.write("y\nn\n")
    typing.flush()

    assert await asyncio.wait_for(asyncio.gather(first, second), 5) == [True, False]
    assert shown.getvalue() == "Allow A({})? [y/N] y\nAllow B({})? [y/N] n\n"


# --- the scripted reader (`--reply`) -------------------------------------------------------


async def test_scripted_replies_answer_questions_in_order() -> None:
    reader = ScriptedReader(["y", "Allow", "no", "a message", "YES"])

    assert await reader.confirm("Allow A({})?") is True
    assert await reader.confirm("Allow B({})?") is True
    assert await reader.confirm("Allow C({})?") is False
    assert await reader.read("> ") == "a message"
    assert await reader.confirm("Allow D({})?") is True
    assert await reader.confirm("Allow E({})?") is None  # no replies left
    assert reader.prompts[:2] == ["Allow A({})?", "Allow B({})?"]


async def test_a_scripted_question_can_be_cancelled() -> None:
    reader = ScriptedReader(["y"], delay=10)
    question = asyncio.create_task(reader.confirm("Allow A({})?"))
    await asyncio.sleep(0)

    question.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(question, 5)
