"""A three-turn conversation through the engine with the openai_compatible provider against
a real llama.cpp server, checking what the server was sent each turn."""

from __future__ import annotations

import pytest

from awf_nb.api import arun
from tests.support.recording_proxy import RecordingProxy

pytestmark = [pytest.mark.real_server, pytest.mark.asyncio]

WORKFLOW = """
name: llama-chat
states:
  initial: chat
  chat:
    type: agent
    provider: openai_compatible
    mode: conversation
    system_prompt: You are a terse assistant.
    prompt: Name a colour.
    options:
      base_url: "{url}"
      model: smollm2
      max_tokens: 12
      max_tokens_field: max_tokens
      temperature: 0
      seed: 7
    on_success: done
  done: {{type: terminal}}
"""


async def test_three_turns_send_the_growing_history(llama_server, tmp_path):
    with RecordingProxy(llama_server) as proxy:
        result = await arun(
            WORKFLOW.format(url=proxy.base_url),
            replies=["Name another one.", "And a third?", ""],
            storage=tmp_path,
        )
    assert result.ok, result.error
    conv = result.steps["chat"].conversation
    assert conv.total_turns == 3 and conv.stopped_by == "user_exit"
    replies = [t.content for t in conv.turns if t.role == "assistant"]
    assert all(reply.strip() for reply in replies)

    sent = [[(m["role"], m["content"]) for m in body["messages"]] for body in proxy.requests]
    assert [len(messages) for messages in sent] == [2, 4, 6]
    assert sent[0] == [("system", "You are a terse assistant."), ("user", "Name a colour.")]
    assert sent[1][2:] == [("assistant", replies[0]), ("user", "Name another one.")]
    assert sent[2][:4] == sent[1]  # every turn resends everything said so far
    assert sent[2][4:] == [("assistant", replies[1]), ("user", "And a third?")]
    assert all(body["stream"] is True for body in proxy.requests)


EXCHANGE = """
name: llama-exchange
states:
  initial: draft
  draft:
    type: agent
    provider: openai_compatible
    mode: conversation
    system_prompt: You write one-line slogans.
    prompt: A slogan for a bakery.
    options: &model
      base_url: "{url}"
      model: smollm2
      max_tokens: 12
      max_tokens_field: max_tokens
      temperature: 0
      seed: 7
    conversation:
      with:
        name: critic
        provider: openai_compatible
        system_prompt: You criticise slogans in one short sentence.
        options: *model
      max_turns: 2
    on_success: done
  done: {{type: terminal}}
"""


async def test_each_side_of_an_agent_exchange_gets_its_own_message_list(llama_server, tmp_path):
    with RecordingProxy(llama_server) as proxy:
        result = await arun(EXCHANGE.format(url=proxy.base_url), storage=tmp_path)
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "max_turns" and conv.total_turns == 2
    drafts = [t.content for t in conv.turns if t.role == "assistant"]
    critique = next(t.content for t in conv.turns if t.speaker == "critic")
    assert all(text.strip() for text in [*drafts, critique])

    # in order: writer, critic, writer
    sent = [[(m["role"], m["content"]) for m in body["messages"]] for body in proxy.requests]
    assert len(sent) == 3
    writer_1, critic_1, writer_2 = sent
    assert writer_1 == [
        ("system", "You write one-line slogans."),
        ("user", "A slogan for a bakery."),
    ]
    # the critic sees the writer's draft as the user's message, under its own system prompt
    assert critic_1 == [
        ("system", "You criticise slogans in one short sentence."),
        ("user", drafts[0]),
    ]
    assert writer_2 == [*writer_1, ("assistant", drafts[0]), ("user", critique)]
