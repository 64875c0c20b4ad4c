"""The turns of an agent step (`AgentSession`); the step itself is agent_step.py.

`AgentSession` runs turns for one agent step: it builds the `TurnRequest` (history for
history-based providers, the session id for session-id ones, the system prompt only where
it must be sent), streams the reply to the frontend through the secret masker, holds it
to its bounds (reply_limits.py: bytes, tool calls, what a server reports), retries
transient provider errors while nothing has been streamed yet, records turns in the step's
conversation state and the run's transcript, and counts tokens (real usage or the len/4
estimate). Ctrl-C / Stop during a reply interrupts that turn only: the partial reply is
kept, marked interrupted. With tools, a reply's rounds of tool calls (tool_calls.py) are
part of its turn. A partner agent (partner.py) is an `AgentSession` speaking for the
partner.

Why one module: a turn is one sequence (request → stream → bounds → retry → record →
checkpoint) whose steps share the turn's progress (`_Progress`: what was streamed, the
session id, the tool rounds so far); the parts that stand on their own already live
beside it (reply_limits.py, tool_calls.py, tokens.py, partner.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from awf_nb.engine import events as ev
from awf_nb.engine.context import json_response
from awf_nb.engine.ports import (
    Final,
    McpServerSpec,
    Message,
    ModelLoad,
    Notice,
    Provider,
    SessionId,
    TextDelta,
    ToolCall,
    ToolSet,
    ToolSpec,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.engine.reply_limits import (
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MAX_TOOL_CALLS,
    MAX_JSON_DEPTH,
    json_too_deep,
    limit_option,
    reply_bytes_message,
    text_bytes,
    token_count,
    tool_calls_message,
)
from awf_nb.engine.state import ConversationState, StepState, Turn
from awf_nb.engine.summary import format_duration, format_limit
from awf_nb.engine.tokens import estimate_tokens, tokens_for_chars
from awf_nb.errors import ExecutionError, ProviderError
from awf_nb.workflow.model import AgentStep

if TYPE_CHECKING:
    from awf_nb.engine.runtime import StepRun

TRANSIENT_ATTEMPTS = 3  # provider-level retries of 429/5xx/connect errors before any token
MAX_TRANSIENT_DELAY = 30.0


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """`text` with lone surrogates (a provider's JSON `"\\ud83d"` without its pair) replaced
    by U+FFFD: they cannot be written as UTF-8 to a terminal, a file or a notebook."""
    return _LONE_SURROGATE.sub("\ufffd", text)


class TurnTimeout(ExecutionError):
    """An agent turn ran past the step's `timeout`."""


@dataclass
class _Progress:
    parts: list[str] = field(default_factory=list)
    streamed: bool = False
    final: str | None = None
    cut: bool = False  # the provider cut the reply at max_tokens
    usage: Usage | None = None
    session_id: str = ""
    truncated_turns: int = 0
    size: int = 0  # bytes of the reply so far: text, tool calls, tools a CLI ran
    calls: int = 0  # tool calls asked for, or tools an agent CLI ran
    tool_calls: list[ToolCall] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.final if self.final is not None else "".join(self.parts)


@dataclass
class Reply:
    text: str
    interrupted: bool = False
    tokens: int = 0  # what the reply cost: input + output tokens (see `_finish_turn`)
    duration: float = 0.0
    tokens_estimated: bool = False
    # the agent called the `end_tool` it was offered (a simulated user ending the talk)
    ended: bool = False


class AgentSession:
    """Turns of one agent step against one provider."""

    def __init__(
        self,
        run: StepRun,
        step: AgentStep,
        st: StepState,
        provider_name: str,
        provider: Provider,
        system_prompt: str | None,
        options: dict[str, Any],
        conversation: ConversationState | None,
        inherited_replies: int = 0,
        *,
        speaker: str = "",
        tools: ToolSet | None = None,
        mcp_servers: list[McpServerSpec] | None = None,
        end_tool: ToolSpec | None = None,
    ) -> None:
        self.run = run
        # A tool offered only as a signal (a simulated user's `end_conversation`): a call
        # of it is never run, it ends the reply with `Reply.ended` set.
        self.end_tool = end_tool
        self.mcp_servers = mcp_servers or []  # agent CLIs: the step's tools, served (mcp_proxy)
        self.tools = tools  # chat mode: the tools the model may call (None: it only talks)
        self.max_rounds = step.tools.max_rounds if step.tools is not None else 0
        # "" for the step's own agent; a partner agent's name when this session speaks for
        # the partner (engine/partner.py): its replies are then messages to the step's agent,
        # never the step's Output, and its list of messages lives in memory only (the step's
        # conversation records what it said).
        self.speaker = speaker
        self.step = step
        self.st = st
        self.provider_name = provider_name
        self.provider = provider
        if system_prompt is None and conversation is not None:
            # Continuing another step's conversation without a system prompt of its own:
            # the conversation keeps the one it started with (a replayed session too).
            system_prompt = next(
                (t.content for t in conversation.turns if t.role == "system"), None
            )
        self.system_prompt = system_prompt
        # The engine bounds every provider's reply (a server or CLI that never stops must
        # not take the machine's memory); these options are the engine's, not the provider's.
        options = dict(options)
        self.max_reply_bytes = limit_option(
            options, "max_reply_bytes", DEFAULT_MAX_REPLY_BYTES, step.name
        )
        self.max_tool_calls = limit_option(
            options, "max_tool_calls", DEFAULT_MAX_TOOL_CALLS, step.name
        )
        self.options = options
        self.conv = conversation
        self.live = step.mode == "conversation"
        # The live turns began since the last checkpoint: the state file does not point at
        # them in the transcript yet (see `_finish_turn`).
        self._live_unsaved = False
        self._inherited_replies = inherited_replies
        # The history sent to history-based providers: every finished exchange, kept
        # incrementally so a turn costs the same at turn 1,000 as at turn 10. A user
        # message left unanswered by a crash is not part of it (it is sent again).
        turns = [t for t in conversation.turns if t.role != "system"] if conversation else []
        if turns and turns[-1].role == "user":
            turns.pop()
        self._dialogue = [as_message(t) for t in turns if t.reached_agent]
        self._dialogue_chars = sum(len(m.content) for m in self._dialogue)
        self._progress: _Progress | None = None  # the turn being streamed
        # The reply a provider error or a timeout cut short (kept, marked interrupted).
        self.cut_short: Reply | None = None
        self._deadline: asyncio.Timeout | None = None  # the turn's, while one runs

    def continue_history(self, history: list[Message], chars: int) -> None:
        """Start from this message list (a partner's, rebuilt from the step's turns)."""
        self._dialogue, self._dialogue_chars = history, chars

    # --- state helpers ----------------------------------------------------------------------

    @property
    def replies(self) -> int:
        """Assistant replies this step has produced (restored ones included)."""
        if self.conv is None:
            return 0
        return self.conv.total_turns - self._inherited_replies

    def pending_user_message(self) -> str | None:
        """After a crash: a user message that was sent but never answered (a partner's
        message that never reached the agent is no such message)."""
        turns = self.conv.turns if self.conv else []
        last = turns[-1] if turns else None
        return last.content if last and last.role == "user" and last.reached_agent else None

    def _record(self, turn: Turn) -> None:
        conv = self.conv
        if self.speaker:
            if conv is not None:
                conv.turns.append(turn)
            return
        line = self.run.append_turn(self.step.name, turn)
        if conv is None:
            return
        conv.turns.append(turn)
        if self.live and line >= 0 and conv.live_from is None:
            conv.live_from = len(conv.turns) - 1
            conv.transcript_line = line
            self._live_unsaved = True

    # --- one turn -----------------------------------------------------------------------------

    def record_message(self, message: str, speaker: str = "", *, duration: float = 0.0) -> str:
        """Record a message to this agent (its system prompt first, once); the masked text.

        What the person typed, the step's prompt, scripted replies and a command partner's
        answers cost no tokens: what the agent is sent counts in the input tokens of its
        reply. `duration`: how long writing it took (a command partner's run)."""
        self._record_system_prompt()
        masked = self.run.masker.mask(message)
        turn = Turn(role="user", content=masked, speaker=speaker, duration=round(duration, 3))
        self._record(turn)
        return masked

    def record_partner_message(
        self, reply: Reply, speaker: str, sent: str, *, ended: bool = False
    ) -> None:
        """Record a partner agent's message (`reply`, its text already masked) in this
        step's conversation, with its tokens and time. `sent` is what the partner was sent
        to answer ("" when that was the agent's last reply itself, verbatim). An interrupted
        message, or one that `ended` the conversation, never reaches this agent."""
        conv = self.conv
        assert conv is not None, "a partner answers in a conversation"
        self._record_system_prompt()
        conv.total_tokens += reply.tokens
        conv.partner_tokens += reply.tokens
        self._record(
            Turn(
                role="user",
                content=reply.text,
                tokens=reply.tokens,
                tokens_estimated=reply.tokens_estimated,
                interrupted=reply.interrupted,
                duration=round(reply.duration, 3),
                speaker=speaker,
                sent=self.run.masker.mask(sent),
                ended=ended,
            )
        )

    def _record_system_prompt(self) -> None:
        run, conv, system = self.run, self.conv, self.system_prompt
        if conv is not None and system and not any(t.role == "system" for t in conv.turns):
            self._record(Turn(role="system", content=run.masker.mask(system)))

    def _request(self, message: str, history: list[Message], *, continues: bool) -> TurnRequest:
        run, step, conv = self.run, self.step, self.conv
        session_id = conv.session_id if conv and self.provider.session_kind == "session_id" else ""
        # A resumed session-id turn must not resend the system prompt; history-based
        # providers are stateless, so they get it every turn.
        system = self.system_prompt
        if session_id and self.provider.session_kind == "session_id":
            system = None
        elif self.provider.session_kind == "session_id" and history and not continues:
            self._warn_replay(sum(1 for m in history if m.role != "system"))
        return TurnRequest(
            prompt=message,
            system_prompt=system,
            history=history,
            session_id=session_id or None,
            options=self.options,
            working_dir=run.config.cwd,
            timeout=step.timeout,
            output_format="" if self.speaker else step.output_format,
            step=step.name,
            run_id=run.run_id,
            turn_number=self.replies + (0 if continues else 1),
            speaker=self.speaker,
            tools=[
                *(self.tools.list() if self.tools is not None else []),
                *([self.end_tool] if self.end_tool is not None else []),
            ],
            continues=continues,
            mcp_servers=self.mcp_servers,
            max_reply_bytes=self.max_reply_bytes,
            max_tool_calls=self.max_tool_calls,
            ask_permission=self.ask_permission,
        )

    def _warn_replay(self, count: int) -> None:
        """A session-id provider (an agent CLI) with earlier messages but no session id to
        resume replays them in the prompt of a new session: said once per step and side,
        whatever led here (`continue_from` a step that reported no id, `awf resume`, a
        cycle coming back)."""
        run, step = self.run, self.step.name
        plural = "" if count == 1 else "s"
        run.warn_once(
            f"replay:{step}:{self.speaker}",
            f"step {step}: {self.provider_name} has no session id to resume; replaying "
            f"{count} earlier message{plural} in the prompt of a new session",
            step,
        )

    async def ask_permission(self, call_id: str, name: str, arguments: str) -> bool:
        """An agent asks before it acts (ACP): the step's confirm policy answers, as for a
        tool under `tools.confirm` (`--yes` allows; the person is asked; else refused)."""
        from awf_nb.engine.tool_calls import decide_permission

        return await decide_permission(self, ToolCall(call_id, name, arguments))

    def save_before_asking(self) -> None:
        """Before the person is asked anything mid-reply (a call to allow, their turn after
        Ctrl-C): they may take a while, or the run may be killed meanwhile. A conversation's
        state is saved (its tool rounds are not saved one by one, see `_finish_turn`);
        otherwise the transcript lines written so far are synced."""
        if self.live and not self.speaker:
            self.run.checkpoint()  # the transcript is synced first
            self._live_unsaved = False
        else:
            self.run.sync_transcript()

    def record_tool_result(self, turn: Turn) -> None:
        """Record a tool's result (a `tool` turn), as it finishes."""
        self._record(turn)

    def repair_tool_calls(self) -> None:
        """A conversation that ends in tool calls without results (the process died while
        they ran) gets a result for each, saying awf stopped before it finished (not that
        the person did): a model API refuses a history holding a call without its result."""
        from awf_nb.engine.tool_calls import ABANDONED

        turns = self.conv.turns if self.conv is not None else []
        last = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role != "tool"), -1)
        if last < 0 or not turns[last].tool_calls:
            return
        answered = {t.tool_call_id for t in turns[last + 1 :]}
        for call in turns[last].tool_calls:
            if call["id"] not in answered:
                turn = Turn(
                    role="tool", content=ABANDONED, tool_call_id=call["id"], name=call["name"]
                )
                self._record(turn)
                self._dialogue.append(as_message(turn))

    async def turn(self, message: str, *, already_recorded: bool = False) -> Reply:
        """One reply to `message`; with tools, the rounds of tool calls it takes first.

        A reply with tool calls runs them (engine/tool_calls.py) and asks the model again
        with the results; a reply without tool calls ends the turn. Ctrl-C / Stop during a
        tool call ends it too (the reply is marked interrupted). The step's `timeout`
        bounds the whole turn, its tool rounds included (not the person's time to answer
        a confirmation: see `waiting_for_person`)."""
        run, step = self.run, self.step
        # Every turn lets the event loop run (the frontend's Stop, its widgets, a run
        # started in the background handing back its cell): a provider that answers
        # without waiting (scripted, a cassette) would otherwise hold it for a whole run.
        await asyncio.sleep(0)
        run.limits.before_turn(step.name)
        # A copy of references: microseconds, not I/O.
        request = self._request(message, list(self._dialogue), continues=False)
        if already_recorded:
            masked_message = run.masker.mask(message)
        else:
            masked_message = self.record_message(message)
        said = [Message("user", masked_message)]  # this turn's messages, for the history
        try:
            async with asyncio.timeout(step.timeout) as deadline:
                self._deadline = deadline
                reply = await self._rounds(request, said)
        except TimeoutError:
            raise TurnTimeout(
                f"step {step.name}: agent turn timed out after {format_limit(step.timeout)} "
                "(the step's timeout bounds a whole reply, its tool calls included)",
                step=step.name,
            ) from None
        finally:
            self._deadline = None
        if self.conv is not None:
            self._dialogue.extend(said)
            self._dialogue_chars += sum(len(m.content) for m in said)
        return reply

    def timed_out(self) -> bool:
        """Whether the turn's deadline has passed (its cancellation is under way)."""
        return self._deadline is not None and self._deadline.expired()

    @contextlib.contextmanager
    def waiting_for_person(self) -> Iterator[None]:
        """The turn's clock stops while the person is asked something (a tool call to
        allow): their time to answer is not the agent's."""
        deadline = self._deadline
        when = deadline.when() if deadline is not None else None
        if deadline is None or when is None or deadline.expired():
            yield
            return
        loop = asyncio.get_running_loop()
        left = when - loop.time()
        deadline.reschedule(None)
        try:
            yield
        finally:
            if not deadline.expired():
                deadline.reschedule(loop.time() + max(left, 0.0))

    async def _rounds(self, request: TurnRequest, said: list[Message]) -> Reply:
        """The reply's rounds: stream, run its tool calls, ask again, until it has none."""
        run, step = self.run, self.step
        number = self.replies + 1
        rounds = 0
        while True:
            run.send(ev.TurnStarted, step.name, number, self.speaker)
            started = time.monotonic()
            try:
                progress, interrupted = await self._stream_with_retries(request)
            except (ProviderError, asyncio.CancelledError) as exc:
                # The text shown so far is kept, marked as cut short, as Ctrl-C keeps it
                # (a provider error, or the turn's timeout; a cancelled run keeps nothing).
                partial = self._progress
                ends = isinstance(exc, ProviderError) or self.timed_out()
                if ends and partial is not None and partial.parts:
                    self.cut_short = self._finish_turn(
                        request, partial, True, number, started, first=not rounds
                    )
                raise
            end = self.end_tool
            if (
                end is not None
                and not interrupted
                and any(call.name == end.name for call in progress.tool_calls)
            ):
                reply = self._finish_turn(request, progress, False, number, started,
                                          first=not rounds)  # fmt: skip
                reply.ended = True
                said.append(Message("assistant", reply.text))
                return reply
            calls = progress.tool_calls if self.tools is not None and not interrupted else []
            reply = self._finish_turn(
                request, progress, interrupted, number, started, first=not rounds, calls=calls
            )
            if not calls:
                said.append(Message("assistant", reply.text))
                return reply
            rounds += 1
            if rounds > self.max_rounds:
                raise ExecutionError(
                    f"step {step.name}: the agent still calls tools after {self.max_rounds} "
                    "rounds (tools.max_rounds)",
                    step=step.name,
                )
            from awf_nb.engine.tool_calls import run_tool_calls

            assert self.tools is not None
            results, cut = await run_tool_calls(self, self.tools, calls)
            said += [Message("assistant", reply.text, tool_calls=tuple(calls)), *results]
            if cut:  # Ctrl-C / Stop during a tool call: the person has the turn
                reply.interrupted = True
                self.save_before_asking()  # no checkpoint of a reply follows the results
                return reply
            request = self._request("", [*self._dialogue, *said], continues=True)

    async def _stream_with_retries(self, request: TurnRequest) -> tuple[_Progress, bool]:
        run = self.run
        for attempt in range(1, TRANSIENT_ATTEMPTS + 1):
            progress = self._progress = _Progress()
            try:
                interrupted = await self._interruptible(request, progress)
                return progress, interrupted
            except ProviderError as exc:
                if progress.streamed or not exc.retryable or attempt == TRANSIENT_ATTEMPTS:
                    raise
                delay = min(exc.retry_after or 2.0 ** (attempt - 1), MAX_TRANSIENT_DELAY)
                run.warn(
                    f"{exc} — retrying in {format_duration(delay)} (attempt {attempt + 1}/"
                    f"{TRANSIENT_ATTEMPTS})",
                    self.step.name,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _interruptible(self, request: TurnRequest, progress: _Progress) -> bool:
        """Stream the reply; True when Ctrl-C / Stop cut it short."""
        with self.run.interruptible() as cut:
            await self._stream(request, progress)
        return cut.happened

    async def _stream(self, request: TurnRequest, progress: _Progress) -> None:
        run, step = self.run, self.step
        masker = run.masker.stream()
        stream = self.provider.stream(request)
        try:
            async for event in stream:  # the turn's deadline bounds it (`turn`)
                self._on_event(event, progress, masker)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
            if tail := masker.flush():
                run.send(ev.AgentText, step.name, tail, self.speaker)

    def _on_event(self, event: object, progress: _Progress, masker: Any) -> None:
        run, name = self.run, self.step.name
        if type(event) is TextDelta:  # the hot path: once per streamed token
            text = event.text
            if not text:
                return
            if text.isascii():
                progress.size += len(text)
            else:
                text = valid_unicode(text)
                progress.size += len(text.encode())
            if progress.size > self.max_reply_bytes:
                # A delta can hold many tokens (those that arrived together): what fits
                # is kept and shown, up to the limit.
                room = len(text.encode()) - (progress.size - self.max_reply_bytes)
                if fits := text.encode()[:room].decode(errors="ignore"):
                    progress.parts.append(fits)
                    progress.streamed = True
                    if shown := masker.feed(fits):
                        run.send(ev.AgentText, name, shown, self.speaker)
                raise ProviderError(self.provider_name, reply_bytes_message(self.max_reply_bytes))
            progress.parts.append(text)
            progress.streamed = True
            if shown := masker.feed(text):
                run.send(ev.AgentText, name, shown, self.speaker)
        elif isinstance(event, ToolCall):
            progress.streamed = True  # a retry could ask for other calls: keep these
            self._count_call(progress, text_bytes(event.name) + text_bytes(event.arguments))
            if json_too_deep(event.arguments):
                raise ProviderError(
                    self.provider_name,
                    f"the arguments of a call to {event.name!r} are nested deeper than "
                    f"{MAX_JSON_DEPTH} levels",
                )
            if self.tools is not None or (
                self.end_tool is not None and event.name == self.end_tool.name
            ):
                progress.tool_calls.append(event)
            else:
                run.warn_once(
                    f"tool-call:{name}",
                    f"step {name}: the model asked for a tool ({event.name}) but the step "
                    "has no tools; the call is ignored",
                    name,
                )
        elif isinstance(event, ToolUse):
            progress.streamed = True  # the agent acted: a retry could repeat its side effects
            self._count_call(progress, text_bytes(event.name) + text_bytes(event.argument))
            argument = run.masker.mask(event.argument)
            run.send(ev.AgentToolUse, name, event.name, argument)
            run.append_transcript(
                {"step": name, "role": "tool", "content": f"{event.name}({argument})"}
            )
        elif isinstance(event, Usage):
            counts = (event.input_tokens, event.output_tokens)
            if any(token_count(count) != count for count in counts):
                raise ProviderError(
                    self.provider_name,
                    "the reported usage is not a token count (a whole number from 0; got "
                    f"{event.input_tokens!r} in, {event.output_tokens!r} out)",
                )
            progress.usage = event
        elif isinstance(event, SessionId):
            progress.session_id = event.session_id
        elif isinstance(event, Notice):
            if event.truncated_turns:
                progress.truncated_turns = event.truncated_turns
                run.warn_once(f"truncated:{name}", event.message, name)
            else:
                run.warn(event.message, name)
        elif isinstance(event, ModelLoad):
            run.send(ev.ModelLoading, name, event.model, event.done, event.seconds, self.speaker)
        elif isinstance(event, Final):
            progress.final = valid_unicode(event.text)
            progress.cut = event.cut

    def _count_call(self, progress: _Progress, size: int) -> None:
        """A tool call the model asks for, or a tool an agent CLI ran: counted against
        `max_tool_calls`, its name and arguments against `max_reply_bytes`."""
        progress.calls += 1
        if progress.calls > self.max_tool_calls:
            raise ProviderError(self.provider_name, tool_calls_message(self.max_tool_calls))
        progress.size += size
        if progress.size > self.max_reply_bytes:
            raise ProviderError(self.provider_name, reply_bytes_message(self.max_reply_bytes))

    def _finish_turn(
        self,
        request: TurnRequest,
        progress: _Progress,
        interrupted: bool,
        number: int,
        started: float,
        *,
        first: bool = True,
        calls: list[ToolCall] | None = None,
    ) -> Reply:
        """Record one reply (or one round of it: `first` is False for the rounds after tool
        results), count its tokens, tell the frontend."""
        run, st, conv = self.run, self.st, self.conv
        text = progress.text if not interrupted else "".join(progress.parts)
        masked = run.masker.mask(text)
        usage = progress.usage
        if usage is not None and (usage.input_tokens or usage.output_tokens):
            tokens_in, tokens_out = usage.input_tokens, usage.output_tokens
            estimated = usage.estimated
        else:  # the len/4 estimate, from running totals (no pass over the history)
            sent = len(request.system_prompt or "") + len(request.prompt) + self._dialogue_chars
            tokens_in, tokens_out, estimated = tokens_for_chars(sent), estimate_tokens(text), True
        # A reply's tokens are what it cost: the input tokens it was sent (system prompt,
        # history, message) and the output tokens it wrote, as the provider reported them
        # (else estimated). The live line, the turn in the state and `awf status`, the
        # step's and the conversation's totals all add up these same figures.
        tokens = tokens_in + tokens_out
        if usage is not None and usage.cost_usd is not None:
            # what the provider says the turn cost (an agent CLI that reports it: claude)
            st.reported_cost_usd = (st.reported_cost_usd or 0.0) + usage.cost_usd
        st.tokens_input += tokens_in
        st.tokens_output += tokens_out
        st.tokens_used = st.tokens_input + st.tokens_output
        st.tokens_estimated = st.tokens_estimated or estimated
        if first:
            run.state.agent_turns += 1
        if not self.speaker:
            st.output = masked
            st.response = json_response(masked, fenced=True)
        if conv is not None:
            conv.provider = self.provider_name
            if progress.session_id:
                conv.session_id = progress.session_id
            if first:  # the rounds of one reply are one turn
                conv.total_turns += 1
            conv.total_tokens += tokens
        duration = time.monotonic() - started
        self._record(
            Turn(
                role="assistant",
                content=masked,
                tokens=tokens,
                tokens_estimated=estimated,
                interrupted=interrupted,
                cut=progress.cut and not interrupted,
                truncated_turns=progress.truncated_turns,
                duration=round(duration, 3),
                tool_calls=[
                    {"id": c.id, "name": c.name, "arguments": run.masker.mask(c.arguments)}
                    for c in calls or ()
                ],
            )
        )
        run.send(
            ev.TurnFinished,
            self.step.name,
            number,
            tokens,
            duration,
            tokens_estimated=estimated,
            interrupted=interrupted,
            text=masked,
            speaker=self.speaker,
            cut=progress.cut and not interrupted,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            provider=self.provider_name,
            model=str(request.options.get("model") or ""),
            cost_usd=usage.cost_usd if usage is not None else None,
            tool_calls=len(calls or ()),
        )
        # A conversation is saved with each reply (single-mode steps when they end). Not
        # with each of a reply's tool rounds: a checkpoint costs fsyncs, and the rounds'
        # lines are in the transcript as they happen, where a resume reads them back from
        # the line the state file points at. So the round that starts the live turns is
        # saved, for that pointer; the others wait for the reply.
        if self.live and not self.speaker and (not calls or self._live_unsaved):
            run.checkpoint()
            self._live_unsaved = False
        return Reply(masked, interrupted, tokens, duration, estimated)


def as_message(turn: Turn) -> Message:
    """A recorded turn as a history message (tool calls and results included)."""
    if turn.role == "tool":
        return Message("tool", turn.content, tool_call_id=turn.tool_call_id, name=turn.name)
    if turn.tool_calls:
        calls = tuple(
            ToolCall(c["id"], c["name"], c.get("arguments", "{}")) for c in turn.tool_calls
        )
        return Message("assistant", turn.content, tool_calls=calls)
    return Message(turn.role, turn.content)
