"""Every event a run emits is masked in one place (`Runner.emit` → `sinks.mask_event`),
before any frontend sees it.

The regression: a provider's retry warning named its URL, secret and all
(`…/sk-live-…/v1/chat/completions: server error (HTTP 503) — retrying`), on the terminal
and in the notebook panel's saved output. A real HTTP server on 127.0.0.1 answers 503 to
a base_url that holds a secret taken from a secret-named environment variable.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.api import arun
from awf_nb.engine import events as ev
from awf_nb.engine.sinks import mask_event
from awf_nb.engine.summary import RunSummary, StepLine
from awf_nb.secrets import Masker
from tests.support.events import Collect
from tests.support.http_server import Answer, FakeHttpServer

SECRET = "sk-live-4f9a8b7c6d5e3a21"
ENV_NAME = "AWF_TEST_GATEWAY_API_KEY"  # secret by its name

WORKFLOW = """
name: retries
states:
  initial: ask
  ask:
    type: agent
    provider: openai_compatible
    prompt: hello
    options:
      base_url: "URL/{{.env.AWF_TEST_GATEWAY_API_KEY}}/v1"
      model: any
    on_success: done
  done: {type: terminal}
"""


@pytest.fixture
def busy_gateway():
    """A server that answers 503 at the path holding the secret, whichever way the
    provider joins the endpoint to the base URL."""
    with FakeHttpServer() as server:
        busy = Answer(503, {"error": {"message": "overloaded"}})
        server.route("POST", f"/{SECRET}/v1/chat/completions", busy)
        yield server


def workflow_file(tmp_path: Path, server: FakeHttpServer) -> Path:
    path = tmp_path / "retries.yaml"
    path.write_text(textwrap.dedent(WORKFLOW).replace("URL", server.url))
    return path


def test_the_retry_warning_is_masked_on_the_terminal(busy_gateway, tmp_path: Path) -> None:
    path = workflow_file(tmp_path, busy_gateway)
    env = {**os.environ, ENV_NAME: SECRET, "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "awf_nb.cli", "run", str(path), "--storage", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert len(busy_gateway.requests) == 3, "the provider did not retry"
    assert result.returncode == 3, result.stderr
    shown = result.stdout + result.stderr
    assert SECRET not in shown
    retries = [line for line in shown.splitlines() if "retrying" in line]
    assert len(retries) == 2, shown
    assert all("/***/v1/chat/completions: server error (HTTP 503)" in r for r in retries)


async def test_the_retry_warning_is_masked_in_the_saved_notebook_output(
    busy_gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.frontends.notebook.frontend import NotebookFrontend, NotebookSession
    from awf_nb.frontends.notebook.panel_static import static_html
    from awf_nb.runs import prepare_run

    monkeypatch.setenv(ENV_NAME, SECRET)
    prepared = prepare_run(
        workflow_file(tmp_path, busy_gateway),
        storage=False,
        cwd=tmp_path,
        frontend=NotebookFrontend(display=False),
    )
    result = await prepared.run()
    assert result.status == "failed"
    assert isinstance(prepared.session, NotebookSession) and prepared.session.panel is not None
    panel = prepared.session.panel
    saved = static_html(panel.widget)  # what the saved notebook keeps next to the widget
    assert "retrying" in saved and "/***/v1/chat/completions" in saved
    assert SECRET not in saved
    assert SECRET not in str(panel.widget.get_state())


# --- mask_event --------------------------------------------------------------------------------


def sample(cls: type) -> Any:
    """An instance of an event class with the secret in every text field."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name == "run_id":
            values[field.name] = "run-1"
        elif field.name == "summary":
            values[field.name] = RunSummary(
                "wf", "run-1", "failed", 1.0, error=f"bad {SECRET}",
                steps=(StepLine(f"step {SECRET}", "failed", 1.0),),
            )  # fmt: skip
        elif field.name == "inputs":
            values[field.name] = {"key": SECRET, "list": [f"x{SECRET}"]}
        elif field.name == "stream":
            values[field.name] = "stdout"
        elif field.name == "outcome":
            values[field.name] = "refused"
        elif field.name == "earlier":  # a resumed conversation's messages
            values[field.name] = (ev.Said("partner", f"<{SECRET}>", f"critic {SECRET}"),)
        elif field.type == "str":
            values[field.name] = f"<{SECRET}>"
        elif field.type in ("int", "float"):
            values[field.name] = 1
        elif field.type == "bool":
            values[field.name] = False
    return cls(**values)


EVENT_TYPES = [t for t in ev.RunEvent.__args__]  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=[t.__name__ for t in EVENT_TYPES])
def test_every_text_field_of_every_event_is_masked(cls: type) -> None:
    event = sample(cls)
    assert SECRET in repr(event)
    masked = mask_event(event, Masker([SECRET]))
    assert SECRET not in repr(masked)
    assert type(masked) is cls and masked.run_id == "run-1"


def test_an_event_without_secrets_is_passed_on_as_it_is() -> None:
    event = ev.AgentText("run-1", "chat", "nothing to hide")
    assert mask_event(event, Masker([SECRET])) is event
    assert mask_event(sample(ev.RunWarning), Masker()) == sample(ev.RunWarning)


def test_streamed_chunks_masked_again_stay_exact() -> None:
    """Chunks the stream masker let through hold no whole secret: masking them again in
    `emit` changes nothing, and a secret split across chunks still shows as one `***`."""
    masker = Masker([SECRET])
    stream = masker.stream()
    text = f"key is {SECRET}, again {SECRET[:5]}"
    chunks = [text[i : i + 3] for i in range(0, len(text), 3)]
    shown = [stream.feed(chunk) for chunk in chunks] + [stream.flush()]
    again = [mask_event(ev.AgentText("r", "s", piece), masker).text for piece in shown if piece]
    assert "".join(again) == "".join(shown) == masker.mask(text)
    assert "".join(again) == f"key is ***, again {SECRET[:5]}"


# --- a key in the base URL's query string, and events a step module makes -------------------

KEY = "sk-live-4f9a2c7e1b"

QUERY_WORKFLOW = """
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
        result = await arun(
            QUERY_WORKFLOW.format(url=server.url, key=KEY), sink=sink, storage=False
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
    from awf_nb.engine.config import RunConfig
    from awf_nb.engine.run import Runner
    from awf_nb.secrets import Masker

    sink = Collect()
    workflow = load(QUERY_WORKFLOW.format(url="http://127.0.0.1:9", key="k"))
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
