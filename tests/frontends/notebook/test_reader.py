"""The widget `InputReader`: answers from any thread wake the run's loop at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from awf_nb.engine.ports import Confirmer, InputReader
from awf_nb.frontends.notebook.reader import WidgetReader
from tests.support.waiting import until


def test_it_is_an_input_reader() -> None:
    assert isinstance(WidgetReader(), InputReader)


async def test_submit_answers_the_pending_read() -> None:
    reader = WidgetReader()
    read = asyncio.create_task(reader.read("> "))
    await asyncio.sleep(0)
    assert reader.waiting

    reader.submit("hello")

    assert await asyncio.wait_for(read, 1) == "hello"
    assert not reader.waiting
    assert reader.prompts == ["> "]


async def test_a_submit_from_another_thread_wakes_the_idle_loop_promptly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = WidgetReader()
    read = asyncio.create_task(reader.read("> "))
    await asyncio.sleep(0)
    assert reader.waiting
    # The positive signal that the loop is idle: it has entered select() with the read
    # pending (and nothing else to do).
    idle = threading.Event()
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    select = selector.select

    def watched_select(timeout: float | None = None) -> object:
        if reader.waiting:
            idle.set()
        return select(timeout)

    monkeypatch.setattr(selector, "select", watched_select)
    submitted = []

    def click() -> None:
        assert idle.wait(30), "the loop never went idle"
        submitted.append(time.monotonic())
        reader.submit("from a subshell thread")

    # The hang guard lives in a thread of its own: a timer on the loop would wake the loop
    # itself, and the read would finish even if the submit had not woken it.
    finished, woken_by_the_guard = threading.Event(), threading.Event()
    loop = asyncio.get_running_loop()

    def hang_guard() -> None:
        if not finished.wait(30):
            woken_by_the_guard.set()
            loop.call_soon_threadsafe(read.cancel)

    threading.Thread(target=hang_guard, daemon=True).start()
    threading.Thread(target=click, daemon=True).start()
    try:
        text = await read
    except asyncio.CancelledError:
        text = None
    finally:
        finished.set()

    assert not woken_by_the_guard.is_set(), "the submit did not wake the idle loop"
    assert text == "from a subshell thread"
    assert submitted, "the answer came from the other thread"


async def test_messages_sent_before_the_read_are_kept_in_order() -> None:
    reader = WidgetReader(asyncio.get_running_loop())
    reader.submit("one")
    reader.submit("two")
    await asyncio.sleep(0)

    assert await reader.read("> ") == "one"
    assert await reader.read("> ") == "two"


async def test_end_is_end_of_input() -> None:
    reader = WidgetReader()
    read = asyncio.create_task(reader.read("> "))
    await asyncio.sleep(0)

    reader.end()

    assert await asyncio.wait_for(read, 1) is None


async def test_a_cancelled_read_is_abandoned_and_the_next_answer_kept() -> None:
    reader = WidgetReader()
    read = asyncio.create_task(reader.read("> "))
    await asyncio.sleep(0)

    read.cancel()
    with pytest.raises(asyncio.CancelledError):
        await read
    assert not reader.waiting

    reader.submit("later")
    await asyncio.sleep(0)
    assert await asyncio.wait_for(reader.read("> "), 1) == "later"


def test_submit_after_the_loop_closed_is_harmless() -> None:
    reader = WidgetReader()
    loop = asyncio.new_event_loop()
    reader.bind(loop)
    loop.close()

    reader.submit("too late")  # no exception: the run is over


def test_submit_before_any_loop_is_queued() -> None:
    reader = WidgetReader()
    reader.submit("early")

    assert asyncio.run(reader.read("> ")) == "early"


# --- Allow / Deny: the reader as a `Confirmer` -----------------------------------------------


def test_it_is_a_confirmer() -> None:
    assert isinstance(WidgetReader(), Confirmer)


async def test_an_answer_from_another_thread_answers_the_question() -> None:
    reader = WidgetReader()
    question = asyncio.create_task(reader.confirm("Allow Bash({})?"))
    await asyncio.sleep(0)
    assert reader.confirming and not reader.waiting

    threading.Thread(target=reader.answer, args=(False,), daemon=True).start()

    assert await asyncio.wait_for(question, 30) is False
    assert not reader.confirming
    assert reader.questions == ["Allow Bash({})?"]


async def test_messages_and_answers_never_mix() -> None:
    reader = WidgetReader(asyncio.get_running_loop())
    reader.submit("y")  # a message typed early: for the next read, not for a question
    question = asyncio.create_task(reader.confirm("Allow Bash({})?"))
    # The question either waits for its buttons or (wrongly) took the message: whichever
    # comes first decides, without waiting for a time.
    await until(lambda: reader.confirming or question.done(), "the question to settle")
    assert not question.done()

    reader.answer(True)

    assert await asyncio.wait_for(question, 1) is True
    assert await asyncio.wait_for(reader.read("> "), 1) == "y"


async def test_a_cancelled_question_is_abandoned_and_a_late_answer_dropped() -> None:
    reader = WidgetReader()
    question = asyncio.create_task(reader.confirm("Allow Bash({})?"))
    await asyncio.sleep(0)

    question.cancel()
    with pytest.raises(asyncio.CancelledError):
        await question
    assert not reader.confirming
    reader.answer(True)  # clicked as Stop cancelled the question
    await asyncio.sleep(0)

    reader.new_question()  # the panel shows the next question's buttons
    second = asyncio.create_task(reader.confirm("Allow Write({})?"))
    await until(lambda: reader.confirming or second.done(), "the second question to settle")
    assert not second.done()  # the late answer to the cancelled one did not answer it
    reader.answer(False)
    assert await asyncio.wait_for(second, 1) is False
