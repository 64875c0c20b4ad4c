"""A step header names the provider the step runs on: a templated `provider:` is shown
rendered (`{{.inputs.provider}}` read raw in the header before), and one whose template
cannot be rendered is shown as written while the step reports the error."""

from __future__ import annotations

from awf_nb.api import arun, load
from awf_nb.engine.events import StepStarted
from tests.support.events import Collect

TEMPLATED = """
name: header
inputs:
  - {name: provider, default: scripted}
states:
  initial: ask
  ask:
    type: agent
    provider: "{{.inputs.provider}}"
    prompt: "hi"
    options: {replies: ["hello"]}
    on_success: done
  done: {type: terminal}
"""


async def test_a_templated_provider_is_shown_rendered() -> None:
    sink = Collect()
    result = await arun(load(TEMPLATED), sink=sink, storage=False)
    assert result.ok, result.error
    [header] = [e for e in sink.of(StepStarted) if e.step == "ask"]
    assert header.detail == "scripted"


async def test_a_provider_template_that_fails_is_shown_as_written() -> None:
    sink = Collect()
    broken = TEMPLATED.replace("{{.inputs.provider}}", "{{.states.nowhere.Output}}")
    result = await arun(load(broken), sink=sink, storage=False)
    assert result.status == "failed"
    [header] = [e for e in sink.of(StepStarted) if e.step == "ask"]
    assert header.detail == "{{.states.nowhere.Output}}"
