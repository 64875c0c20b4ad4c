"""Every event a run emits is masked in one place (the run's `emit`): a secret in a
provider's error — here a key in the server's URL, named in the retry warning and in the
step's error — never reaches a frontend."""

from __future__ import annotations

import awf_nb
from awf_nb.engine import events as ev
from tests.support.events import Collect
from tests.support.http_server import Answer, FakeHttpServer

KEY = "sk-live-4f9a2c7e1b"

WORKFLOW = """
name: masked
states:
  initial: ask
  ask:
    type: agent
    provider: openai_compatible
    options:
      base_url: "{url}/v1?key={key}"
      api_key: "{key}"
      model: m
    prompt: hello
    on_success: done
  done:
    type: terminal
"""


async def test_a_secret_in_a_provider_error_is_masked_in_every_event() -> None:
    sink = Collect()
    with FakeHttpServer() as server:
        unavailable = Answer(503, {"error": {"message": "busy"}}, {"Retry-After": "0"})
        server.route("POST", f"/v1/chat/completions?key={KEY}", unavailable)
        result = await awf_nb.arun(
            WORKFLOW.format(url=server.url, key=KEY), sink=sink, storage=False
        )
    assert result.status == "failed"
    warnings = [event.message for event in sink.of(ev.RunWarning)]
    assert any("retrying" in message for message in warnings), warnings
    shown = repr(sink.events)
    assert KEY not in shown
    # The key was in what the provider said, and it is the masking that took it out.
    assert any("***" in message for message in warnings), warnings


def test_the_run_masks_every_event_it_hands_to_its_sink() -> None:
    """The one place: whatever a step module puts in an event, the sink sees it masked —
    warnings, errors, tool arguments alike; streamed pieces come already masked."""
    from awf_nb.api import load
    from awf_nb.engine.run import RunConfig, Runner
    from awf_nb.secrets import Masker

    sink = Collect()
    workflow = load(WORKFLOW.format(url="http://127.0.0.1:9", key="k"))
    config = RunConfig(providers=lambda name: None, sink=sink, masker=Masker([KEY]))  # type: ignore[arg-type, return-value]
    runner = Runner(workflow, {}, config)
    runner.emit(ev.RunWarning(runner.run_id, f"the server said {KEY}", "ask"))
    runner.emit(ev.ToolCallStarted(runner.run_id, "ask", "c1", "Bash", f'{{"k": "{KEY}"}}'))
    runner.emit(ev.StepFinished(runner.run_id, "ask", "failed", 0.1, error=f"no: {KEY}"))
    assert [type(event) for event in sink.events] == [
        ev.RunWarning,
        ev.ToolCallStarted,
        ev.StepFinished,
    ]
    assert KEY not in repr(sink.events)
    assert sink.events[0].message == "the server said ***"
