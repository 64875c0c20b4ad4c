"""One owner for a run's providers: the run set, closed once by the top-level run. A
called workflow shares it and closes nothing (CLI providers treat close as final)."""

from __future__ import annotations

from pathlib import Path

from awf_nb.engine.ports import TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import with_providers


class CloseIsFinal(ScriptedProvider):
    """Like the agent CLI providers: once closed, a turn is refused."""

    closes = 0

    def __init__(self, name: str = "final") -> None:
        super().__init__(name)
        self.closed = False

    async def stream(self, turn: TurnRequest):  # type: ignore[override]
        if self.closed:
            raise ProviderError(self.name, "the provider was closed; turn not run")
        async for event in super().stream(turn):
            yield event

    async def aclose(self) -> None:
        self.closed = True
        type(self).closes += 1


async def test_a_parent_step_after_a_call_using_the_same_provider_still_runs(
    run_yaml, workdir: Path
):
    (workdir / "child.yaml").write_text(
        "name: child\nstates:\n  initial: ask\n"
        "  ask: {type: agent, provider: final, prompt: from the child, on_success: done}\n"
        "  done: {type: terminal}\n"
    )
    CloseIsFinal.closes = 0
    result = await run_yaml(
        """
name: parent
states:
  initial: first
  first: {type: agent, provider: final, prompt: before, on_success: call}
  call: {type: call_workflow, workflow: child, on_success: after}
  after: {type: agent, provider: final, prompt: after the call, on_success: done}
  done: {type: terminal}
""",
        providers=with_providers(final=CloseIsFinal),
    )
    assert result.ok, result.error
    assert result.outputs["after"] == "after the call"
    assert CloseIsFinal.closes == 1  # closed once, when the whole run ended
