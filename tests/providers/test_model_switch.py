"""The one switch to a real model (providers/model_switch.py): `--model`, `AWF_MODEL`,
`model=` and `%%awf --model` run `provider: local` steps on another model.

The spec forms and their errors are unit tests; the switch itself runs real workflows
against the OpenAI-compatible test server on 127.0.0.1 and checks what it was sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.api import arun, load
from awf_nb.engine.events import StepStarted
from awf_nb.errors import UserError
from awf_nb.providers.model_switch import (
    OLLAMA_URL,
    OPENAI_URL,
    ModelChoice,
    SwitchedProviders,
    parse_model,
)
from tests.support.cli import run_awf
from tests.support.events import Collect
from tests.support.openai_server import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]

LOCAL_CHAT = """
name: switched
states:
  initial: ask
  ask:
    type: agent
    provider: local
    prompt: "Say hello."
    options: {temperature: 0.3, top_p: 0.9, max_tokens: 20, repeat_penalty: 1.2, context_window: 1024, seed: 7}
    on_success: other
  other:
    type: agent
    provider: scripted
    prompt: "untouched"
    options: {replies: ["scripted reply"]}
    on_success: done
  done: {type: terminal, message: "{{.states.ask.Output}}"}
"""


# --- the spec ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "provider", "options"),
    [
        ("ollama:llama3.2", "openai_compatible", {"model": "llama3.2", "base_url": OLLAMA_URL}),
        ("ollama:qwen2.5:7b", "openai_compatible", {"model": "qwen2.5:7b", "base_url": OLLAMA_URL}),
        (
            "ollama:qwen2.5:7b@http://gpu:11434/v1",
            "openai_compatible",
            {"model": "qwen2.5:7b", "base_url": "http://gpu:11434/v1"},
        ),
        (
            "openai:gpt-4o-mini",
            "openai_compatible",
            {"model": "gpt-4o-mini", "base_url": OPENAI_URL},
        ),
        (
            "smollm2@http://127.0.0.1:8000/v1",
            "openai_compatible",
            {"model": "smollm2", "base_url": "http://127.0.0.1:8000/v1"},
        ),
        ("models/qwen.gguf", "local", {"model": "models/qwen.gguf"}),
        ("local:~/m.gguf", "local", {"model": "~/m.gguf"}),
        ("claude", "claude", {}),
        ("claude:sonnet", "claude", {"model": "sonnet"}),
        ("copilot", "github_copilot", {}),
    ],
)
def test_each_form_of_the_spec(spec: str, provider: str, options: dict[str, str]) -> None:
    choice = parse_model(spec, env={})
    assert choice is not None
    assert (choice.provider, choice.options, choice.spec) == (provider, options, spec)


def test_local_is_the_bundled_model() -> None:
    assert parse_model("local") is None


def test_openai_without_a_url_lets_the_provider_read_openai_base_url() -> None:
    choice = parse_model("openai:gpt-4o-mini", env={"OPENAI_BASE_URL": "http://proxy/v1"})
    assert choice is not None and choice.options == {"model": "gpt-4o-mini"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "it is empty"),
        ("gpt-4o", "say what runs it: ollama:NAME, openai:NAME, NAME@URL"),
        ("olama:llama3", 'unknown kind "olama": did you mean "ollama:llama3"?'),
        ("http://127.0.0.1:8080/v1", "a server needs a model name too: NAME@URL"),
        ("ollama:", "the model name is missing"),
        ("x@ftp://host", "must start with http:// or https://"),
        ("local:", "local:PATH needs the path of a .gguf file"),
    ],
)
def test_a_spec_that_names_nothing_is_a_clear_error(spec: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_model(spec, env={})
    assert message in caught.value.message
    assert caught.value.message.startswith(f"model {spec!r}: ")
    assert "docs/providers.md" in (caught.value.hint or "")


def test_a_switched_step_keeps_only_the_options_that_still_mean_something() -> None:
    given = {"temperature": 0.3, "max_tokens": 60, "repeat_penalty": 1.1, "model": "x.gguf"}
    server = parse_model("m@http://h/v1")
    gguf = parse_model("other.gguf")
    cli = parse_model("claude:sonnet")
    assert server is not None and gguf is not None and cli is not None
    assert server.step_options(given) == {
        "temperature": 0.3,
        "model": "m",
        "base_url": "http://h/v1",
    }
    assert gguf.step_options(given) == {
        "temperature": 0.3, "max_tokens": 60, "repeat_penalty": 1.1, "model": "other.gguf",
    }  # fmt: skip
    assert cli.step_options(given) == {"model": "sonnet"}


def test_only_local_is_switched_and_each_name_gets_one_instance() -> None:
    made: list[str] = []

    def factory(name: str) -> object:
        made.append(name)
        return type("P", (), {"session_kind": "history", "name": name})()

    choice = ModelChoice("m@http://h/v1", "openai_compatible", {"model": "m"})
    providers = SwitchedProviders(factory, choice)  # type: ignore[arg-type]
    switched = providers("local")
    assert providers("local") is switched and switched.session_kind == "history"
    providers("scripted")
    assert made == ["openai_compatible", "scripted"]
    assert providers.describe("local") == "local → m@http://h/v1"
    assert providers.describe("scripted") == "scripted"


# --- the switch in a run ---------------------------------------------------------------------


async def test_model_runs_local_steps_on_the_server_and_leaves_the_others(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Reply.text("Hello from the server."))
    sink = Collect()
    result = await arun(
        load(LOCAL_CHAT),
        model=f"big-model@{openai_server.base_url}",
        storage=tmp_path,
        sink=sink,
        env={},
    )
    assert result.ok, result.error
    assert (result.outputs["ask"], result.outputs["other"]) == (
        "Hello from the server.",
        "scripted reply",
    )
    [request] = openai_server.requests
    body = request.body
    assert body["model"] == "big-model"
    assert body["messages"][-1] == {"role": "user", "content": "Say hello."}
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.3, 0.9, 7)
    # the bundled model's limits and llama.cpp settings stay behind
    assert not {"max_tokens", "max_completion_tokens", "repeat_penalty"} & set(body)
    headers = {e.step: e.detail for e in sink.of(StepStarted)}
    assert headers == {"ask": f"local → big-model@{openai_server.base_url}", "other": "scripted"}


async def test_awf_model_in_the_environment_is_the_same_switch(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Reply.text("From the environment."))
    env = {"AWF_MODEL": f"env-model@{openai_server.base_url}"}
    result = await arun(load(LOCAL_CHAT), storage=tmp_path, env=env, show=False)
    assert result.ok, result.error
    assert result.outputs["ask"] == "From the environment."
    assert openai_server.requests[0].body["model"] == "env-model"


async def test_model_argument_wins_over_the_environment(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Reply.text("Argument wins."))
    env = {"AWF_MODEL": "ollama:not-this-one@http://127.0.0.1:9/v1"}
    result = await arun(
        load(LOCAL_CHAT), model=f"arg-model@{openai_server.base_url}", env=env,
        storage=tmp_path, show=False,
    )  # fmt: skip
    assert result.ok, result.error
    assert openai_server.requests[0].body["model"] == "arg-model"


async def test_a_bad_model_fails_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="model 'gpt-4o': say what runs it"):
        await arun(load(LOCAL_CHAT), model="gpt-4o", storage=tmp_path, show=False)
    assert not list(tmp_path.glob("runs/*"))


async def test_a_conversation_partner_and_a_simulated_user_on_local_are_switched(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    import awf_nb

    openai_server.script(
        Reply.text("A first draft."), Reply.text("Yes, approved."), Reply.text("Any question?"),
        Reply.text("exit"),
    )  # fmt: skip
    exchange = """
name: pair
states:
  initial: draft
  draft:
    type: agent
    provider: local
    mode: conversation
    prompt: "Write."
    conversation:
      with: {name: reviewer, provider: local, prompt: "Review: {{.reply}}"}
      until: 'message startsWith "Yes"'
      max_turns: 3
    on_success: chat
  chat:
    type: agent
    provider: local
    mode: conversation
    prompt: "Hi"
    on_success: done
  done: {type: terminal}
"""
    user = awf_nb.SimulatedUser(persona="Says exit.", provider="local")
    result = await arun(
        load(exchange), model=f"m@{openai_server.base_url}", user=user, storage=tmp_path,
        show=False, env={},
    )  # fmt: skip
    assert result.ok, result.error
    sent = [r.body["messages"][-1]["content"] for r in openai_server.requests]
    assert sent[:2] == ["Write.", "Review: A first draft."]
    assert len(openai_server.requests) == 4  # writer, reviewer, chat, simulated user


def test_the_cli_flag_switches_and_shows_it_in_the_step_header(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Reply.text("Hello from the CLI run."))
    workflow = tmp_path / "switched.yaml"
    workflow.write_text(LOCAL_CHAT)
    done = run_awf(
        "run", str(workflow), "--storage", str(tmp_path / "runs"),
        "--model", f"cli-model@{openai_server.base_url}", cwd=ROOT, env={"AWF_MODEL": None},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Hello from the CLI run." in done.stdout
    assert f"▶ ask [agent, local → cli-model@{openai_server.base_url}]" in done.stderr
    assert openai_server.requests[0].body["model"] == "cli-model"


def test_the_cli_names_a_bad_model_and_exits_1(tmp_path: Path) -> None:
    workflow = tmp_path / "switched.yaml"
    workflow.write_text(LOCAL_CHAT)
    done = run_awf(
        "run", str(workflow), "--storage", str(tmp_path / "runs"), "--model", "olama:llama3",
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1
    assert 'unknown kind "olama": did you mean "ollama:llama3"?' in done.stderr


def test_the_magic_takes_the_same_flag(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    openai_server.script(Reply.text("Hello from the notebook run."))
    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("awf_nb")
    cell = (
        f"%%awf --model nb-model@{openai_server.base_url} --storage {tmp_path} "
        f"--no-interactive --out switched\n{LOCAL_CHAT}"
    )
    outcome = shell.run_cell(cell, store_history=False)
    assert outcome.success, outcome.error_in_exec
    assert shell.user_ns["switched"].result().outputs["ask"] == "Hello from the notebook run."
    assert openai_server.requests[0].body["model"] == "nb-model"
