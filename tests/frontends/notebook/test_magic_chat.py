"""`%%awf chat`: the cell body is the first message of a conversation, no YAML (in a plain
IPython shell; test_kernel_chat.py drives it in real kernels)."""

from __future__ import annotations

from typing import Any

import pytest

from awf_nb.frontends.notebook.chat_cell import chat_line
from awf_nb.frontends.notebook.handle import AwfCellError
from tests.support.notebook import cell
from tests.support.openai_server import OpenAIServer, Reply


def turns(ip: Any, name: str = "_awf") -> list[tuple[str, str]]:
    conversation = ip.user_ns[name].result().steps["chat"].conversation
    return [(t.role, t.content) for t in conversation.turns]


def test_the_body_is_the_first_message_and_braces_are_text(ip: Any, capsys) -> None:
    outcome = cell(
        ip,
        '%%awf chat --provider scripted --reply "And {{.this}}?" --reply ""\n'
        "What is {{.inputs.message}} in a template?\n",
    )

    assert outcome.success, outcome.error_in_exec
    # The scripted provider echoes: each reply is the message it was sent, as written.
    assert turns(ip) == [
        ("user", "What is {{.inputs.message}} in a template?"),
        ("assistant", "What is {{.inputs.message}} in a template?"),
        ("user", "And {{.this}}?"),
        ("assistant", "And {{.this}}?"),
    ]
    assert ip.user_ns["_awf"].prepared.workflow.name == "chat"


def test_a_system_prompt_and_a_headless_chat_ending_after_one_reply(ip: Any) -> None:
    outcome = cell(
        ip,
        '%%awf chat --provider scripted --system "Answer in French." --no-interactive --out c\n'
        "Hello\n",
    )

    assert outcome.success, outcome.error_in_exec
    conversation = ip.user_ns["c"].result().steps["chat"].conversation
    assert [(t.role, t.content) for t in conversation.turns] == [
        ("system", "Answer in French."),
        ("user", "Hello"),
        ("assistant", "Hello"),
    ]
    assert conversation.stopped_by == "user_exit"


def test_model_is_the_one_switch_of_the_examples(
    ip: Any, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --provider the chat is on the bundled model, which `--model` (or
    $AWF_MODEL) switches as it does for every example: here to a server of our own."""
    openai_server.script(Reply.text("Channels pass values between goroutines."))
    spec = f"test-model@{openai_server.base_url}"

    outcome = cell(ip, f'%%awf chat --model {spec} --reply ""\nWhat is a Go channel?\n')

    assert outcome.success, outcome.error_in_exec
    assert turns(ip)[-1] == ("assistant", "Channels pass values between goroutines.")
    (request,) = openai_server.requests
    assert request.body["model"] == "test-model"
    assert request.body["messages"][-1] == {"role": "user", "content": "What is a Go channel?"}

    openai_server.script(Reply.text("Same server, from the environment."))
    monkeypatch.setenv("AWF_MODEL", spec)
    outcome = cell(ip, '%%awf chat --reply ""\nAgain?\n')
    assert outcome.success, outcome.error_in_exec
    assert turns(ip)[-1] == ("assistant", "Same server, from the environment.")


def test_with_a_provider_model_is_that_providers_model(
    ip: Any, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.script(Reply.text("Hi."))

    outcome = cell(ip, '%%awf chat --provider openai_compatible --model m-7 --reply ""\nHi\n')

    assert outcome.success, outcome.error_in_exec
    assert openai_server.requests[0].body["model"] == "m-7"


def test_a_chat_line_over_a_workflow_still_names_that_workflow(ip: Any) -> None:
    outcome = cell(
        ip,
        '%%awf chat --reply ""\n'
        "states:\n  initial: s\n"
        "  s: {type: command, command: echo named, on_success: done}\n"
        "  done: {type: terminal}\n",
    )
    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["_awf"].prepared.workflow.name == "chat"
    assert ip.user_ns["_awf"].result().outputs["s"] == "named"


def test_what_is_a_chat_cell() -> None:
    assert chat_line("chat", "Hello") == ""
    assert chat_line("chat --model ollama:qwen", "Hello") == "--model ollama:qwen"
    assert chat_line("chatty", "Hello") is None  # a workflow named chatty
    assert chat_line("chat", "  \n") is None  # nothing to say: the workflow named chat
    assert chat_line("chat", "name: x\nstates:\n  initial: a\n") is None


def test_bad_chat_flags_are_usage_errors(ip: Any, capsys) -> None:
    outcome = cell(ip, "%%awf chat --systm hi\nHello\n")
    assert outcome.error_in_exec is not None
    assert "unrecognized arguments: --systm" in capsys.readouterr().err

    outcome = cell(ip, "%%awf chat --provider nope\nHello\n")
    assert isinstance(outcome.error_in_exec, AwfCellError)
