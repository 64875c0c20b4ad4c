"""What a reply leaves behind when it does not finish normally: the text already shown is
kept (marked interrupted) when the provider fails or the turn times out mid-reply; text
that is not valid Unicode never crashes a run."""

from __future__ import annotations

from awf_nb.engine.ports import Final, TextDelta, TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import with_providers

FAILS_MIDWAY = """
name: t
states:
  initial: ask
  ask:
    type: agent
    provider: scripted
    prompt: "Tell me"
    options: {replies: ["The first half of the answer, then the stream breaks"], fail_after_chars: 20}
    on_success: done
  done: {type: terminal}
"""


async def test_a_stream_cut_mid_reply_keeps_the_partial_text(run_yaml, store):
    result = await run_yaml(FAILS_MIDWAY)
    assert result.status == "failed"
    step = result.steps["ask"]
    assert step.output.startswith("The first half")
    assert "fail_after_chars" in step.error
    # The transcript keeps it too, marked as cut short.
    records = store.read_transcript(result.run_id)
    assistant = [r for r in records if r.get("role") == "assistant"]
    assert assistant and assistant[-1]["content"] == step.output
    assert assistant[-1]["interrupted"] is True


async def test_a_conversation_reply_cut_by_the_provider_is_kept_in_the_turns(run_yaml):
    text = FAILS_MIDWAY.replace("provider: scripted", "provider: scripted\n    mode: conversation")
    result = await run_yaml(text, replies=["more"])
    turns = result.steps["ask"].conversation.turns
    assert [t.role for t in turns] == ["user", "assistant"]
    assert turns[-1].interrupted and turns[-1].content.startswith("The first half")
    assert result.outputs["ask"] == turns[-1].content


async def test_a_turn_timeout_mid_reply_keeps_the_partial_text(run_yaml):
    text = """
name: t
states:
  initial: ask
  ask:
    type: agent
    provider: scripted
    prompt: "Tell me"
    timeout: 300ms
    options: {replies: ["one two three four five six seven eight nine ten"], delay_ms: 100}
    on_success: done
  done: {type: terminal}
"""
    result = await run_yaml(text)
    assert result.status == "failed"
    assert "timed out" in result.steps["ask"].error
    assert result.outputs["ask"].startswith("one")


class LoneSurrogates(ScriptedProvider):
    """A provider whose JSON carried "\\ud83d" without its pair."""

    async def stream(self, turn: TurnRequest):  # type: ignore[override]
        yield TextDelta("smile \ud83d and ")
        yield TextDelta("go")
        yield Final("smile \ud83d and go")


async def test_lone_surrogates_in_a_reply_do_not_crash_the_run(run_yaml, store):
    text = FAILS_MIDWAY.replace("provider: scripted", "provider: odd")
    result = await run_yaml(text, providers=with_providers(odd=LoneSurrogates))
    assert result.ok, result.error
    assert result.outputs["ask"] == "smile \ufffd and go"
    assert store.load_state(result.run_id).status == "completed"  # and it was saved
