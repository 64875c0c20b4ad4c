"""The simulated user (--simulate-user PERSONA) is told it is the person talking to an
assistant, around the persona: a bare persona as the system prompt left the bundled model
answering like an assistant (benchmarks/local_quality.py, task simulated_user)."""

from __future__ import annotations

from pathlib import Path

import awf_nb
from awf_nb.api import arun, load
from awf_nb.engine.partner import simulated_user_prompt
from awf_nb.providers.scripted import ScriptedProvider

CHAT = """
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "I need help with bread."
    options: {replies: ["What kind of bread?", "Good choice."]}
    on_success: done
  done: {type: terminal}
"""


def test_the_prompt_puts_the_persona_in_the_person_s_place() -> None:
    prompt = simulated_user_prompt("  A beginner baker; says exit when done\n")
    assert prompt.startswith("You are a person chatting with an AI assistant.")
    assert "Who you are and what you want: A beginner baker; says exit when done\n" in prompt
    assert "Never act as the assistant." in prompt


async def test_the_simulated_user_gets_that_prompt(tmp_path: Path) -> None:
    providers: dict[str, ScriptedProvider] = {}

    def factory(name: str) -> ScriptedProvider:
        return providers.setdefault(name, ScriptedProvider())

    user = awf_nb.SimulatedUser(
        persona="A beginner baker", provider="user", options={"replies": ["White bread.", "exit"]}
    )
    result = await arun(load(CHAT), user=user, providers=factory, storage=False, show=False)
    assert result.ok, result.error
    [first, *_] = providers["user"].received
    assert first.system_prompt == simulated_user_prompt("A beginner baker")
    assert first.prompt == "What kind of bread?"
