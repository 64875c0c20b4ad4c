"""Agent steps in single mode with the scripted provider: streaming, tokens, JSON output,
session tracking and `continue_from` (every run-time error text), retries."""

from __future__ import annotations

import pytest

from awf_nb.engine.events import AgentText, RunWarning, TurnFinished
from awf_nb.engine.ports import TurnRequest
from awf_nb.errors import DefinitionError
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import Collect, with_providers

pytestmark = pytest.mark.asyncio


async def test_single_turn_streams_and_sets_output(run_yaml):
    sink = Collect()
    result = await run_yaml(
        """
        name: t
        inputs: [{name: topic, default: channels}]
        states:
          initial: ask
          ask:
            type: agent
            provider: scripted
            prompt: "Explain {{.inputs.topic}}"
            options: {replies: ["Channels are typed conduits between goroutines."]}
            on_success: done
          done: {type: terminal, message: "{{.states.ask.Output}}"}
        """,
        sink=sink,
    )
    assert result.ok, result.error
    assert result.outputs["ask"] == "Channels are typed conduits between goroutines."
    assert len(sink.of(AgentText)) > 1  # streamed in pieces, not one blob
    assert sink.text("ask") == result.outputs["ask"]
    step = result.steps["ask"]
    assert step.tokens_used > 0 and step.tokens_estimated
    assert step.conversation is None  # not session-tracked
    (finished,) = sink.of(TurnFinished)
    assert finished.tokens == step.tokens_used


class RecordingScripted(ScriptedProvider):
    """The scripted provider, keeping every TurnRequest it was given."""

    def __init__(self, name: str = "scripted") -> None:
        super().__init__(name)
        self.requests: list[TurnRequest] = []

    def stream(self, turn: TurnRequest):  # type: ignore[override]
        self.requests.append(turn)
        return super().stream(turn)


async def test_echo_mode_and_system_prompt(run_yaml):
    made: list[RecordingScripted] = []

    def recording(name: str) -> RecordingScripted:
        made.append(RecordingScripted(name))
        return made[-1]

    result = await run_yaml(
        """
        name: t
        states:
          initial: ask
          ask: {type: agent, provider: recording, prompt: "ping", system_prompt: "be brief", on_success: done}
          done: {type: terminal}
        """,
        providers=with_providers(recording=recording),
    )
    assert result.outputs["ask"] == "ping"  # no replies scripted: the prompt is echoed
    (provider,) = made
    (request,) = provider.requests
    assert request.prompt == "ping"
    assert request.system_prompt == "be brief"


async def test_a_fenced_json_reply_becomes_response(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: ask
          ask:
            type: agent
            provider: scripted
            prompt: count
            options: {replies: ["```json\\n{\\"n\\": 3}\\n```"]}
            on_success: show
          show: {type: step, command: "echo {{.states.ask.Response.n}}", on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.ok, result.error
    assert result.outputs["show"] == "3"


async def test_output_format_json(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: review
          review:
            type: agent
            provider: scripted
            prompt: review
            output_format: json
            options: {replies: ["```json\\n{\\"approved\\": true, \\"issues\\": []}\\n```"]}
            transitions:
              - {when: "states.review.JSON.approved == true", goto: yes}
              - {goto: no}
          yes: {type: terminal, message: approved}
          no: {type: terminal, message: rejected}
        """
    )
    assert result.ok, result.error
    assert result.message == "approved"
    assert result.steps["review"].json_ == {"approved": True, "issues": []}


async def test_output_format_json_invalid_fails_step(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: review
          review:
            type: agent
            provider: scripted
            prompt: review
            output_format: json
            options: {replies: ["not json"]}
            on_success: done
          done: {type: terminal}
        """
    )
    assert result.status == "failed"
    assert "not valid JSON" in result.error


async def test_provider_error_fails_step_with_message(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: ask
          ask:
            type: agent
            provider: scripted
            prompt: hi
            options: {replies: [{error: "model exploded"}]}
            on_success: done
          done: {type: terminal}
        """
    )
    assert result.status == "failed"
    assert "model exploded" in result.error


async def test_unknown_provider_fails_before_anything_runs(run_yaml, tmp_path):
    marker = tmp_path / "side-effect"
    with pytest.raises(DefinitionError) as caught:
        await run_yaml(
            f"""
            name: t
            states:
              initial: first
              first: {{type: step, command: "touch {marker}", on_success: ask}}
              ask: {{type: agent, provider: scriptd, prompt: hi, on_success: done}}
              done: {{type: terminal}}
            """
        )
    message = str(caught.value)
    assert 'states.ask.provider: unknown provider "scriptd"' in message
    assert 'did you mean "scripted"?' in message
    assert caught.value.exit_code == 2
    assert not marker.exists(), "an earlier step ran"


async def test_agent_retry_policy(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: ask
          ask:
            type: agent
            provider: scripted
            prompt: hi
            retry: {max_attempts: 2, initial_delay: 0}
            options: {replies: [{error: "flaky"}, "fine"]}
            on_success: done
          done: {type: terminal}
        """
    )
    assert result.ok, result.error
    assert result.outputs["ask"] == "fine"
    assert result.steps["ask"].attempt == 2


SEED_RECALL = """
name: t
states:
  initial: seed
  seed:
    type: agent
    provider: scripted
    system_prompt: You remember things.
    prompt: "The secret word is {{.inputs.word}}."
    conversation: {}
    options: {replies: ["Noted."]}
    on_success: recall
  recall:
    type: agent
    provider: scripted
    prompt: What was the word?
    conversation: {continue_from: seed}
    options: {replies: ["It was {{.inputs.word}}."]}
    on_success: done
  done: {type: terminal}
inputs: [{name: word, default: pineapple}]
"""


async def test_continue_from_sends_previous_history(run_yaml, monkeypatch):
    from awf_nb.providers.scripted import ScriptedProvider

    seen = []
    original = ScriptedProvider.stream

    def spy(self, turn):
        seen.append(turn)
        return original(self, turn)

    monkeypatch.setattr(ScriptedProvider, "stream", spy)
    result = await run_yaml(SEED_RECALL)
    assert result.ok, result.error
    first, second = seen
    assert first.history == [] and first.system_prompt == "You remember things."
    assert [(m.role, m.content) for m in second.history] == [
        ("user", "The secret word is pineapple."),
        ("assistant", "Noted."),
    ]
    assert second.system_prompt is None or second.system_prompt == "You remember things."
    conv = result.steps["recall"].conversation
    assert [t.role for t in conv.turns] == ["system", "user", "assistant", "user", "assistant"]
    assert conv.total_turns == 2
    assert result.steps["seed"].conversation.total_turns == 1
    assert result.steps["seed"].conversation.provider == "scripted"


@pytest.mark.parametrize(
    ("seed", "expected"),
    [
        (
            "  seed: {type: step, command: 'true', on_success: recall}\n",
            'continue_from: step "seed" has no conversation state',
        ),
        (
            "  seed: {type: step, command: 'true', on_success: other}\n"
            "  other: {type: step, command: 'true', on_success: recall}\n",
            'continue_from: step "seed" has no conversation state',
        ),
    ],
)
async def test_continue_from_without_conversation_state(run_yaml, seed, expected):
    result = await run_yaml(
        "name: t\nstates:\n  initial: seed\n"
        + seed
        + """
  recall:
    type: agent
    provider: scripted
    prompt: again
    conversation: {continue_from: seed}
    on_success: done
  done: {type: terminal}
"""
    )
    assert result.status == "failed"
    assert expected in result.error


async def test_continue_from_step_not_run_yet(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: recall
          recall:
            type: agent
            provider: scripted
            prompt: again
            conversation: {continue_from: seed}
            on_success: seed
          seed: {type: agent, provider: scripted, prompt: hi, conversation: {}, on_success: done}
          done: {type: terminal}
        """
    )
    assert result.status == "failed"
    assert 'continue_from: step "seed" not found in execution context' in result.error


async def test_continue_from_no_turns_for_http_provider(run_yaml):
    # A session-tracked step that failed before any reply has a conversation with no turns.
    result = await run_yaml(
        """
        name: t
        states:
          initial: seed
          seed:
            type: agent
            provider: scripted
            prompt: hi
            conversation: {}
            options: {replies: [{error: down}]}
            on_success: recall
            on_failure: recall
          recall:
            type: agent
            provider: scripted
            prompt: again
            conversation: {continue_from: seed}
            on_success: done
          done: {type: terminal}
        """,
    )
    assert result.status == "failed"
    # the failed seed recorded the user message but got no reply: nothing to resume
    assert result.error == (
        'step recall: continue_from: step "seed" has no conversation turns for HTTP-based '
        'provider "scripted"'
    )


async def test_continue_from_other_provider_is_refused(run_yaml, monkeypatch):
    from awf_nb.providers.scripted import ScriptedProvider

    class Other(ScriptedProvider):
        pass

    result = await run_yaml(
        SEED_RECALL.replace(
            "    conversation: {continue_from: seed}\n    options",
            "    conversation: {continue_from: seed}\n    provider: other_scripted\n    options",
        ).replace(
            "  recall:\n    type: agent\n    provider: scripted\n", "  recall:\n    type: agent\n"
        ),
        providers=with_providers(other_scripted=Other),
    )
    assert result.status == "failed"
    assert 'session of provider "scripted"' in result.error
    assert 'provider "other_scripted" cannot resume' in result.error


async def test_session_id_provider_without_id_or_history(run_yaml):
    from awf_nb.providers.scripted import ScriptedProvider

    class SessionScripted(ScriptedProvider):
        session_kind = "session_id"

    sink = Collect()
    result = await run_yaml(
        """
        name: t
        states:
          initial: seed
          seed: {type: agent, provider: session_scripted, prompt: hi, conversation: {}, on_success: recall}
          recall:
            type: agent
            provider: session_scripted
            prompt: again
            conversation: {continue_from: seed}
            on_success: done
          done: {type: terminal}
        """,
        sink=sink,
        providers=with_providers(session_scripted=SessionScripted),
    )
    # No session id was reported but there are turns: replay them, with a warning.
    assert result.ok, result.error
    assert any("no session id" in w.message for w in sink.of(RunWarning))


async def test_session_fallback_replay_keeps_the_seed_system_prompt_and_warns_once(run_yaml):
    class SessionScripted(RecordingScripted):
        session_kind = "session_id"

    made: list[SessionScripted] = []

    def factory(name: str) -> SessionScripted:
        if not made:
            made.append(SessionScripted(name))
        return made[0]

    sink = Collect()
    result = await run_yaml(
        """
        name: t
        states:
          initial: seed
          seed:
            type: agent
            provider: session_scripted
            system_prompt: You are terse.
            prompt: hi
            conversation: {}
            on_success: recall
          recall:
            type: agent
            provider: session_scripted
            prompt: again
            conversation: {continue_from: seed}
            on_success: done
          done: {type: terminal}
        """,
        sink=sink,
        providers=with_providers(session_scripted=factory),
    )
    assert result.ok, result.error
    seed_turn, replayed = made[0].requests
    assert replayed.session_id is None  # nothing to resume: the turns are replayed
    assert replayed.system_prompt == "You are terse."
    assert [m.content for m in replayed.history] == ["hi", seed_turn.prompt]
    warnings = [w for w in sink.of(RunWarning) if "no session id" in w.message]
    assert len(warnings) == 1, warnings


async def test_session_id_provider_with_neither_id_nor_history(run_yaml):
    from awf_nb.providers.scripted import ScriptedProvider

    class SessionScripted(ScriptedProvider):
        session_kind = "session_id"

    result = await run_yaml(
        """
        name: t
        states:
          initial: seed
          seed:
            type: agent
            provider: session_scripted
            prompt: hi
            conversation: {}
            options: {replies: [{error: down}]}
            on_success: recall
            on_failure: recall
          recall:
            type: agent
            provider: session_scripted
            prompt: again
            conversation: {continue_from: seed}
            on_success: done
          done: {type: terminal}
        """,
        providers=with_providers(session_scripted=SessionScripted),
    )
    assert result.error == (
        'step recall: continue_from: step "seed" has no session ID or conversation history '
        "to resume"
    )
