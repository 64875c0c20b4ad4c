"""The providers driving the REAL agent CLIs, offline, against a fake LLM API on 127.0.0.1.

The CLIs come from npm (tests/providers/cli/install_clis.sh installs them into
`$AWF_NPM_PREFIX`, default `<repo>/.npm-cli`), Mistral's Vibe from PyPI (into its own
virtualenv, `$AWF_VIBE_VENV`, default `<repo>/.vibe-cli`); a CLI that is not installed
there is skipped (a failure under AWF_REQUIRE_PEERS=1). Each runs with a fresh HOME and TMPDIR and talks only to the fake server
(cli_fake_llm.py), which records every request: so a two-turn session can show that the
CLI really resumed — turn 2's request carries turn 1's user and assistant messages — and,
with a scripted tool call, that a CLI really called a step's tool served by
`awf mcp-serve` (mcp_proxy): the next request carries the tool's output.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from cli_fake_llm import (
    FakeLlmServer,
    ScriptedToolCall,
    last_user_text,
    offered_tools,
    request_texts,
)

from awf_nb.engine.ports import (
    Final,
    McpServerSpec,
    ProviderEvent,
    SessionId,
    TextDelta,
    TurnRequest,
)
from awf_nb.errors import ProviderError
from awf_nb.providers.cli import base as cli_base
from awf_nb.providers.cli import gemini as gemini_module
from awf_nb.providers.cli.base import ARGV_PROMPT_LIMIT, CliProvider
from awf_nb.providers.cli.claude import ClaudeProvider
from awf_nb.providers.cli.codex import CodexProvider
from awf_nb.providers.cli.copilot import CopilotProvider
from awf_nb.providers.cli.gemini import GeminiProvider
from awf_nb.providers.cli.mistral_vibe import MistralVibeProvider
from awf_nb.providers.cli.opencode import OpencodeProvider
from tests.support import collect
from tests.support.peers import NPM_BIN

pytestmark = pytest.mark.real_cli

REPO = Path(__file__).resolve().parents[3]
VIBE_BIN = Path(os.environ.get("AWF_VIBE_VENV") or REPO / ".vibe-cli") / "bin"
# Generous: a cold start of a Node CLI on a busy 2-core machine takes seconds.
TURN_TIMEOUT = 120.0


@dataclass(frozen=True)
class RealCli:
    binary: str
    provider: type[CliProvider]
    request_path: str  # the API path of the CLI's model calls
    setup: Callable[[str, Path], tuple[dict[str, str], dict[str, Any]]]  # -> env, options
    bin_dir: Path = NPM_BIN


def _claude(url: str, home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    env = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    return env, {}


def _gemini(url: str, home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    # A fixed model: the default "auto" first asks a router model for a JSON verdict.
    return {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "test"}, {"model": "gemini-2.5-flash"}


def _codex(url: str, home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    config = [
        "model_provider=fake",
        'model_providers.fake.name="fake"',
        f'model_providers.fake.base_url="{url}/v1"',
        'model_providers.fake.wire_api="responses"',
        'model_providers.fake.env_key="FAKE_API_KEY"',
    ]
    extra = [arg for item in config for arg in ("-c", item)]
    return {"FAKE_API_KEY": "test"}, {"model": "gpt-5.5", "extra_args": extra}


def _opencode(url: str, home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    config = {
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{url}/v1", "apiKey": "test"},
                "models": {"fake-model": {"name": "Fake Model"}},
            }
        },
        "model": "fake/fake-model",
    }
    env = {
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
    }
    return env, {}


def _copilot(url: str, home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    env = {
        "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
        "COPILOT_PROVIDER_API_KEY": "test",
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
    }
    return env, {"model": "fake-model"}


def _vibe(url: str, home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    # Every Vibe setting can come from a VIBE_* variable (lists as JSON): a provider on the
    # fake server, a model on it; `options.model` picks it (VIBE_ACTIVE_MODEL).
    provider = {"name": "fake", "api_base": f"{url}/v1", "api_key_env_var": "FAKE_API_KEY"}
    model = {"name": "fake-model", "provider": "fake", "alias": "fake-model"}
    env = {
        "VIBE_PROVIDERS": json.dumps([provider]),
        "VIBE_MODELS": json.dumps([model]),
        "FAKE_API_KEY": "test",
    }
    return env, {"model": "fake-model"}


VIBE = RealCli("vibe", MistralVibeProvider, "/chat/completions", _vibe, VIBE_BIN)

REAL_CLIS = [
    RealCli("claude", ClaudeProvider, "/v1/messages", _claude),
    RealCli("gemini", GeminiProvider, ":streamGenerateContent", _gemini),
    RealCli("codex", CodexProvider, "/v1/responses", _codex),
    RealCli("opencode", OpencodeProvider, "/chat/completions", _opencode),
    RealCli("copilot", CopilotProvider, "/chat/completions", _copilot),
]


@pytest.fixture
def server() -> Iterator[FakeLlmServer]:
    fake = FakeLlmServer().start()
    yield fake
    fake.stop()


@dataclass
class Session:
    """One real CLI wired to the fake server, in its own HOME and working directory."""

    cli: RealCli
    server: FakeLlmServer
    workdir: Path
    env: dict[str, str]
    options: dict[str, Any]

    def turn(self, prompt: str, **fields: Any) -> TurnRequest:
        return TurnRequest(
            prompt=prompt,
            options=self.options,
            working_dir=self.workdir,
            env=self.env,
            timeout=TURN_TIMEOUT,
            **fields,
        )

    def model_calls(self) -> list[Any]:
        return [r.body for r in self.server.posts(self.cli.request_path)]

    def call_for(self, prompt: str) -> Any:
        """The last model call whose user message is `prompt` (skips title generation)."""
        calls = [b for b in self.model_calls() if prompt in last_user_text(b)]
        assert calls, f"no request carried {prompt!r}"
        return calls[-1]


# The CLIs whose sessions are checked end to end; the npm ones also serve awf's tools
# (mcp_proxy), which awf-nb does not offer through Vibe.
SESSION_CLIS = [*REAL_CLIS, VIBE]


def _installed(cli: RealCli) -> RealCli:
    if not (cli.bin_dir / cli.binary).exists():
        pytest.skip(
            f"{cli.binary} not installed in {cli.bin_dir} (tests/providers/cli/install_clis.sh)"
        )
    return cli


def _session(cli: RealCli, server: FakeLlmServer, tmp_path: Path) -> Session:
    home, workdir, tmp = tmp_path / "home", tmp_path / "work", tmp_path / "tmp"
    for folder in (home, workdir, tmp):
        folder.mkdir()
    env, options = cli.setup(server.url, home)
    env |= {
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PATH": os.pathsep.join([str(cli.bin_dir), str(NPM_BIN), os.environ.get("PATH", "")]),
        "NO_COLOR": "1",
    }
    return Session(cli, server, workdir, env, options)


async def _run(provider: CliProvider, request: TurnRequest) -> list[ProviderEvent]:
    return await asyncio.wait_for(collect(provider.stream(request)), TURN_TIMEOUT)


@pytest.mark.parametrize("cli", SESSION_CLIS, ids=[c.binary for c in SESSION_CLIS])
async def test_two_turn_session_resumes_for_real(
    cli: RealCli, server: FakeLlmServer, tmp_path: Path
) -> None:
    session = _session(_installed(cli), server, tmp_path)
    provider = cli.provider()

    first = await _run(provider, session.turn("hello from turn one", system_prompt="Be brief."))
    [session_id] = {e.session_id for e in first if isinstance(e, SessionId)}
    reply1 = first[-1]
    assert isinstance(reply1, Final) and reply1.text.startswith("FAKE-REPLY")
    assert reply1.text.endswith("last_user=hello from turn one")
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == reply1.text
    sent = request_texts(session.call_for("hello from turn one"))
    assert any("Be brief." in text for text in sent), "the system prompt"

    second = await _run(provider, session.turn("second turn please", session_id=session_id))
    assert isinstance(second[-1], Final)
    assert second[-1].text.endswith("last_user=second turn please")
    assert {e.session_id for e in second if isinstance(e, SessionId)} == {session_id}

    carried = request_texts(session.call_for("second turn please"))
    assert any("hello from turn one" in text for text in carried), "turn 1's user message"
    assert reply1.text in carried, "turn 1's assistant message"


def _claude_session(server: FakeLlmServer, tmp_path: Path) -> Session:
    return _session(_installed(REAL_CLIS[0]), server, tmp_path)


async def test_claude_unknown_session_is_reported_as_not_found(
    server: FakeLlmServer, tmp_path: Path
) -> None:
    session = _claude_session(server, tmp_path)
    unknown = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(ProviderError, match=f'session "{unknown}" not found'):
        await _run(ClaudeProvider(), session.turn("hello", session_id=unknown))


async def test_claude_api_error_is_a_provider_error(server: FakeLlmServer, tmp_path: Path) -> None:
    session = _claude_session(server, tmp_path)
    with pytest.raises(ProviderError, match=r"^claude: API Error: 400 .*fake 400"):
        await _run(ClaudeProvider(), session.turn("FAKE_HTTP_400 please"))


async def test_claude_gets_long_and_dash_prompts_intact(
    server: FakeLlmServer, tmp_path: Path
) -> None:
    session = _claude_session(server, tmp_path)
    provider = ClaudeProvider()
    long_prompt = "lorem ipsum " * (ARGV_PROMPT_LIMIT // 10) + "\nend of the long prompt"
    events = await _run(provider, session.turn(long_prompt))
    assert events[-1] == Final("FAKE-REPLY n=1 last_user=end of the long prompt")
    assert long_prompt.strip() in request_texts(session.call_for("end of the long prompt"))

    events = await _run(provider, session.turn("- a list item, not an option"))
    assert isinstance(events[-1], Final)
    assert events[-1].text.endswith("last_user=- a list item, not an option")


async def test_two_real_clis_write_and_review_each_in_its_own_session(
    server: FakeLlmServer, tmp_path: Path
) -> None:
    """The pair-review example: claude writes, codex reviews, each resuming its own session
    from its second turn on (both wired to the fake model server through their options)."""
    import yaml

    from awf_nb.api import arun

    claude, codex = (_installed(c) for c in (REAL_CLIS[0], REAL_CLIS[2]))
    (tmp_path / "writer").mkdir()
    (tmp_path / "reviewer").mkdir()
    writer = _session(claude, server, tmp_path / "writer")
    reviewer = _session(codex, server, tmp_path / "reviewer")
    workflow = yaml.safe_load((REPO / "workflows" / "pair-review.yaml").read_text())
    step = workflow["states"]["write"]
    step["options"] = {**writer.options, "env": writer.env}
    step["conversation"]["with"]["options"] = {**reviewer.options, "env": reviewer.env}
    step["conversation"]["max_turns"] = 3
    step["timeout"] = TURN_TIMEOUT
    result = await arun(
        yaml.safe_dump(workflow),
        {"task": "a slogan", "writer": "claude", "reviewer": "codex"},
        storage=tmp_path / "runs",
        cwd=tmp_path,
    )
    assert result.ok, result.error
    conv = result.steps["write"].conversation
    assert conv.total_turns == 3 and conv.partner_turns == 2
    assert conv.stopped_by == "max_turns"
    assert conv.session_id and conv.partner_session_id
    assert conv.session_id != conv.partner_session_id
    drafts = [t.content for t in conv.turns if t.role == "assistant"]
    reviews = [t.content for t in conv.turns if t.speaker == "reviewer"]
    assert all(text.startswith("FAKE-REPLY") for text in drafts + reviews)
    # each side's second call carries its own first exchange: the CLI resumed its session
    second_draft = writer.call_for(reviews[0])
    assert drafts[0] in request_texts(second_draft), "writer turn 2 resumed"
    second_review = reviewer.call_for(drafts[1])
    assert reviews[0] in request_texts(second_review), "reviewer turn 2 resumed"
    assert any(drafts[0] in text for text in request_texts(second_review))


# --- Mistral Vibe: what its parser reads, from the real CLI ------------------------------------


async def test_vibe_api_error_unknown_session_and_long_prompt(
    server: FakeLlmServer, tmp_path: Path
) -> None:
    session = _session(_installed(VIBE), server, tmp_path)
    provider = MistralVibeProvider()
    with pytest.raises(ProviderError, match=r"^mistral_vibe: Client error '400 Bad Request'"):
        await _run(provider, session.turn("FAKE_HTTP_400 please"))
    unknown = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(ProviderError, match=f'session "{unknown}" not found'):
        await _run(provider, session.turn("hello", session_id=unknown))
    long_prompt = "lorem ipsum " * (ARGV_PROMPT_LIMIT // 10) + "\nend of the long prompt"
    events = await _run(provider, session.turn(long_prompt))
    assert isinstance(events[-1], Final)
    assert events[-1].text.endswith("last_user=end of the long prompt")
    assert long_prompt.strip() in request_texts(session.call_for("end of the long prompt"))
    events = await _run(provider, session.turn("- a list item, not an option"))
    assert events[-1].text.endswith("last_user=- a list item, not an option")


async def test_vibe_reports_the_tool_it_ran_and_the_usage(tmp_path: Path) -> None:
    from awf_nb.engine.ports import ToolUse, Usage

    fake = FakeLlmServer(tool_calls=[ScriptedToolCall("read_file", {"path": "notes.txt"})])
    fake.start()
    try:
        session = _session(_installed(VIBE), fake, tmp_path)
        (session.workdir / "notes.txt").write_text("the note says 42\n")
        events = await _run(MistralVibeProvider(), session.turn("please read notes"))
    finally:
        fake.stop()
    assert [e for e in events if isinstance(e, ToolUse)] == [
        ToolUse("file_system.read_file", "notes.txt")
    ]
    assert any("the note says 42" in text for text in request_texts(session.model_calls()[-1]))
    assert Usage(input_tokens=24, output_tokens=14) in events  # vibe's report, both calls
    assert isinstance(events[-1], Final) and events[-1].text.startswith("FAKE-REPLY")


async def test_a_vibe_workflow_step_runs_and_resumes_its_session(
    server: FakeLlmServer, tmp_path: Path
) -> None:
    """`provider: mistral_vibe` in a workflow: a conversation of two turns in one session."""
    import yaml

    from awf_nb.api import arun

    session = _session(_installed(VIBE), server, tmp_path)
    step = {
        "type": "agent",
        "provider": "mistral_vibe",
        "mode": "conversation",
        "system_prompt": "Be brief.",
        "prompt": "first message",
        "options": {**session.options, "env": session.env},
        "timeout": TURN_TIMEOUT,
        "on_success": "done",
    }
    workflow = {
        "name": "vibe",
        "states": {"initial": "chat", "chat": step, "done": {"type": "terminal"}},
    }
    result = await arun(
        yaml.safe_dump(workflow), {}, replies=["second message"], storage=tmp_path / "runs",
        cwd=session.workdir,
    )  # fmt: skip
    assert result.ok, result.error
    conv = result.steps["chat"].conversation
    assert conv.total_turns == 2 and conv.session_id
    assert result.steps["chat"].tokens_estimated is False
    second = session.call_for("second message")
    assert any("first message" in text for text in request_texts(second)), "resumed"


# --- mcp_proxy: the step's tools served to the real CLI by `awf mcp-serve` -------------------

STAMP_TOOL = {
    "name": "stamp",
    "description": "Stamp a word: returns stamped-<word>",
    "parameters": {"word": {"type": "string", "description": "the word to stamp"}},
    "command": 'echo "stamped-$word"',
}
# How each CLI names the step's provider in a workflow.
WORKFLOW_PROVIDER = {"copilot": "github_copilot"}


def _proxied_step(session: Session, tools: dict[str, Any]) -> str:
    import yaml

    step = {
        "type": "agent",
        "provider": WORKFLOW_PROVIDER.get(session.cli.binary, session.cli.binary),
        "prompt": "please use your tools",
        "options": {**session.options, "env": session.env},
        "mcp_proxy": {"enable": True},
        "tools": tools,
        "timeout": TURN_TIMEOUT,
        "on_success": "done",
    }
    workflow = {
        "name": "proxied",
        "states": {"initial": "work", "work": step, "done": {"type": "terminal"}},
    }
    return yaml.safe_dump(workflow)


async def _run_proxied(session: Session, tools: dict[str, Any], *, yes: bool = False) -> Any:
    from awf_nb.api import arun

    workflow = _proxied_step(session, tools)
    return await arun(workflow, {}, storage=False, cwd=session.workdir, yes=yes)


def _calls_offering(session: Session, match: str) -> list[Any]:
    """The model calls that offered a tool whose name contains `match`."""
    return [b for b in session.model_calls() if any(match in t.name for t in offered_tools(b))]


def _carrying(session: Session, text: str) -> list[Any]:
    return [b for b in session.model_calls() if any(text in t for t in request_texts(b))]


@pytest.fixture
def cli_stderr(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The CLI processes a test starts (their `stderr_lines`), to show when it fails."""
    runs: list[Any] = []
    init = cli_base._Run.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        runs.append(self)

    monkeypatch.setattr(cli_base._Run, "__init__", keep)
    return runs


def _stderr_of(runs: list[Any]) -> str:
    return "\n".join(f"CLI stderr: {line}" for run in runs for line in run.stderr_lines)


async def _stamp_through_the_proxy(
    cli: RealCli, tmp_path: Path, word: str
) -> tuple[Session, Any] | None:
    """A step with the `stamp` command tool run by `cli` (mcp_proxy), the fake model
    asking for `stamp(word)`: the session and the run's result, which succeeded. None for
    gemini when not root: it then fails, saying why (checked here)."""
    fake = FakeLlmServer(tool_calls=[ScriptedToolCall("stamp", {"word": word})]).start()
    try:
        session = _session(_installed(cli), fake, tmp_path)
        result = await _run_proxied(session, {"commands": [STAMP_TOOL]})
    finally:
        fake.stop()
    if cli.binary == "gemini" and not gemini_module._running_as_root():
        # Gemini reads extra MCP servers only from root-owned settings files.
        assert not result.ok and "owned by root" in (result.error or "")
        return None
    assert result.ok, result.error
    return session, result


def _offered(session: Session, cli_stderr: list[Any]) -> str:
    """What each model request offered, and the CLI's stderr: for a failed assertion."""
    offered = [[t.name for t in offered_tools(b)] for b in session.model_calls()]
    return f"the requests offered {offered}\n" + _stderr_of(cli_stderr)


@pytest.mark.parametrize("cli", REAL_CLIS, ids=[c.binary for c in REAL_CLIS])
async def test_a_cli_step_calls_a_command_tool_through_awf_mcp_serve(
    cli: RealCli, tmp_path: Path, cli_stderr: list[Any]
) -> None:
    """The fake model calls the step's `stamp` tool, offered by the CLI from awf's MCP
    server; the CLI runs it through `awf mcp-serve` and sends the result back."""
    ran = await _stamp_through_the_proxy(cli, tmp_path, "proxied")
    if ran is None:
        return
    session, result = ran
    assert _calls_offering(session, "stamp"), (
        "the CLI offered awf's stamp tool to the model; " + _offered(session, cli_stderr)
    )
    answered = _carrying(session, "stamped-proxied")
    assert answered, "the command's output came back to the model in the next request"
    assert result.steps["work"].output.startswith("FAKE-REPLY")


# Longer than the startup grace some CLIs give a server they treat as optional (codex
# since 0.147: one second), far shorter than the startup timeout awf asks for.
SLOW_START_SECONDS = 3


def _serve_awf_as(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[McpServerSpec], McpServerSpec]
) -> None:
    """The run's `awf mcp-serve` server, as `change` makes it (started late, broken…)."""
    from awf_nb.tools import proxy

    make = proxy.McpProxy.__call__

    def changed(self: Any, *args: Any, **kwargs: Any) -> McpServerSpec:
        return change(make(self, *args, **kwargs))

    monkeypatch.setattr(proxy.McpProxy, "__call__", changed)


@pytest.fixture
def slow_awf_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """`awf mcp-serve` starts SLOW_START_SECONDS late, as on a busy machine."""

    def delayed(spec: McpServerSpec) -> McpServerSpec:
        script = f'sleep {SLOW_START_SECONDS}; exec "$@"'
        return replace(spec, command="/bin/sh", args=("-c", script, "sh", spec.command, *spec.args))

    _serve_awf_as(monkeypatch, delayed)


@pytest.mark.parametrize("cli", REAL_CLIS, ids=[c.binary for c in REAL_CLIS])
async def test_a_slow_starting_awf_server_is_waited_for_before_the_first_model_call(
    cli: RealCli, tmp_path: Path, cli_stderr: list[Any], slow_awf_server: None
) -> None:
    """The step's tools reach the model from its first request on (offered, or found by
    the first tool search of a CLI that defers MCP tools behind one), however long awf's
    server takes to start: the fake model asks for `stamp` once, on the first request
    where it can, and answers in text if it cannot — so a CLI that went ahead without
    the tools never runs it."""
    ran = await _stamp_through_the_proxy(cli, tmp_path, "late")
    if ran is None:
        return
    session, _ = ran
    assert _carrying(session, "stamped-late"), "the model could call awf's stamp tool; " + _offered(
        session, cli_stderr
    )


async def test_a_codex_step_whose_awf_server_cannot_start_fails_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """codex waits for awf's server (`required`): one that exits at once fails the step
    with codex's reason, rather than a turn run without the step's tools."""
    _serve_awf_as(monkeypatch, lambda spec: replace(spec, command="/bin/false", args=()))
    fake = FakeLlmServer().start()
    try:
        session = _session(_installed(REAL_CLIS[2]), fake, tmp_path)
        result = await _run_proxied(session, {"commands": [STAMP_TOOL]})
    finally:
        fake.stop()
    assert not result.ok
    assert "required MCP servers failed to initialize: awf" in (result.error or "")
    assert not session.model_calls(), "no request went to the model without the tools"


async def test_a_builtin_tool_reads_a_file_through_the_proxy(tmp_path: Path) -> None:
    """claude calls awf's Read (not its own): the file's text reaches the model."""
    call = ScriptedToolCall("awf__Read", {"path": "notes.txt"})
    fake = FakeLlmServer(tool_calls=[call]).start()
    try:
        session = _session(_installed(REAL_CLIS[0]), fake, tmp_path)
        (session.workdir / "notes.txt").write_text("the note says 42\n")
        result = await _run_proxied(session, {"builtin": ["Read"]})
    finally:
        fake.stop()
    assert result.ok, result.error
    assert _calls_offering(session, "mcp__awf__Read")
    assert _carrying(session, "the note says 42"), "Read's result went back to the model"


@pytest.mark.parametrize("yes", [False, True], ids=["refused", "yes"])
async def test_a_confirmable_tool_runs_inside_the_cli_only_with_yes(
    tmp_path: Path, yes: bool
) -> None:
    """No one can be asked inside the CLI's turn: `confirm` tools are refused unless --yes."""
    fake = FakeLlmServer(tool_calls=[ScriptedToolCall("stamp", {"word": "ok"})]).start()
    try:
        session = _session(_installed(REAL_CLIS[0]), fake, tmp_path)
        tools = {"commands": [STAMP_TOOL], "confirm": ["stamp"]}
        result = await _run_proxied(session, tools, yes=yes)
    finally:
        fake.stop()
    assert result.ok, result.error
    assert bool(_carrying(session, "stamped-ok")) is yes
    assert bool(_carrying(session, "stamp was refused")) is not yes
