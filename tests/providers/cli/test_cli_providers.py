"""The five CLI providers end to end against a fake agent CLI placed first on PATH.

The fake (cli_fake_agent.py) records how it was started and replays a recorded sample of
the real CLI's output slowly, line by line. These tests check the command lines, the
streaming, sessions across turns, history replay, errors, and that cancel and timeout
kill the whole process group.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import SAMPLES, FakeCli, wait_until_gone

from awf_nb.api import arun
from awf_nb.engine.events import RunWarning
from awf_nb.engine.ports import (
    Final,
    Message,
    Notice,
    Provider,
    ProviderEvent,
    SessionId,
    TextDelta,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.errors import EXIT_DEFINITION, EXIT_USER, ProviderError
from awf_nb.providers.cli import base as base_module
from awf_nb.providers.cli import claude as claude_module
from awf_nb.providers.cli.base import ARGV_PROMPT_LIMIT, CliProvider, ExecutableNotFound
from awf_nb.providers.cli.claude import ClaudeProvider
from awf_nb.providers.cli.codex import CodexProvider
from awf_nb.providers.cli.copilot import CopilotProvider
from awf_nb.providers.cli.gemini import GeminiProvider
from awf_nb.providers.cli.opencode import OpencodeProvider
from tests.support import collect
from tests.support.events import Collect
from tests.support.processes import process_alive
from tests.support.waiting import until


def _after(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _with_prefix(argv: list[str], prefix: str) -> str | None:
    return next((a[len(prefix) :] for a in argv if a.startswith(prefix)), None)


def _claude_prompt(record: dict[str, Any]) -> str | None:
    argv = record["argv"]
    if record["stdin"]:
        return record["stdin"]
    if "--" in argv:  # a prompt that starts with "-" comes last, after "--"
        return argv[argv.index("--") + 1]
    return _after(argv, "-p")


def _flag_prompt(record: dict[str, Any]) -> str | None:
    """gemini and copilot: `-p P`, `--prompt=P`, or stdin."""
    argv = record["argv"]
    return record["stdin"] or _after(argv, "-p") or _with_prefix(argv, "--prompt=")


@dataclass(frozen=True)
class Cli:
    """One provider, its recorded samples, and how to read its command line back."""

    provider: type[CliProvider]
    binary: str
    package: str
    session_id: str
    turn1: str
    resume: str
    reply1: str
    prompt_of: Callable[[dict[str, Any]], str | None]  # the prompt the CLI received
    resumed_id: Callable[[list[str]], str | None]
    required: tuple[str, ...]  # flags every call must carry

    def make(self) -> CliProvider:
        provider = self.provider()
        provider.kill_grace = 0.3
        provider.eof_grace = 0.3
        return provider


CLAUDE = Cli(
    ClaudeProvider,
    "claude",
    "@anthropic-ai/claude-code",
    "22537ea3-ed6c-4486-9c0a-88fea39bd1b3",
    "claude-turn1.jsonl",
    "claude-resume.jsonl",
    "FAKE-REPLY n=1 msgs=1 last_user=hello from turn one",
    prompt_of=_claude_prompt,
    resumed_id=lambda argv: _after(argv, "-r"),
    required=("--output-format", "stream-json", "--verbose"),
)
GEMINI = Cli(
    GeminiProvider,
    "gemini",
    "@google/gemini-cli",
    "fc89fb5f-80cb-45ff-95cc-7ebaa47fff00",
    "gemini-turn1.jsonl",
    "gemini-resume.jsonl",
    "FAKE-REPLY n=1 msgs=1 last_user=hello from turn one",
    prompt_of=_flag_prompt,
    resumed_id=lambda argv: _after(argv, "--resume"),
    required=("--output-format", "stream-json", "--skip-trust"),
)
CODEX = Cli(
    CodexProvider,
    "codex",
    "@openai/codex",
    "01a2012c-8ad4-7f71-8fd7-c934a65abc74",
    "codex-turn1.jsonl",
    "codex-resume.jsonl",
    "FAKE-REPLY n=1 msgs=2 last_user=hello from turn one",
    prompt_of=lambda r: r["stdin"] or r["argv"][-1],
    resumed_id=lambda argv: argv[2] if argv[1:2] == ["resume"] else None,
    required=("exec", "--json", "--skip-git-repo-check"),
)
OPENCODE = Cli(
    OpencodeProvider,
    "opencode",
    "opencode-ai",
    "ses_dfed329c2ffetKdaHS3TNMYly1",
    "opencode-turn1.jsonl",
    "opencode-resume.jsonl",
    "FAKE-REPLY n=2 msgs=1 last_user=hello from turn one",
    prompt_of=lambda r: r["stdin"],
    resumed_id=lambda argv: _after(argv, "-s"),
    required=("run", "--format", "json"),
)
COPILOT = Cli(
    CopilotProvider,
    "copilot",
    "@github/copilot",
    "07538f33-a0d5-4ac6-a438-a6cf29ae5d66",
    "copilot-turn1.jsonl",
    "copilot-resume.jsonl",
    "FAKE-REPLY n=1 msgs=1 last_user=hello from turn one",
    prompt_of=_flag_prompt,
    resumed_id=lambda argv: _with_prefix(argv, "--resume="),
    required=("--output-format=json", "--silent"),
)
CLIS = [CLAUDE, GEMINI, CODEX, OPENCODE, COPILOT]
by_name = pytest.mark.parametrize("cli", CLIS, ids=[c.binary for c in CLIS])


def turn(fake: FakeCli, prompt: str = "hello from turn one", **fields: Any) -> TurnRequest:
    env = {**fake.env, **fields.pop("env", {})}
    return TurnRequest(prompt=prompt, working_dir=fake.workdir, env=env, **fields)


def texts(events: list[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def only(events: list[ProviderEvent], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# --- the contract --------------------------------------------------------------------------


@by_name
def test_providers_meet_the_provider_protocol(cli: Cli) -> None:
    provider = cli.provider()
    assert isinstance(provider, Provider)
    assert provider.session_kind == "session_id"


def test_copilot_takes_the_registry_name_it_is_created_under() -> None:
    assert CopilotProvider().name == "github_copilot"
    assert CopilotProvider("copilot").name == "copilot"


# --- single turn: streaming ------------------------------------------------------------------


@by_name
async def test_single_turn_streams_text_before_the_process_ends(
    fake_cli: FakeCli, cli: Cli
) -> None:
    fake_cli.install(cli.binary)
    # The fake holds back its last line until it sees the gate: the only way this turn can
    # finish is if the first text delta reached us while the process was still running.
    fake_cli.plan({"sample": cli.turn1, "gate": True})
    events: list[ProviderEvent] = []
    async for event in cli.make().stream(turn(fake_cli, system_prompt="Be brief.")):
        events.append(event)
        if isinstance(event, TextDelta):
            fake_cli.open_gate()

    assert fake_cli.gate_passed()
    assert isinstance(events[-1], Final) and events[-1].text == cli.reply1
    assert texts(events) == cli.reply1
    first_delta = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert first_delta < len(events) - 1
    assert only(events, SessionId) == [SessionId(cli.session_id)]
    assert len(only(events, Final)) == 1


@by_name
async def test_first_turn_command_line(fake_cli: FakeCli, cli: Cli) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1})
    await collect(cli.make().stream(turn(fake_cli, system_prompt="Be brief.")))

    [record] = fake_cli.records()
    argv = record["argv"]
    assert all(flag in argv for flag in cli.required)
    assert cli.resumed_id(argv) is None
    assert record["cwd"] == str(fake_cli.workdir)
    if cli is CLAUDE:  # a flag of its own; the prompt right after -p
        assert _after(argv, "--system-prompt") == "Be brief."
        assert argv[:2] == ["-p", "hello from turn one"]
        assert record["stdin"] == ""
    else:
        assert cli.prompt_of(record) == "Be brief.\n\nhello from turn one"
    if cli is not OPENCODE:
        assert record["stdin"] == ""  # stdin is /dev/null: nothing to wait for


def test_codex_command_line_order() -> None:
    provider = CodexProvider()
    from awf_nb.providers.cli.base import CliOptions, CliTurn

    first = provider.build_command(CliTurn("hi", None, None, CliOptions()))
    assert first.argv == ["codex", "exec", "--json", "--skip-git-repo-check", "hi"]
    resumed = provider.build_command(CliTurn("hi", None, "T1", CliOptions(model="m")))
    assert resumed.argv == [
        "codex", "exec", "resume", "T1", "--json", "--skip-git-repo-check", "--model", "m", "hi"
    ]  # fmt: skip


# --- conversations ---------------------------------------------------------------------------


@by_name
async def test_three_turn_conversation_resumes_the_session(fake_cli: FakeCli, cli: Cli) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1}, {"sample": cli.resume})
    provider = cli.make()

    first = await collect(provider.stream(turn(fake_cli, system_prompt="Be brief.")))
    [session] = only(first, SessionId)
    finals = [first[-1]]
    for prompt in ("second turn please", "and a third"):
        events = await collect(
            provider.stream(turn(fake_cli, prompt, session_id=session.session_id))
        )
        assert only(events, SessionId)[-1] == session
        finals.append(events[-1])

    assert [type(f) for f in finals] == [Final, Final, Final]
    records = fake_cli.records()
    assert len(records) == 3
    assert cli.resumed_id(records[0]["argv"]) is None
    for record, prompt in zip(records[1:], ("second turn please", "and a third"), strict=True):
        assert cli.resumed_id(record["argv"]) == cli.session_id
        assert cli.prompt_of(record) == prompt  # no system prompt on resumed turns
        assert "--system-prompt" not in record["argv"]
    assert {r["cwd"] for r in records} == {str(fake_cli.workdir)}


@by_name
async def test_history_is_replayed_when_there_is_no_session_id(fake_cli: FakeCli, cli: Cli) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1})
    history = [
        Message("system", "Be brief."),
        Message("user", "what is 2+2?"),
        Message("assistant", "4"),
    ]
    events = await collect(cli.make().stream(turn(fake_cli, "and times 3?", history=history)))

    # The engine says that history is replayed, once per step (a notice here would be a
    # second warning for the same event): see the test below.
    assert only(events, Notice) == []
    [record] = fake_cli.records()
    assert cli.resumed_id(record["argv"]) is None
    prompt = cli.prompt_of(record)
    assert prompt is not None
    assert prompt.index("User: what is 2+2?") < prompt.index("Assistant: 4")
    assert prompt.endswith("and times 3?")
    # The new session needs the system prompt back.
    if cli is CLAUDE:
        assert _after(record["argv"], "--system-prompt") == "Be brief."
    else:
        assert prompt.startswith("Be brief.\n\n")
    assert isinstance(events[-1], Final)


async def test_a_session_replayed_in_a_later_step_is_one_warning(
    fake_cli: FakeCli, tmp_path: Path
) -> None:
    """`continue_from` a step whose CLI reported no session id: its turns are replayed in
    the prompt of a new session, and the run says so once (not once per layer)."""
    samples = tmp_path / "samples"
    samples.mkdir()
    lines = (SAMPLES / "claude-turn1.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    for event in events:
        event.pop("session_id", None)
    (samples / "no-session.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (samples / "turn1.jsonl").write_text((SAMPLES / "claude-turn1.jsonl").read_text())
    fake_cli.install("claude")
    fake_cli.plan({"sample": "no-session.jsonl"}, {"sample": "turn1.jsonl"})
    env = {**fake_cli.env, "FAKE_CLI_SAMPLES": str(samples)}
    step = {"type": "agent", "provider": "claude", "options": {"env": env}}
    workflow = {
        "name": "seeded",
        "states": {
            "initial": "seed",
            "seed": {**step, "prompt": "summarise", "conversation": {}, "on_success": "recall"},
            "recall": {
                **step,
                "prompt": "now the risks",
                "conversation": {"continue_from": "seed"},
                "on_success": "done",
            },
            "done": {"type": "terminal"},
        },
    }
    sink = Collect()
    result = await arun(
        yaml.safe_dump(workflow), {}, storage=False, cwd=fake_cli.workdir, sink=sink
    )
    assert result.ok, result.error
    assert result.steps["seed"].conversation.session_id == ""
    assert [w.message for w in sink.of(RunWarning)] == [
        "step recall: claude has no session id to resume; replaying 2 earlier messages in "
        "the prompt of a new session"
    ]
    _seed, second = fake_cli.records()
    assert CLAUDE.resumed_id(second["argv"]) is None
    assert "User: summarise" in (CLAUDE.prompt_of(second) or "")


async def test_resumed_turn_ignores_history(fake_cli: FakeCli) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-resume.jsonl"})
    history = [Message("user", "q"), Message("assistant", "a")]
    events = await collect(
        CLAUDE.make().stream(turn(fake_cli, "next", session_id="S1", history=history))
    )
    assert not only(events, Notice)
    assert CLAUDE.prompt_of(fake_cli.records()[0]) == "next"


# --- tools, usage ----------------------------------------------------------------------------


async def test_tool_use_and_usage_come_through(fake_cli: FakeCli) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-tool.jsonl"})
    events = await collect(CLAUDE.make().stream(turn(fake_cli, "RUN_TOOL please")))
    assert only(events, ToolUse) == [ToolUse("Bash", "echo TOOL-OK")]
    assert only(events, Usage) == [Usage(input_tokens=24, output_tokens=14, cost_usd=0.000282)]
    assert events.index(only(events, Usage)[0]) == len(events) - 2  # just before Final


# --- cancellation and timeouts -------------------------------------------------------------


@by_name
async def test_cancel_mid_stream_kills_the_process_group(fake_cli: FakeCli, cli: Cli) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1, "hang": True, "spawn_child": True})
    provider = cli.make()
    first_text = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(turn(fake_cli)):
            if isinstance(event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_text.wait(), 10)
    [record] = fake_cli.records()
    assert process_alive(record["pid"]) and process_alive(record["child_pid"])
    assert record["pgid"] == record["pid"]  # its own process group
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_until_gone([record["pid"], record["child_pid"]], 1.0) == []
    assert not provider._running


async def test_closing_the_generator_kills_the_process_group(fake_cli: FakeCli) -> None:
    fake_cli.install("gemini")
    fake_cli.plan({"sample": "gemini-turn1.jsonl", "hang": True, "spawn_child": True})
    stream = GEMINI.make().stream(turn(fake_cli))
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()  # what the engine does when it stops a turn
    [record] = fake_cli.records()
    assert wait_until_gone([record["pid"], record["child_pid"]], 1.0) == []


@pytest.mark.parametrize("stubborn", [False, True], ids=["obeys-sigterm", "ignores-sigterm"])
async def test_timeout_kills_the_process_group(fake_cli: FakeCli, stubborn: bool) -> None:
    fake_cli.install("claude")
    fake_cli.plan(
        {"sample": "claude-turn1.jsonl", "hang": True, "spawn_child": True, "ignore_term": stubborn}
    )
    provider = CLAUDE.make()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(collect(provider.stream(turn(fake_cli))), 0.8)
    [record] = fake_cli.records()
    # Both gone (when SIGTERM is ignored, SIGKILL followed it); the wait is a hang guard.
    assert wait_until_gone([record["pid"], record["child_pid"]], 10.0) == []


async def test_a_child_left_holding_stdout_is_stopped_after_the_cli_exits(
    fake_cli: FakeCli,
) -> None:
    """The CLI answered and exited, but a child it started (60 s of sleep) still holds the
    output pipe: the turn ends after the grace period, with the reply, and the child is
    stopped."""
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl", "spawn_child": True})
    events = await asyncio.wait_for(collect(CLAUDE.make().stream(turn(fake_cli))), 30)
    assert [e.text for e in events if isinstance(e, Final)] == [CLAUDE.reply1]
    [record] = fake_cli.records()
    assert wait_until_gone([record["pid"], record["child_pid"]], 10.0) == []


async def test_aclose_kills_a_turn_still_running(fake_cli: FakeCli) -> None:
    fake_cli.install("codex")
    fake_cli.plan({"sample": "codex-turn1.jsonl", "hang": True})
    provider = CODEX.make()
    task = asyncio.create_task(collect(provider.stream(turn(fake_cli))))
    await until(lambda: bool(fake_cli.records() and provider._running), "the CLI to start")
    await provider.aclose()
    [record] = fake_cli.records()
    assert wait_until_gone([record["pid"]], 1.0) == []
    with pytest.raises(ProviderError, match="killed by SIGTERM"):
        await asyncio.wait_for(task, 5)


async def test_a_turn_starting_after_aclose_is_killed_at_once(fake_cli: FakeCli) -> None:
    fake_cli.install("codex")
    fake_cli.plan({"sample": "codex-turn1.jsonl", "hang": True})
    provider = CODEX.make()
    await provider.aclose()
    with pytest.raises(ProviderError, match="provider was closed"):
        await asyncio.wait_for(collect(provider.stream(turn(fake_cli))), 5)
    assert not provider._running


async def test_a_child_holding_stdout_does_not_hang_the_turn(fake_cli: FakeCli) -> None:
    # The CLI exits, but a process it started keeps our stdout pipe open.
    fake_cli.install("opencode")
    fake_cli.plan({"sample": "opencode-turn1.jsonl", "spawn_child": True})
    events = await asyncio.wait_for(collect(OPENCODE.make().stream(turn(fake_cli))), 10)
    assert isinstance(events[-1], Final) and events[-1].text == OPENCODE.reply1
    [record] = fake_cli.records()
    assert wait_until_gone([record["child_pid"]], 1.0) == []


# --- errors ----------------------------------------------------------------------------------


@by_name
async def test_missing_binary_says_how_to_install_it(fake_cli: FakeCli, cli: Cli) -> None:
    provider = cli.make()
    request = turn(fake_cli, env={"PATH": str(fake_cli.bin_dir)})  # nothing installed there
    with pytest.raises(ExecutableNotFound) as caught:
        await collect(provider.stream(request))
    assert str(caught.value) == (
        f'provider "{provider.name}": executable "{cli.binary}" not found on PATH '
        f"(npm install -g {cli.package})"
    )
    assert caught.value.exit_code == EXIT_USER
    assert isinstance(caught.value, ProviderError)


@pytest.mark.parametrize(
    ("cli", "step", "message"),
    [
        (
            CLAUDE,
            {"sample": "claude-error400.jsonl", "exit": 1},
            "claude: API Error: 400 fake 400 (exit status 1)",
        ),
        (
            GEMINI,
            {
                "sample": "gemini-error400.jsonl",
                "stderr": (
                    Path(__file__).parent / "samples/gemini-error400.stderr.txt"
                ).read_text(),
                "exit": 144,
            },
            "gemini: API Error: fake 400 (HTTP 400) (exit status 144)",
        ),
        (
            CODEX,
            {
                "sample": "codex-error400.jsonl",
                "stderr": "Reading additional input from stdin...\n",
                "exit": 1,
            },
            "codex: fake 400 (invalid_request_error) (exit status 1)",
        ),
        (
            OPENCODE,
            {"sample": "opencode-error400.jsonl", "exit": 1},
            "opencode: APIError: fake 400 (HTTP 400) (exit status 1)",
        ),
        (
            COPILOT,
            {"sample": "copilot-error400.jsonl", "exit": 1},
            "github_copilot: 400 fake 400 (exit status 1)",
        ),
        (
            CLAUDE,
            {
                "sample": "",
                "stderr": "node: bad option\nError: something broke\n  at x\n",
                "exit": 2,
            },
            "claude: Error: something broke (exit status 2)",
        ),
        (
            COPILOT,
            {"sample": "", "stderr": "segfault-ish\nlast words\n", "exit": 3},
            "github_copilot: segfault-ish | last words (exit status 3)",
        ),
        (
            CODEX,
            {"sample": "", "exit": 0},
            "codex: codex ended without reporting a result (exit status 0)",
        ),
        (
            CLAUDE,
            {"sample": "claude-turn1.jsonl", "exit": 5, "stderr": "crashed while exiting\n"},
            "claude: exit status 5: crashed while exiting",
        ),
    ],
    ids=[
        "claude-400",
        "gemini-400",
        "codex-400",
        "opencode-400",
        "copilot-400",
        "stderr-error-line",
        "stderr-last-lines",
        "no-output",
        "success-then-bad-exit",
    ],
)
async def test_failure_messages_carry_the_clis_own_words(
    fake_cli: FakeCli, cli: Cli, step: dict[str, Any], message: str
) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan(step)
    events: list[ProviderEvent] = []
    with pytest.raises(ProviderError) as caught:
        async for event in cli.make().stream(turn(fake_cli)):
            events.append(event)
    assert str(caught.value) == message
    assert not only(events, Final)


# What each real CLI printed for a resume id it does not know (see the README).
UNKNOWN_SESSION_STDERR = {
    "gemini": 'Error resuming session: Invalid session identifier "X".\n',
    "codex": (
        "Error: thread/resume: thread/resume failed: no rollout found for thread id X "
        "(code -32600)\n\nStack backtrace:\n   0: <unknown>\n"
    ),
    "opencode": "\x1b[91m\x1b[1mError: \x1b[0mSession not found\n",
    "copilot": (
        "Error: No session, task, or name matched 'X'.\n\n"
        "To resume by session or task ID:  copilot --resume=<id>\n"
    ),
}


@pytest.mark.parametrize(
    ("cli", "step"),
    [
        (CLAUDE, {"sample": "claude-resume-unknown-id.jsonl", "exit": 1}),
        (GEMINI, {"sample": "", "exit": 42, "stderr": UNKNOWN_SESSION_STDERR["gemini"]}),
        (CODEX, {"sample": "", "exit": 1, "stderr": UNKNOWN_SESSION_STDERR["codex"]}),
        (OPENCODE, {"sample": "", "exit": 1, "stderr": UNKNOWN_SESSION_STDERR["opencode"]}),
        (COPILOT, {"sample": "", "exit": 1, "stderr": UNKNOWN_SESSION_STDERR["copilot"]}),
    ],
    ids=[c.binary for c in CLIS],
)
async def test_unknown_resume_id_says_the_session_was_not_found(
    fake_cli: FakeCli, cli: Cli, step: dict[str, Any]
) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan(step)
    request = turn(fake_cli, "again", session_id="X")
    with pytest.raises(ProviderError) as caught:
        await collect(cli.make().stream(request))
    error = caught.value
    assert error.message.startswith(f'{cli.make().name}: session "X" not found, cannot resume it: ')
    assert "\x1b" not in error.message and "backtrace" not in error.message
    assert error.hint and str(fake_cli.workdir) in error.hint


async def test_missing_working_directory_is_a_clear_error(fake_cli: FakeCli) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl"})
    request = turn(fake_cli)
    request.working_dir = fake_cli.workdir / "nope"
    with pytest.raises(ProviderError, match=r"working directory .*nope does not exist"):
        await collect(CLAUDE.make().stream(request))


async def test_non_json_stdout_lines_do_not_break_the_turn(fake_cli: FakeCli) -> None:
    sample = fake_cli.folder / "noisy.jsonl"
    original = (Path(__file__).parent / "samples/codex-turn1.jsonl").read_text()
    sample.write_text("Some banner on stdout\n" + original + '{"type":"not.known"}\n')
    fake_cli.install("codex")
    fake_cli.plan({"sample": str(sample)})
    events = await collect(CODEX.make().stream(turn(fake_cli)))
    assert events[-1] == Final(CODEX.reply1)


# --- options ---------------------------------------------------------------------------------

OPTIONS = {
    "model": "m-1",
    "dangerously_skip_permissions": True,
    "allowed_tools": ["Read", "Bash(git:*)"],
    "extra_args": ["--x-extra", "v"],
    "env": {"FAKE_OPTION_ENV": "from-options"},
}


@pytest.mark.parametrize(
    ("cli", "expected", "ignored_tools"),
    [
        (
            CLAUDE,
            ["--model", "m-1", "--allowedTools=Read,Bash(git:*)", "--dangerously-skip-permissions"],
            False,
        ),
        (GEMINI, ["--model", "m-1", "--approval-mode=yolo"], True),
        (CODEX, ["--model", "m-1", "--dangerously-bypass-approvals-and-sandbox"], True),
        (OPENCODE, ["--model", "m-1", "--dangerously-skip-permissions"], True),
        (
            COPILOT,
            ["--model=m-1", "--allow-all", "--allow-tool=Read", "--allow-tool=Bash(git:*)"],
            False,
        ),
    ],
    ids=[c.binary for c in CLIS],
)
async def test_options_reach_the_command_line(
    fake_cli: FakeCli, cli: Cli, expected: list[str], ignored_tools: bool
) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1})
    request = turn(fake_cli, options=OPTIONS, env={"FAKE_TURN_ENV": "from-turn"})
    events = await collect(cli.make().stream(request))

    [record] = fake_cli.records()
    argv = record["argv"]
    for flag in expected:
        assert flag in argv
    if "--model" in expected:
        assert _after(argv, "--model") == "m-1"
    # extra_args verbatim, after our own flags (codex: before the prompt, its positional).
    tail = argv[-3:-1] if cli is CODEX else argv[-2:]
    assert tail == ["--x-extra", "v"]
    assert record["env"]["FAKE_OPTION_ENV"] == "from-options"
    assert record["env"]["FAKE_TURN_ENV"] == "from-turn"
    notices = [n.message for n in only(events, Notice)]
    assert any("'allowed_tools' is not supported" in n for n in notices) is ignored_tools


@pytest.mark.parametrize("root", [True, False])
async def test_claude_sets_is_sandbox_when_root_skips_permissions(
    fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, root: bool
) -> None:
    monkeypatch.setattr(claude_module, "_running_as_root", lambda: root)
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl"})
    options = {"dangerously_skip_permissions": True}
    await collect(CLAUDE.make().stream(turn(fake_cli, options=options)))
    [record] = fake_cli.records()
    assert "--dangerously-skip-permissions" in record["argv"]
    assert record["env"].get("IS_SANDBOX") == ("1" if root else None)


async def test_the_users_is_sandbox_wins(
    fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claude_module, "_running_as_root", lambda: True)
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl"})
    options = {"dangerously_skip_permissions": True, "env": {"IS_SANDBOX": "0"}}
    await collect(CLAUDE.make().stream(turn(fake_cli, options=options)))
    assert fake_cli.records()[0]["env"]["IS_SANDBOX"] == "0"


async def test_claude_without_skip_permissions_sets_no_sandbox(
    fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl"})
    await collect(CLAUDE.make().stream(turn(fake_cli)))
    [record] = fake_cli.records()
    assert "IS_SANDBOX" not in record["env"]
    assert "--dangerously-skip-permissions" not in record["argv"]


async def test_unknown_options_are_noticed_once_per_run(fake_cli: FakeCli) -> None:
    fake_cli.install("gemini")
    fake_cli.plan({"sample": "gemini-turn1.jsonl"})
    provider = GEMINI.make()
    request = turn(fake_cli, options={"temperature": 0.2})
    first = await collect(provider.stream(request))
    second = await collect(provider.stream(request))
    assert [n.message for n in only(first, Notice)] == [
        "gemini: option 'temperature' is not supported; ignored"
    ]
    assert not only(second, Notice)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"extra_args": "--flag"}, "options.extra_args must be a list of strings"),
        ({"model": 3}, "options.model must be a string"),
        ({"dangerously_skip_permissions": "yes"}, "must be true or false"),
        ({"env": ["A=1"]}, "options.env must be a mapping"),
        ({"env": {"A": {"b": 1}}}, "options.env.A must be a string"),
        ({"allowed_tools": [{"x": 1}]}, "options.allowed_tools must be a list of tool names"),
        ({"env": {"A=B": "1"}}, "options.env: invalid variable name 'A=B'"),
    ],
)
async def test_bad_options_are_clear_definition_errors(
    fake_cli: FakeCli, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProviderError, match=message) as caught:
        await collect(CLAUDE.make().stream(turn(fake_cli, options=options)))
    assert caught.value.exit_code == EXIT_DEFINITION
    assert not fake_cli.records()


async def test_allowed_tools_accepts_a_comma_separated_string(fake_cli: FakeCli) -> None:
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl"})
    await collect(CLAUDE.make().stream(turn(fake_cli, options={"allowed_tools": "Read, Grep"})))
    assert "--allowedTools=Read,Grep" in fake_cli.records()[0]["argv"]


# --- prompts the command line cannot carry as they are ------------------------------------


@by_name
async def test_prompt_starting_with_a_dash_is_not_taken_for_an_option(
    fake_cli: FakeCli, cli: Cli
) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1})
    await collect(cli.make().stream(turn(fake_cli, "- fix the bug\n- add a test")))
    [record] = fake_cli.records()
    assert cli.prompt_of(record) == "- fix the bug\n- add a test"


@by_name
async def test_prompt_too_long_for_argv_goes_through_stdin(fake_cli: FakeCli, cli: Cli) -> None:
    fake_cli.install(cli.binary)
    fake_cli.plan({"sample": cli.turn1})
    prompt = "word " * (ARGV_PROMPT_LIMIT // 4)
    events = await collect(cli.make().stream(turn(fake_cli, prompt)))
    assert isinstance(events[-1], Final)
    [record] = fake_cli.records()
    assert record["stdin"] == prompt
    assert all(len(arg) < ARGV_PROMPT_LIMIT for arg in record["argv"])


def test_samples_used_here_exist() -> None:
    folder = Path(__file__).parent / "samples"
    for cli in CLIS:
        assert (folder / cli.turn1).exists() and (folder / cli.resume).exists()
    assert json.loads((folder / "claude-turn1.jsonl").read_text().splitlines()[-1])["result"]


async def test_an_over_long_line_is_skipped_not_fatal(
    fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base_module, "STDOUT_LINE_LIMIT", 4096)
    sample = fake_cli.folder / "long.jsonl"
    huge = json.dumps(
        {"type": "item.completed", "item": {"type": "reasoning", "text": "x" * 20000}}
    )
    original = (Path(__file__).parent / "samples/codex-turn1.jsonl").read_text()
    sample.write_text(huge + "\n" + original)
    fake_cli.install("codex")
    fake_cli.plan({"sample": str(sample)})
    events = await collect(CODEX.make().stream(turn(fake_cli)))
    assert events[-1] == Final(CODEX.reply1)


async def test_a_pretty_printed_json_document_is_read_whole(fake_cli: FakeCli) -> None:
    # What `extra_args: [--output-format, json]` makes gemini print instead of NDJSON.
    fake_cli.install("gemini")
    fake_cli.plan({"sample": "gemini-output-format-json.json"})
    events = await collect(GEMINI.make().stream(turn(fake_cli)))
    reply = "FAKE-REPLY n=5 msgs=1 last_user=json format"
    assert events[-1] == Final(reply)
    assert texts(events) == reply  # shown even though nothing streamed
    assert only(events, SessionId) == [SessionId("fc8bb0c8-6a54-468e-bca7-ed2c1bf9d770")]
    assert only(events, Usage) == [Usage(input_tokens=12, output_tokens=7)]
