"""The other side of a `mode: conversation` step: who answers the step's agent.

`conversation.with` picks it: the person (the run's `InputReader`: a `> ` prompt, a notebook
text box, a scripted list), another agent (its own provider, system prompt, options and
session; it streams like the step's agent, labelled by its name), scripted `replies`, or a
`command` (engine/command_partner.py).
A simulated user (`--simulate-user`) is an agent partner standing in for the person.

`answer(reply)` returns the next message for the step's agent, or None when the partner
ends the conversation. The partner agent's message list is the step's conversation seen
from the other side: the agent's replies are its `user` messages, what it said its
`assistant` ones; it is rebuilt from the step's turns, so resume needs nothing more.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from awf_nb.engine import events as ev
from awf_nb.engine.agent import AgentSession, Reply, TurnTimeout
from awf_nb.engine.agent_files import with_role
from awf_nb.engine.branches import in_parallel_branch
from awf_nb.engine.command_partner import CommandPartner
from awf_nb.engine.interruption import PartnerInterrupted
from awf_nb.engine.ports import Message, Provider, ToolSpec
from awf_nb.engine.state import ConversationState
from awf_nb.engine.summary import format_limit
from awf_nb.errors import ExecutionError, ProviderError

if TYPE_CHECKING:
    from awf_nb.engine.context import LoopFrame
    from awf_nb.engine.runtime import StepRun
    from awf_nb.workflow.model import AgentStep

EXIT_WORDS = frozenset({"exit", "quit"})
PROMPT = "> "
PERSON, SIMULATED_USER = ev.PERSON, ev.SIMULATED_USER


def is_end_of_conversation(text: str | None) -> bool:
    """What ends a conversation when the person (or someone playing them) says it."""
    return text is None or not text.strip() or text.strip().lower() in EXIT_WORDS


class Partner(Protocol):
    """Who answers the step's agent. `answer(reply, turn)`: `turn` is the number of the
    agent's reply the message will ask for (as `UserMessage.turn`)."""

    name: str  # the speaker recorded with its messages; "" for the person
    # Whether it records its messages in the step's conversation itself (a partner agent:
    # with their cost and what it was sent), or the conversation does (with the time `last`
    # took, when it has one: a command partner).
    records_itself: bool
    last: Reply | None

    async def answer(self, reply: str, turn: int) -> str | None: ...


async def read_message(
    run: StepRun,
    step: str,
    turn: int,
    timeout: float | None = None,
    *,
    speaker: str = "",
    blank: str | None = None,
) -> str | None:
    """The person's next message, or None when they ended the conversation (or headless).

    `blank` is what an empty line gives: the end (None), or "" where it means "go on" (the
    person stepping into an exchange between agents); `speaker` is recorded with the text."""
    reader = run.config.reader
    if reader is None:  # headless: behave as if input reached its end
        return None
    run.send(ev.AwaitingInput, step, PROMPT)
    try:
        async with asyncio.timeout(timeout):
            text = await reader.read(PROMPT)
    except TimeoutError:
        raise TurnTimeout(
            f"step {step}: no message at the prompt within the step timeout "
            f"({format_limit(timeout)})",
            step=step,
        ) from None
    if text is not None and not text.strip():
        return blank
    if is_end_of_conversation(text):
        return None
    assert text is not None
    run.send(ev.UserMessage, step, text, turn, speaker)
    return text


@dataclass
class PersonPartner:
    run: StepRun
    step: AgentStep
    name: str = ""
    records_itself: bool = False
    last: Reply | None = None

    async def answer(self, reply: str, turn: int) -> str | None:
        return await read_message(self.run, self.step.name, turn, self.step.timeout)


@dataclass
class ScriptedPartner:
    """`with: {replies: [...]}`: the messages in order; the conversation ends after them."""

    run: StepRun
    step: AgentStep
    conv: ConversationState
    replies: list[str]
    name: str
    records_itself: bool = False
    last: Reply | None = None

    async def answer(self, reply: str, turn: int) -> str | None:
        index = self.conv.partner_turns
        if index >= len(self.replies) or is_end_of_conversation(self.replies[index]):
            return None
        self.conv.partner_turns += 1
        text = self.replies[index]
        run = self.run
        run.send(ev.UserMessage, self.step.name, text, turn, self.name)
        return text


class AgentPartner:
    """Another agent answering the step's agent, in a session of its own.

    It records each of its messages in the step's conversation itself (`owner`), with what
    it was sent to answer, its tokens and time — cut short ones too: the step's turns are
    the one record its own message list is rebuilt from (`rebuild_history`)."""

    records_itself = True

    def __init__(
        self,
        session: AgentSession,
        owner: AgentSession,
        *,
        prompt: str | None,
        render: Callable[[str, dict[str, Any]], str] | None,
        ends_like_a_person: bool = False,
    ) -> None:
        self.session = session
        self.owner = owner  # the step's agent: its conversation holds the partner's messages
        self.name = session.speaker
        assert owner.conv is not None
        self.conv = owner.conv  # the partner's session id is kept there
        self._prompt = prompt  # a template: what the partner is sent; default the reply itself
        self._render = render  # (template, variables) -> text
        self._ends_like_a_person = ends_like_a_person
        self.last: Reply | None = None  # it records itself: nothing for the conversation

    @staticmethod
    def rebuild_history(conv: ConversationState) -> tuple[list[Message], int]:
        """The partner's own message list, from the step's turns (`partner_exchanges`),
        and the characters in it."""
        history: list[Message] = []
        chars = 0
        for sent, turn in conv.partner_exchanges():
            history += [Message("user", sent), Message("assistant", turn.content)]
            chars += len(sent) + len(turn.content)
        return history, chars

    def what_to_send(self, reply: str) -> str:
        """The agent's reply, or what the `prompt` template makes of it: `{{.reply}}`, and
        `{{.turn}}` the number of that reply, counted as `until`'s `turn` counts it (the
        agent's replies in this visit of the step, from 1)."""
        if self._prompt is None or self._render is None:
            return reply
        turn = self.owner.replies - self.conv.visit_start
        return self._render(self._prompt, {"reply": reply, "turn": turn})

    async def answer(self, reply: str, turn: int) -> str | None:
        session, owner = self.session, self.owner
        sent = self.what_to_send(reply)
        verbatim = "" if sent == reply else sent
        session.cut_short = None
        try:
            result = await session.turn(sent)
        except (ProviderError, TurnTimeout):
            if session.cut_short is not None:  # what it wrote before the error is kept
                owner.record_partner_message(session.cut_short, self.name, verbatim)
            raise
        finally:
            if session.conv is not None and session.conv.session_id:
                self.conv.partner_session_id = session.conv.session_id
        self.conv.partner_turns += 1
        text = result.text
        ends = not text.strip() or (self._ends_like_a_person and is_end_of_conversation(text))
        owner.record_partner_message(
            result, self.name, verbatim, ended=ends and not result.interrupted
        )
        if result.interrupted:
            raise PartnerInterrupted()
        return None if ends else text


def partner_conversation(provider_name: str, conv: ConversationState) -> ConversationState:
    """The in-memory session of a partner agent, continuing the one recorded in `conv`."""
    return ConversationState(
        session_id=conv.partner_session_id,
        provider=provider_name,
        total_turns=conv.partner_turns,
    )


# The system prompt of an agent playing the person (`--simulate-user PERSONA`). Written for
# the bundled 135M model as much as for large ones: short, direct, in the second person,
# and saying what the reply must not be (an assistant's answer), which small models drift
# into (benchmarks/local_quality.py, task simulated_user).
SIMULATED_USER_PROMPT = (
    "You are a person chatting with an AI assistant. Who you are and what you want: {persona}\n"
    "Reply as this person, in one or two short sentences. Answer the assistant's question "
    "with a plain fact about yourself. Never act as the assistant."
)


def simulated_user_prompt(persona: str, desired_turns: int | None = None) -> str:
    """The system prompt of the agent playing the person described by `persona` (told
    the number of messages it should reach its goal in, when `desired_turns` is given)."""
    prompt = SIMULATED_USER_PROMPT.format(persona=persona.strip())
    if desired_turns is not None:
        prompt += (
            f"\nTry to reach your goal within {desired_turns} messages; when it is reached, "
            "reply with exactly: exit"
        )
    return prompt


# The structured end signal of a simulated user: a tool it is offered (where its provider
# takes tools) and calls when its goal is reached, instead of writing `exit`.
END_CONVERSATION = ToolSpec(
    "end_conversation",
    "End the conversation: call this when your goal is reached or you want to stop talking.",
    {"type": "object", "properties": {}},
)

DEFAULT_USER_RETRIES = 2
DEFAULT_USER_MAX_CHARS = 4000
# What a simulated user's message must not look like: the assistant's part (a role label
# opening it), or the model's reasoning.
_ROLE_LABEL = re.compile(r"^\s*\**\s*(assistant|ai|system)\s*\**\s*:", re.IGNORECASE)
_REASONING = re.compile(r"<\s*/?\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)


@dataclass
class SimulatedUser:
    """An agent playing the person in every conversation the person would answer.

    `persona` is its system prompt (who it is, what it wants, when it says `exit`). Its
    conversation ends when it calls the `end_conversation` tool it is offered (`end_tool`:
    "auto" offers it where the provider takes tools, but to the bundled `local` model), or
    when a message is exactly `exit` (or `quit`): "exit" inside a sentence does not end
    it, and `max_turns` caps it (`desired_turns`, a goal it is
    told, does not). `opener` (when given) is its first message, sent verbatim. A
    defective message — empty, written as the assistant (opening with a role label such
    as `Assistant:`), holding reasoning tags, longer than `max_chars` — is generated again,
    up to `retries` times; still defective, the run fails with a `SimulatorError`.
    """

    persona: str
    provider: str = "local"
    options: dict[str, Any] = field(default_factory=dict)
    max_turns: int = 5
    opener: str | None = None
    retries: int = DEFAULT_USER_RETRIES
    desired_turns: int | None = None
    max_chars: int = DEFAULT_USER_MAX_CHARS
    # `end_conversation`, the structured end signal: "auto" offers the tool where the
    # provider takes tools (history-based providers) but `local` (the bundled model and its
    # recorded evals keep `exit`); True or False to say so.
    end_tool: bool | str = "auto"


class SimulatorError(ExecutionError):
    """The simulated user could not write a usable message (not the workflow's fault)."""


def simulator_defect(text: str, max_chars: int) -> str | None:
    """What is wrong with a simulated user's message, or None when it is usable."""
    if not text.strip():
        return "it was empty"
    if _REASONING.search(text):
        return "it held reasoning tags"
    if _ROLE_LABEL.match(text):
        return "it was written as the assistant (a role label)"
    if len(text) > max_chars:
        return f"it was longer than {max_chars} characters"
    return None


class SimulatedUserPartner(AgentPartner):
    """The agent playing the person: `SimulatedUser`'s opener, end signal and defects."""

    def __init__(self, session: AgentSession, owner: AgentSession, user: SimulatedUser) -> None:
        super().__init__(session, owner, prompt=None, render=None)
        self.user = user
        self.defects = 0  # defective messages generated again, for the record

    async def answer(self, reply: str, turn: int) -> str | None:
        user, step = self.user, self.owner.step.name
        if user.opener is not None and self.conv.partner_turns == 0:
            self.conv.partner_turns += 1
            self.owner.record_partner_message(Reply(user.opener), self.name, "")
            self.owner.run.send(ev.UserMessage, step, user.opener, turn, self.name)
            return user.opener
        problem = ""
        for attempt in range(user.retries + 1):
            result = await self._ask(reply)
            text = result.text
            if result.ended:  # the end signal: whatever it wrote besides is kept
                self.conv.partner_turns += 1
                self.owner.record_partner_message(result, self.name, "", ended=True)
                return None
            problem = simulator_defect(text, user.max_chars) or ""
            if not problem:
                self.conv.partner_turns += 1
                ends = text.strip().lower() in EXIT_WORDS
                self.owner.record_partner_message(result, self.name, "", ended=ends)
                return None if ends else text
            if attempt < user.retries:
                self.defects += 1
                # the defective message is forgotten: asked again from what was recorded
                self.session.continue_history(*self.rebuild_history(self.conv))
        raise SimulatorError(
            f"step {step}: simulated user: its message was defective "
            f"{user.retries + 1} times in a row (last: {problem})",
            step=step,
            hint="a stronger model or a clearer persona for the simulated user; "
            "user.retries sets how often a message is generated again",
        )

    async def _ask(self, reply: str) -> Reply:
        session = self.session
        session.cut_short = None
        try:
            result = await session.turn(reply)
        except (ProviderError, TurnTimeout):
            if session.cut_short is not None:  # what it wrote before the error is kept
                self.owner.record_partner_message(session.cut_short, self.name, "")
            raise
        finally:
            if session.conv is not None and session.conv.session_id:
                self.conv.partner_session_id = session.conv.session_id
        if result.interrupted:
            self.owner.record_partner_message(result, self.name, "")
            raise PartnerInterrupted()
        return result


@dataclass
class Exchange:
    """Who answers the step's agent and what bounds the exchange (`until`, `max_turns`)."""

    partner: Partner
    until: str | None = None
    max_turns: int | None = None


def make_exchange(run: StepRun, session: AgentSession, loop: LoopFrame | None = None) -> Exchange:
    """The partner of a conversation step: `conversation.with`, else a simulated user when
    the run has one, else the person."""
    step, conv, ctx = session.step, session.conv, run.ctx
    assert conv is not None
    config = step.conversation
    partner = config.partner if config is not None else None
    simulated = run.config.simulated_user

    def render(source: str, what: str, variables: dict[str, Any] | None = None) -> str:
        return ctx.render(source, step=step.name, what=what, loop=loop, extra=variables)

    if partner is not None or simulated is not None:
        # What the partner said is in the turns, written before the state file: after a
        # crash between the two, the turns are right and the saved count is not.
        label = partner.name if partner is not None else SIMULATED_USER
        conv.partner_turns = sum(1 for t in conv.turns if t.role == "user" and t.speaker == label)
    if partner is not None:
        assert config is not None
        if partner.kind == "replies":
            replies = [render(r, "conversation.with.replies") for r in partner.replies or []]
            scripted = ScriptedPartner(run, step, conv, replies, partner.name)
            return Exchange(scripted, config.until, config.max_turns)
        if partner.kind == "command":
            script = CommandPartner(run, step, conv, partner, loop)
            return Exchange(script, config.until, config.max_turns)
        assert partner.provider is not None
        system = partner.system_prompt
        system = render(system, "conversation.with.system_prompt") if system else None
        what = "conversation.with.role"
        agent = _agent_partner(
            session,
            label=partner.name,
            provider=render(partner.provider, "conversation.with.provider").strip(),
            system=with_role(run, step.name, partner.role, system, what=what, loop=loop),
            options=ctx.render_value(
                partner.options, step=step.name, what="conversation.with.options", loop=loop
            ),
            prompt=partner.prompt,
            render=lambda source, values: render(source, "conversation.with.prompt", values),
        )
        return Exchange(agent, config.until, config.max_turns)
    if simulated is not None:
        agent = _agent_partner(
            session,
            label=SIMULATED_USER,
            provider=simulated.provider,
            system=simulated_user_prompt(simulated.persona, simulated.desired_turns),
            options=dict(simulated.options),
            user=simulated,
        )
        return Exchange(agent, max_turns=simulated.max_turns)
    if parallel := in_parallel_branch.get():
        # `awf validate` refuses this; a workflow built in Python, or called from a branch
        # (call_workflow), gets here: two prompts at once would each wait for the other's line.
        raise ExecutionError(
            f"step {step.name}: a conversation with the person cannot run inside parallel "
            f"step '{parallel}': branches run at the same time and the person can answer "
            "only one conversation at once (move the step out of the parallel step, or "
            "give it a partner with conversation.with)",
            step=step.name,
        )
    return Exchange(PersonPartner(run, step))


def _agent_partner(
    session: AgentSession,
    *,
    label: str,
    provider: str,
    system: str | None,
    options: dict[str, Any],
    prompt: str | None = None,
    render: Callable[[str, dict[str, Any]], str] | None = None,
    user: SimulatedUser | None = None,
) -> AgentPartner:
    """A partner agent in its own session, continuing what the step's turns record."""
    run, conv = session.run, session.conv
    assert conv is not None
    run.masker.add_option_secrets(options)
    own = partner_conversation(provider, conv)
    instance = run.provider(provider)
    end = None
    if user is not None and offers_end_tool(user, instance):
        end = END_CONVERSATION
    agent = AgentSession(
        run, session.step, session.st, provider, instance, system, options, own,
        speaker=label, end_tool=end,
    )  # fmt: skip
    partner = (
        SimulatedUserPartner(agent, session, user)
        if user is not None
        else AgentPartner(agent, session, prompt=prompt, render=render)
    )
    agent.continue_history(*AgentPartner.rebuild_history(conv))
    return partner


def offers_end_tool(user: SimulatedUser, provider: Provider) -> bool:
    """Whether the simulated user is offered `end_conversation` (see `SimulatedUser`)."""
    if isinstance(user.end_tool, bool):
        return user.end_tool
    return provider.session_kind == "history" and provider.name != "local"
