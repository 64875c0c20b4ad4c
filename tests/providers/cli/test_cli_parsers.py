"""The five CLI output parsers over every recorded sample of the real tools.

The samples (tests/providers/cli/samples/, copied from shared/agent-clis/samples/) are
what the real CLIs printed against a fake API endpoint: a first turn, a resumed turn, a
turn with a tool call, an HTTP 400, and (claude) unknown resume ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from awf_nb.engine.ports import Notice, ProviderEvent, SessionId, TextDelta, ToolUse, Usage
from awf_nb.providers.cli.base import (
    OutputParser,
    TurnOutcome,
    parse_line,
    parse_whole_document,
    readable_error,
    replay_prompt,
    short_argument,
)
from awf_nb.providers.cli.claude import ClaudeParser
from awf_nb.providers.cli.codex import CodexParser
from awf_nb.providers.cli.copilot import CopilotParser
from awf_nb.providers.cli.gemini import GeminiParser
from awf_nb.providers.cli.opencode import OpencodeParser

SAMPLES = Path(__file__).parent / "samples"
PARSERS: dict[str, type[OutputParser]] = {
    "claude": ClaudeParser,
    "gemini": GeminiParser,
    "codex": CodexParser,
    "opencode": OpencodeParser,
    "copilot": CopilotParser,
}


@dataclass
class Parsed:
    events: list[ProviderEvent]
    outcome: TurnOutcome
    diagnostics: list[str] = field(default_factory=list)

    @property
    def session_ids(self) -> list[str]:
        return [e.session_id for e in self.events if isinstance(e, SessionId)]

    @property
    def streamed(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def tools(self) -> list[ToolUse]:
        return [e for e in self.events if isinstance(e, ToolUse)]

    @property
    def notices(self) -> list[str]:
        return [e.message for e in self.events if isinstance(e, Notice)]


def parse(sample: str) -> Parsed:
    """Run a sample through its CLI's parser exactly as the runner does."""
    parser = PARSERS[sample.split("-", 1)[0]]()
    diagnostics: list[str] = []
    events: list[ProviderEvent] = []
    for line in (SAMPLES / sample).read_text().splitlines():
        events += parse_line(parser, line, diagnostics)
    events += parse_whole_document(parser, diagnostics)
    return Parsed(events, parser.outcome(), diagnostics)


def output_samples() -> list[str]:
    """The samples judged by their stdout alone (vibe's need its report too: test_cli_vibe)."""
    return sorted(
        p.name
        for p in SAMPLES.iterdir()
        if p.suffix in (".jsonl", ".json")
        and not p.name.endswith("-requests.jsonl")
        and not p.name.startswith("vibe-")
    )


# What each sample must give: session id, final text (None: a failure), usage.
EXPECTED: dict[str, tuple[str, str | None, tuple[int, int] | None]] = {
    "claude-turn1.jsonl": (
        "22537ea3-ed6c-4486-9c0a-88fea39bd1b3",
        "FAKE-REPLY n=1 msgs=1 last_user=hello from turn one",
        (12, 7),
    ),
    "claude-resume.jsonl": (
        "22537ea3-ed6c-4486-9c0a-88fea39bd1b3",
        "FAKE-REPLY n=2 msgs=3 last_user=second turn please",
        (12, 7),
    ),
    "claude-tool.jsonl": (
        "c42629b5-765f-42f6-96eb-ab83ce661e65",
        "FAKE-REPLY n=4 msgs=3 last_user=RUN_TOOL please tool_result_seen=yes",
        (24, 14),
    ),
    "claude-partial-messages.jsonl": (
        "d3c5d57d-f813-4231-bc0d-2f03529ffaf3",
        "FAKE-REPLY n=1 msgs=1 last_user=stdin prompt",
        (12, 7),
    ),
    "claude-output-format-json.jsonl": (
        "6bc7f2a8-d344-446f-97b8-690f7f437c20",
        "FAKE-REPLY n=2 msgs=1 last_user=json fmt",
        (12, 7),
    ),
    "claude-error400.jsonl": ("7fbf80d5-e45a-42d9-a790-18c337d258aa", None, None),
    "claude-resume-unknown-id.jsonl": ("00000000-0000-0000-0000-000000000000", None, None),
    "claude-resume-other-cwd.jsonl": ("3610691d-9b8d-4ab6-b1ea-c7fd43392b95", None, None),
    "gemini-turn1.jsonl": (
        "fc89fb5f-80cb-45ff-95cc-7ebaa47fff00",
        "FAKE-REPLY n=1 msgs=1 last_user=hello from turn one",
        (12, 7),
    ),
    "gemini-resume.jsonl": (
        "fc89fb5f-80cb-45ff-95cc-7ebaa47fff00",
        "FAKE-REPLY n=2 msgs=3 last_user=second turn please",
        (12, 7),
    ),
    "gemini-tool.jsonl": (
        "2e6472b2-abf3-4855-be1d-1c21aa97cdae",
        "FAKE-REPLY n=4 msgs=3 last_user=RUN_TOOL please tool_result_seen=yes",
        (24, 14),
    ),
    "gemini-output-format-json.json": (
        "fc8bb0c8-6a54-468e-bca7-ed2c1bf9d770",
        "FAKE-REPLY n=5 msgs=1 last_user=json format",
        (12, 7),
    ),
    "gemini-error400.jsonl": ("3e2e27c0-7fc1-4071-8c0e-1083fe246c58", None, None),
    "codex-turn1.jsonl": (
        "01a2012c-8ad4-7f71-8fd7-c934a65abc74",
        "FAKE-REPLY n=1 msgs=2 last_user=hello from turn one",
        (12, 7),
    ),
    "codex-resume.jsonl": (
        "01a2012c-8ad4-7f71-8fd7-c934a65abc74",
        "FAKE-REPLY n=2 msgs=4 last_user=second turn please",
        (24, 14),
    ),
    "codex-tool.jsonl": (
        "01a2012c-b581-7931-9ce9-e1442512595c",
        "FAKE-REPLY n=4 msgs=2 last_user=RUN_TOOL please tool_result_seen=yes",
        (24, 14),
    ),
    "codex-openai_base_url-websocket-fallback.jsonl": (
        "01a20116-beb9-7b52-a1b1-82961f78ed1c",
        "FAKE-REPLY n=1 msgs=2 last_user=cfg route",
        (12, 7),
    ),
    "codex-error400.jsonl": ("01a2012c-cb9d-7623-84f1-374dcc5b90c2", None, None),
    "opencode-turn1.jsonl": (
        "ses_dfed329c2ffetKdaHS3TNMYly1",
        "FAKE-REPLY n=2 msgs=1 last_user=hello from turn one",
        (12, 7),
    ),
    "opencode-resume.jsonl": (
        "ses_dfed329c2ffetKdaHS3TNMYly1",
        "FAKE-REPLY n=3 msgs=3 last_user=second turn please",
        (12, 7),
    ),
    "opencode-tool.jsonl": (
        "ses_dfed30cacffePaVNzf5NPADjcF",
        "FAKE-REPLY n=6 msgs=3 last_user=RUN_TOOL please tool_result_seen=yes",
        (24, 14),
    ),
    "opencode-error400.jsonl": ("ses_dfed2fc93fferEt3In3TNTaZPQ", None, None),
    "copilot-turn1.jsonl": (
        "07538f33-a0d5-4ac6-a438-a6cf29ae5d66",
        "FAKE-REPLY n=1 msgs=1 last_user=hello from turn one",
        None,
    ),
    "copilot-resume.jsonl": (
        "07538f33-a0d5-4ac6-a438-a6cf29ae5d66",
        "FAKE-REPLY n=2 msgs=3 last_user=second turn please",
        None,
    ),
    "copilot-tool.jsonl": (
        "589680aa-72fc-4952-b36a-aa778ea503e8",
        "FAKE-REPLY n=4 msgs=3 last_user=RUN_TOOL please tool_result_seen=yes",
        None,
    ),
    "copilot-error400.jsonl": ("2e79eedc-a7bf-41f8-b128-4208ab0011ee", None, None),
}


def test_every_output_sample_has_expectations() -> None:
    assert sorted(EXPECTED) == output_samples()


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_session_id_final_text_success_and_usage(sample: str) -> None:
    session_id, text, usage = EXPECTED[sample]
    parsed = parse(sample)

    assert parsed.session_ids[-1] == session_id
    assert len(set(parsed.session_ids)) == 1  # the same id, announced once
    assert parsed.outcome.ok is (text is not None)
    if text is None:
        assert parsed.outcome.text == ""
        return
    assert parsed.outcome.text == text
    assert not parsed.outcome.text.lstrip().startswith("{")  # never raw NDJSON
    if usage is None:
        assert parsed.outcome.usage is None
    else:
        assert parsed.outcome.usage is not None
        got = (parsed.outcome.usage.input_tokens, parsed.outcome.usage.output_tokens)
        assert got == usage


@pytest.mark.parametrize(
    "sample",
    [s for s, (_, text, _) in EXPECTED.items() if text and "tool" not in s and "format" not in s],
)
def test_streamed_text_is_the_reply_once(sample: str) -> None:
    parsed = parse(sample)
    # Claude's partial deltas are followed by the full message: it must not come twice.
    assert parsed.streamed == parsed.outcome.text


def test_claude_partial_messages_stream_token_deltas() -> None:
    parsed = parse("claude-partial-messages.jsonl")
    deltas = [e.text for e in parsed.events if isinstance(e, TextDelta)]
    assert deltas == ["FAKE-REPLY n=1 msgs=1 ", "last_user=stdin prompt"]


@pytest.mark.parametrize(
    ("sample", "tool"),
    [
        ("claude-tool.jsonl", ToolUse("Bash", "echo TOOL-OK")),
        ("gemini-tool.jsonl", ToolUse("run_shell_command", "echo TOOL-OK")),
        ("codex-tool.jsonl", ToolUse("shell", "echo TOOL-OK")),
        ("opencode-tool.jsonl", ToolUse("bash", "echo TOOL-OK")),
        ("copilot-tool.jsonl", ToolUse("bash", "echo TOOL-OK")),
    ],
)
def test_tool_use_is_reported_once_before_the_reply(sample: str, tool: ToolUse) -> None:
    parsed = parse(sample)
    assert parsed.tools == [tool]
    first_tool = parsed.events.index(tool)
    first_text = next(i for i, e in enumerate(parsed.events) if isinstance(e, TextDelta))
    assert first_tool < first_text
    assert parsed.streamed.endswith("tool_result_seen=yes")


def test_claude_usage_carries_the_cost() -> None:
    usage = parse("claude-turn1.jsonl").outcome.usage
    assert usage == Usage(input_tokens=12, output_tokens=7, cost_usd=0.000141)


def test_opencode_usage_sums_every_step() -> None:
    usage = parse("opencode-tool.jsonl").outcome.usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (24, 14)


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        ("claude-error400.jsonl", "API Error: 400 fake 400"),
        ("gemini-error400.jsonl", "API Error: fake 400 (HTTP 400)"),
        ("codex-error400.jsonl", "fake 400 (invalid_request_error)"),
        ("opencode-error400.jsonl", "APIError: fake 400 (HTTP 400)"),
        ("copilot-error400.jsonl", "400 fake 400"),
    ],
)
def test_http_400_gives_the_clis_own_message(sample: str, message: str) -> None:
    parsed = parse(sample)
    assert not parsed.outcome.ok
    assert parsed.outcome.error == message
    # claude wraps the error in a made-up assistant message: it is not the agent's reply.
    assert "fake 400" not in parsed.streamed


def test_claude_success_is_is_error_not_subtype() -> None:
    # The 400 sample says `subtype: "success"` with `is_error: true`.
    lines = (SAMPLES / "claude-error400.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["subtype"] == "success"
    assert not parse("claude-error400.jsonl").outcome.ok


@pytest.mark.parametrize(
    "sample", ["claude-resume-unknown-id.jsonl", "claude-resume-other-cwd.jsonl"]
)
def test_claude_unknown_resume_id_is_recognised(sample: str) -> None:
    outcome = parse(sample).outcome
    assert not outcome.ok
    assert outcome.session_missing
    assert outcome.error.startswith("No conversation found with session ID:")


def test_codex_transient_errors_become_notices() -> None:
    parsed = parse("codex-openai_base_url-websocket-fallback.jsonl")
    assert parsed.outcome.ok
    assert any(n.startswith("codex: Reconnecting... 2/5") for n in parsed.notices)
    assert any("Falling back from WebSockets" in n for n in parsed.notices)


def test_codex_error_before_turn_failed_is_shown_as_it_happens() -> None:
    assert parse("codex-error400.jsonl").notices == ["codex: fake 400 (invalid_request_error)"]


def test_gemini_deltas_are_joined_without_newlines() -> None:
    text = parse("gemini-turn1.jsonl").outcome.text
    assert "\n" not in text and "last_user=" in text  # "las" + "t_user" joined as one word


def test_gemini_json_document_is_read_whole() -> None:
    parsed = parse("gemini-output-format-json.json")
    assert parsed.diagnostics == []  # consumed, not left as noise


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_non_json_lines_and_unknown_events_never_break_a_parse(name: str) -> None:
    parser = PARSERS[name]()
    diagnostics: list[str] = []
    events = []
    for line in ["Warning: something on stdout", "[1, 2]", '{"type": "brand.new.event"}', "{"]:
        events += parse_line(parser, line, diagnostics)
    assert events == []
    assert diagnostics == ["Warning: something on stdout", "[1, 2]", "{"]
    outcome = parser.outcome()
    assert not outcome.ok


@pytest.mark.parametrize(
    ("sample", "tool"),
    [
        ("codex", {"type": "file_change", "changes": [{"path": "a.py", "kind": "update"}]}),
        ("codex", {"type": "mcp_tool_call", "server": "gh", "tool": "search", "arguments": {}}),
        ("codex", {"type": "web_search", "query": "asyncio subprocess"}),
    ],
)
def test_codex_other_tool_items(sample: str, tool: dict) -> None:
    parser = CodexParser()
    events = parser.feed({"type": "item.completed", "item": {"id": "i1", **tool}})
    assert len(events) == 1 and isinstance(events[0], ToolUse)
    assert parser.feed({"type": "item.completed", "item": {"id": "i1", **tool}}) == []


def test_claude_api_retry_is_a_notice() -> None:
    event = {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 2,
        "max_retries": 10,
        "retry_delay_ms": 1200,
        "error_status": 401,
        "error": "authentication_failed",
        "session_id": "s1",
    }
    events = ClaudeParser().feed(event)
    assert events == [
        SessionId("s1"),
        Notice(
            "claude: API request failed (HTTP 401: authentication_failed); "
            "retrying in 1.2s (attempt 2 of 10)"
        ),
    ]


def test_claude_separates_consecutive_messages() -> None:
    parser = ClaudeParser()
    events: list[ProviderEvent] = []
    for message_id, text in [("m1", "Let me look."), ("m2", "Done.")]:
        message = {"id": message_id, "content": [{"type": "text", "text": text}]}
        events += parser.feed({"type": "assistant", "message": message})
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look.\n\nDone."


def test_short_argument_picks_the_telling_field_and_bounds_it() -> None:
    assert short_argument({"command": "ls -la", "timeout": 5}) == "ls -la"
    assert short_argument({"file_path": "/a/b.py", "content": "x"}) == "/a/b.py"
    assert short_argument({"a": 1}) == '{"a":1}'
    assert short_argument("line one\n  line two") == "line one line two"
    assert short_argument(None) == ""
    long = short_argument("x" * 500)
    assert len(long) == 80 and long.endswith("…")


def test_readable_error_unwraps_json_bodies() -> None:
    body = '{"error": {"message": "fake 400", "type": "invalid_request_error", "code": null}}'
    assert readable_error(body) == "fake 400 (invalid_request_error)"
    assert readable_error("plain words") == "plain words"
    assert readable_error("prefix {not json") == "prefix {not json"


def test_replay_prompt_carries_the_transcript_before_the_new_message() -> None:
    from awf_nb.engine.ports import Message

    text = replay_prompt([Message("user", "q1"), Message("assistant", "a1")], "q2")
    assert text.index("User: q1") < text.index("Assistant: a1") < text.index("q2")
    assert text.endswith("q2")


def test_replay_prompt_shows_tool_calls_and_results_as_text() -> None:
    from awf_nb.engine.ports import Message, ToolCall

    history = [
        Message("user", "weather in Paris?"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "get_weather", '{"city": "Paris"}'),)),
        Message("tool", "sunny, 21 C", tool_call_id="c1", name="get_weather"),
        Message("assistant", "It is sunny."),
    ]
    text = replay_prompt(history, "and tomorrow?")
    assert (
        "User: weather in Paris?\n\n"
        'Assistant:\n[called get_weather({"city": "Paris"})]\n\n'
        "Tool get_weather: sunny, 21 C\n\n"
        "Assistant: It is sunny."
    ) in text
