"""The notebook's `InputReader`: conversation messages typed into the run panel.

A read waits on a future that `submit` resolves. Called on the run's loop (the panel's
composer acts there, panel_controls.py), `submit` resolves it at once: the run has the text
on the loop's next turn, with no timer in between. Called from another thread (ipykernel 7
can dispatch comm messages on a subshell thread), a future resolved there with a plain
`set_result` does not wake the loop until something else does (measured: the run stalls
until another cell executes), so the delivery is handed to the loop captured at the start
of the run with `loop.call_soon_threadsafe`, which also wakes it up.

Messages submitted while no read is pending (a click that raced the reply) are queued and
answer the next read, in order; `None` means "end of conversation", like an empty line.

It is also a `Confirmer`: `confirm` waits for the Allow / Deny buttons of a tool call
(`answer`). Answers and messages never mix: a message never answers a question.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class WidgetReader:
    """An `InputReader` fed by `submit(text)` from widget callbacks on any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._queued: deque[str | None] = deque()
        self._pending: asyncio.Future[str | None] | None = None
        self.prompts: list[str] = []  # what the run asked for, for tests and the panel
        self._question: asyncio.Future[bool | None] | None = None
        # An answer clicked just before `confirm` started waiting for it (the panel only
        # shows the buttons of the call being asked about, so it is that call's answer).
        self._early_answer: list[bool | None] = []
        self.questions: list[str] = []  # the tool calls asked about, for tests

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Capture the run's loop (done at the start of the run, on that loop)."""
        self._loop = loop

    @property
    def queued(self) -> tuple[str | None, ...]:
        """Messages submitted while no read was pending: they answer the next reads."""
        return tuple(self._queued)

    @property
    def waiting(self) -> bool:
        """True while the run waits for a message."""
        return self._pending is not None and not self._pending.done()

    async def read(self, prompt: str) -> str | None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self.prompts.append(prompt)
        if self._queued:
            await asyncio.sleep(0)  # a real suspension point, so cancellation can land here
            return self._queued.popleft()
        future: asyncio.Future[str | None] = self._loop.create_future()
        self._pending = future
        try:
            return await future
        finally:
            if self._pending is future:
                self._pending = None

    def submit(self, text: str | None) -> None:
        """Answer the pending read (or the next one) with `text`; None ends the conversation.

        Safe to call from any thread.
        """
        loop = self._loop
        if loop is None:  # no read has started yet: nothing can be waiting
            self._queued.append(text)
            return
        if _running_loop() is loop:  # on the run's loop (the composer acts there): at once
            self._deliver(text)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
            loop.call_soon_threadsafe(self._deliver, text)

    @property
    def confirming(self) -> bool:
        """True while the run waits for Allow or Deny."""
        return self._question is not None and not self._question.done()

    async def confirm(self, question: str) -> bool | None:
        """Wait for Allow (True) or Deny (False) on the tool call `question` is about."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self.questions.append(question)
        if self._early_answer:
            await asyncio.sleep(0)  # a real suspension point, so cancellation can land here
            return self._early_answer.pop()
        future: asyncio.Future[bool | None] = self._loop.create_future()
        self._question = future
        try:
            return await future
        finally:
            if self._question is future:
                self._question = None

    def answer(self, allowed: bool | None) -> None:
        """Answer the pending question (the Allow / Deny buttons). Safe from any thread."""
        loop = self._loop
        if loop is None:
            self._early_answer[:] = [allowed]
            return
        if _running_loop() is loop:  # the panel's buttons act on the loop: answer at once
            self._deliver_answer(allowed)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
            loop.call_soon_threadsafe(self._deliver_answer, allowed)

    def new_question(self) -> None:
        """A new question is about to be asked (its buttons are not shown yet): an answer
        left over from an earlier one (clicked as Stop cancelled it) must not answer it."""
        self._early_answer.clear()

    def _deliver_answer(self, allowed: bool | None) -> None:
        future = self._question
        if future is not None and not future.done():
            self._question = None
            future.set_result(allowed)
        else:
            self._early_answer[:] = [allowed]

    def end(self) -> None:
        """End the conversation (the End conversation button)."""
        self.submit(None)

    def _deliver(self, text: str | None) -> None:
        future = self._pending
        if future is not None and not future.done():
            self._pending = None
            future.set_result(text)
        else:
            self._queued.append(text)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
