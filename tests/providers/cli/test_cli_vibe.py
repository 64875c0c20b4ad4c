"""The `mistral_vibe` provider: its parser on output recorded from the real `vibe` 3.0.2
(samples/vibe-*.jsonl and the report it wrote, samples/vibe-export/), and its command line
checked with the fake CLI installed as `vibe`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import SAMPLES, FakeCli

from awf_nb.engine.ports import (
    Final,
    McpServerSpec,
    Notice,
    ProviderEvent,
    SessionId,
    TextDelta,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.errors import ProviderError
from awf_nb.providers import create_provider
from awf_nb.providers.cli.base import ARGV_PROMPT_LIMIT, ExecutableNotFound, parse_line
from awf_nb.providers.cli.mistral_vibe import MistralVibeProvider, VibeParser
from tests.support import collect

pytestmark = pytest.mark.asyncio

SESSION = "53dbb5f3-bd18-44d1-7e1d-8ac5e21c4c67"


def _sample_session(name: str) -> str:
    first = (SAMPLES / f"vibe-{name}.jsonl").read_text().splitlines()[0]
    return json.loads(first)["sessionId"]


def parse(name: str, *, report: bool = True) -> tuple[list[ProviderEvent], VibeParser]:
    parser = VibeParser()
    events: list[ProviderEvent] = []
    for line in (SAMPLES / f"vibe-{name}.jsonl").read_text().splitlines():
        events += parse_line(parser, line, [])
    if report:
        parser.read_report(SAMPLES / "vibe-export" / f"{name}.json")
    return events, parser


async def test_a_first_turn_gives_the_session_the_reply_and_the_usage() -> None:
    events, parser = parse("turn1")
    outcome = parser.outcome()
    assert outcome.ok and outcome.text.startswith("FAKE-REPLY n=1")
    assert outcome.text.endswith("last_user=hello from turn one")
    assert [e.session_id for e in events if isinstance(e, SessionId)] == [_sample_session("turn1")]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == outcome.text
    assert outcome.usage == Usage(input_tokens=12, output_tokens=7)


async def test_a_resumed_turn_keeps_the_session() -> None:
    _, parser = parse("resume")
    assert parser.outcome().text.endswith("last_user=second turn please")
    assert parser.session_id == _sample_session("turn1")


async def test_a_tool_the_agent_ran_is_reported_once_before_the_reply() -> None:
    events, parser = parse("tool")
    tools = [e for e in events if isinstance(e, ToolUse)]
    assert tools == [ToolUse("file_system.read_file", "notes.txt")]
    last_tool = max(i for i, e in enumerate(events) if isinstance(e, ToolUse))
    first_text = min(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert last_tool < first_text
    assert parser.outcome().ok


async def test_an_api_error_is_vibes_own_message() -> None:
    _, parser = parse("error400")
    outcome = parser.outcome()
    assert not outcome.ok and outcome.text == ""
    assert outcome.error.startswith("Client error '400 Bad Request' for url")
    assert outcome.error.endswith("fake 400")


async def test_an_unknown_session_is_recognised() -> None:
    _, parser = parse("resume-unknown-id")
    outcome = parser.outcome()
    assert outcome.session_missing and not outcome.ok
    assert outcome.error == "Session not found: 00000000-0000-0000-0000-000000000000"


async def test_a_turn_limit_is_a_failure_that_says_which_option() -> None:
    _, parser = parse("turn-limit")
    outcome = parser.outcome()
    assert not outcome.ok
    assert outcome.error == "vibe stopped: turn_limit (limit); raise options.max_turns"


async def test_without_a_report_a_reply_is_success() -> None:
    _, parser = parse("turn1", report=False)
    assert parser.outcome().ok and parser.outcome().usage is None
    _, parser = parse("error400", report=False)
    assert not parser.outcome().ok


async def test_a_broken_report_is_said_so(tmp_path: Path) -> None:
    _, parser = parse("error400", report=False)
    (tmp_path / "export.json").write_text("{not json")
    parser.read_report(tmp_path / "export.json")
    assert parser.outcome().error == "vibe's report is not JSON"


# --- the command line (the fake CLI records how it was called) -----------------------------


def _turn(fake: FakeCli, prompt: str = "hello from turn one", **fields: Any) -> TurnRequest:
    return TurnRequest(prompt=prompt, working_dir=fake.workdir, env=fake.env, **fields)


async def _argv(fake_cli: FakeCli, prompt: str = "hello", **fields: Any) -> dict[str, Any]:
    fake_cli.install("vibe")
    fake_cli.plan({"sample": "vibe-turn1.jsonl"})
    events = await collect(MistralVibeProvider().stream(_turn(fake_cli, prompt, **fields)))
    assert isinstance(events[-1], Final)
    return fake_cli.records()[-1]


async def test_the_first_turn_command_line(fake_cli: FakeCli) -> None:
    record = await _argv(fake_cli, system_prompt="Be brief.", options={"model": "devstral"})
    argv = record["argv"]
    assert argv[0] == "--output-dir"
    report_folder = Path(argv[1])
    assert argv[2:] == ["--prompt=Be brief.\n\nhello", "--output", "streaming"]
    assert not report_folder.exists(), "the report folder goes with the turn"
    assert "VIBE_ACTIVE_MODEL" in record["env_keys"]


async def test_a_resumed_turn_and_awfs_options(fake_cli: FakeCli) -> None:
    options = {
        "agent_profile": "plan",
        "max_turns": 4,
        "max_tokens": 1000,
        "max_price": 2,
        "enabled_tools": ["read", "grep"],
        "add_dirs": ["../nope"] if False else ["docs", "/srv/data"],
        "workdir": "sub",
        "trust": True,
        "output_format": "text",
        "extra_args": ["--smart-approve"],
    }
    record = await _argv(fake_cli, "next", session_id=SESSION, options=options)
    assert record["argv"][2:] == [
        "--prompt=next", "--output", "streaming", "--resume", SESSION, "--agent", "plan",
        "--max-turns", "4", "--max-tokens", "1000", "--max-price", "2", "--workdir", "sub",
        "--enabled-tools", "read", "--enabled-tools", "grep", "--add-dir", "docs",
        "--add-dir", "/srv/data", "--trust", "--smart-approve",
    ]  # fmt: skip


async def test_skipping_permissions_is_the_auto_approve_agent(fake_cli: FakeCli) -> None:
    record = await _argv(fake_cli, options={"dangerously_skip_permissions": True})
    assert record["argv"][-2:] == ["--agent", "auto-approve"]
    with pytest.raises(ProviderError, match="agent_profile conflicts with dangerously_skip"):
        await _argv(fake_cli, options={"dangerously_skip_permissions": True, "agent_profile": "x"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"max_price": -1}, "max_price"),
        ({"enabled_tools": "read"}, "enabled_tools"),
        ({"workdir": "../up"}, "must not contain '..'"),
        ({"add_dirs": ["a/../../b"]}, "must not contain '..'"),
        ({"output_format": "yaml"}, "output_format"),
    ],
)
async def test_bad_options_are_refused_before_vibe_starts(
    fake_cli: FakeCli, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProviderError, match=message):
        await _argv(fake_cli, options=options)
    assert fake_cli.records() == []


async def test_a_long_prompt_goes_on_stdin_and_a_dash_prompt_stays_a_prompt(
    fake_cli: FakeCli,
) -> None:
    long_prompt = "x" * (ARGV_PROMPT_LIMIT + 10)
    record = await _argv(fake_cli, long_prompt)
    assert record["argv"][2:4] == ["-p", "--output"]
    assert record["stdin"] == long_prompt
    record = await _argv(fake_cli, "-v is not an option")
    assert record["argv"][2] == "--prompt=-v is not an option"


async def test_mcp_proxy_is_refused_saying_so(fake_cli: FakeCli) -> None:
    server = McpServerSpec(name="awf", command="awf", args=("mcp-serve",))
    with pytest.raises(ProviderError, match="mcp_proxy is not supported with mistral_vibe"):
        await _argv(fake_cli, mcp_servers=[server])


async def test_unknown_options_are_a_notice(fake_cli: FakeCli) -> None:
    fake_cli.install("vibe")
    fake_cli.plan({"sample": "vibe-turn1.jsonl"})
    provider = MistralVibeProvider()
    events = await collect(provider.stream(_turn(fake_cli, options={"temperature": 0.2})))
    assert Notice("mistral_vibe: option 'temperature' is not supported; ignored") in events


async def test_a_missing_vibe_says_how_to_install_it(fake_cli: FakeCli) -> None:
    request = TurnRequest(prompt="hi", working_dir=fake_cli.workdir, env={"PATH": "/nonexistent"})
    with pytest.raises(ExecutableNotFound) as caught:
        await collect(create_provider("mistral_vibe").stream(request))
    assert str(caught.value) == (
        'provider "mistral_vibe": executable "vibe" not found on PATH '
        "(pip install mistral-vibe, or uv tool install mistral-vibe)"
    )
