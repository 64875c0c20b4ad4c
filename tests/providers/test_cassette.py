"""Recorded runs (cassettes) with the scripted provider: record a run, replay it without any
provider, and the errors a replay stops with."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest

from awf_nb.api import RunResult, arun
from awf_nb.engine.events import RunFinished, RunWarning
from awf_nb.engine.partner import SimulatedUser
from awf_nb.engine.ports import Final, ProviderEvent, SessionId, TextDelta, TurnRequest
from awf_nb.errors import UserError
from awf_nb.providers.cassette import (
    CassetteError,
    CassetteMismatch,
    Recorder,
    Replayer,
    cassette_of,
    read_cassette,
)
from awf_nb.providers.cassette import record as record_module
from awf_nb.providers.cassette import replay as replay_module
from awf_nb.runs import prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.secrets import Masker
from awf_nb.store import Store
from awf_nb.workflow.loader import load_workflow
from tests.support.events import Collect, with_providers

pytestmark = pytest.mark.asyncio

CHAT = """
name: chat
inputs:
  - {name: topic, default: bread}
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    system_prompt: Be brief.
    prompt: "let us talk about {{.inputs.topic}}"
    options:
      replies: ["Bread is baked from flour and water.", "Rye bread is darker and denser."]
      delay_ms: 2
    on_success: sum_up
  sum_up:
    type: agent
    provider: scripted
    prompt: "sum up: {{.states.chat.Output}}"
    on_success: done
  done: {type: terminal, message: "talked {{.states.chat.Conversation.TotalTurns}} turns"}
"""


def refusing_factory(calls: list[str]) -> Any:
    """A provider factory that must never be used: it notes the call and fails."""

    def factory(name: str) -> Any:
        calls.append(name)
        raise AssertionError(f"replay constructed the real provider {name!r}")

    return factory


def transcript(store: Store, result: RunResult) -> list[tuple[str, str, str]]:
    records = store.read_transcript(result.run_id)
    return [(r.get("step", ""), r.get("role", ""), r.get("content", "")) for r in records]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    path = tmp_path / "chat.yaml"
    path.write_text(CHAT)
    return path


async def run(workflow: Path, store: Store, **kwargs: Any) -> tuple[RunResult, Collect]:
    sink = Collect()
    kwargs.setdefault("cwd", workflow.parent)
    result = await arun(workflow, storage=store, sink=sink, **kwargs)
    return result, sink


# --- record, then replay ---------------------------------------------------------------------


async def test_a_replayed_conversation_is_the_recorded_one_without_calling_any_provider(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    recorded, recorded_sink = await run(workflow, store, replies=["and rye?", ""], record=cassette)
    assert recorded.ok, recorded.error
    calls: list[str] = []

    replayed, replayed_sink = await run(
        workflow, store, replay=cassette, providers=refusing_factory(calls)
    )

    assert replayed.ok, replayed.error
    assert calls == []
    assert replayed.outputs == recorded.outputs
    assert replayed.message == recorded.message == "talked 2 turns"
    assert replayed.tokens == recorded.tokens
    assert transcript(store, replayed) == transcript(store, recorded)
    assert replayed_sink.text() == recorded_sink.text()
    assert "Rye bread is darker" in replayed.outputs["chat"]


async def test_the_cassette_has_a_header_a_line_per_turn_and_a_line_per_message(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, replies=["and rye?", ""], record=cassette)

    found = lines(cassette)
    assert found[0] == {"type": "header", "format": "awf-cassette", "version": 1,
                        "workflow": "chat", "awf_nb": found[0]["awf_nb"]}  # fmt: skip
    assert [(x["type"], x.get("step"), x.get("turn"), x.get("text")) for x in found[1:]] == [
        ("turn", "chat", 1, None),
        ("input", None, None, "and rye?"),
        ("turn", "chat", 2, None),
        ("input", None, None, ""),
        ("turn", "sum_up", 1, None),
    ]
    first = found[1]
    assert first["provider"] == "scripted" and first["session_kind"] == "history"
    assert first["speaker"] == "" and first["end"] == "complete"
    assert first["request"]["prompt"] == "let us talk about bread"
    assert first["request"]["system_prompt"] == "Be brief."
    assert "delay_ms" not in first["request"]["options"]  # pacing does not change a reply
    texts = [e["text"] for e in first["events"] if "text" in e]
    assert "".join(texts) == "Bread is baked from flour and water."
    assert first["events"][-1]["final"] == "Bread is baked from flour and water."
    times = [e["at"] for e in first["events"]]
    assert times == sorted(times) and all(t >= 0 for t in times)


async def test_each_turn_is_in_the_file_as_soon_as_it_ends(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    seen_at_the_prompt: list[list[str]] = []

    class Peeking(ScriptedReader):
        async def read(self, prompt: str) -> str | None:
            seen_at_the_prompt.append([line["type"] for line in lines(cassette)])
            return await super().read(prompt)

    await run(workflow, store, reader=Peeking(["and rye?", ""]), record=cassette)

    assert seen_at_the_prompt == [["header", "turn"], ["header", "turn", "input", "turn"]]


async def test_recorded_messages_run_out_then_the_runs_own_reader_answers(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, replies=["and rye?", ""], record=cassette)
    # As if the recording had stopped before the person ended the conversation.
    kept = [line for line in cassette.read_text().splitlines() if '"text":""' not in line]
    cassette.write_text("\n".join(kept) + "\n")
    reader = ScriptedReader([""])

    replayed, _ = await run(workflow, store, replay=cassette, reader=reader)

    assert replayed.ok, replayed.error
    assert len(reader.prompts) == 1  # asked once: after "and rye?" came from the cassette
    assert replayed.steps["chat"].conversation.total_turns == 2


ONLY_CHAT = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "let us talk about bread"
    options: {replies: ["Flour and water.", "Darker.", "Nutty."]}
    on_success: done
  done: {type: terminal}
"""


async def test_a_replay_that_uses_fewer_turns_than_recorded_says_so_and_keeps_the_count(
    store: Store, tmp_path: Path
) -> None:
    """A conversation recorded with a simulated user, replayed without one: the person has
    nothing to say (no recorded messages, nobody at the keyboard), so the replay runs one
    turn. The run warns before its summary, and the replayer keeps the figures."""
    path = tmp_path / "only-chat.yaml"
    path.write_text(ONLY_CHAT)
    cassette = tmp_path / "chat.cassette.jsonl"
    user = SimulatedUser(
        persona="Curious.", provider="scripted",
        options={"replies": ["and rye?", "and spelt?", "exit"]},
    )  # fmt: skip
    recorded, _ = await run(path, store, user=user, record=cassette)
    assert recorded.ok and recorded.steps["chat"].conversation.total_turns == 3
    sink = Collect()
    runner = prepare_run(
        load_workflow(path), storage=store, sink=sink, cwd=tmp_path, replay=cassette
    ).runner

    state = await runner.execute()

    assert state.status == "completed" and state.steps["chat"].conversation.total_turns == 1
    unused = cassette_of(runner.config.providers).unused  # type: ignore[union-attr]
    assert (unused.turns, unused.of_turns, unused.inputs, unused.answers) == (5, 6, 0, 0)
    assert unused.where == (  # in the order of the cassette
        "step chat: user (simulated)'s turns 1–3",
        "step chat: turns 2–3",
    )
    (warning,) = sink.of(RunWarning)
    assert warning.message == (
        f"the replay did not use everything recorded in {cassette}: 5 of 6 recorded turns "
        "(step chat: user (simulated)'s turns 1–3; step chat: turns 2–3) (the replayed run "
        "differs from the recorded one)"
    )
    assert sink.events.index(warning) == len(sink.events) - 2  # just before RunFinished
    assert isinstance(sink.events[-1], RunFinished)


async def test_a_replay_that_used_the_whole_cassette_has_nothing_unused(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, replies=["and rye?", ""], record=cassette)
    runner = prepare_run(
        load_workflow(workflow), storage=store, cwd=tmp_path, replay=cassette
    ).runner

    await runner.execute()

    unused = cassette_of(runner.config.providers).unused  # type: ignore[union-attr]
    assert not unused and (unused.of_turns, unused.of_inputs) == (3, 2)


async def test_recorded_messages_a_replay_did_not_read_are_counted(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, replies=["and rye?", ""], record=cassette)
    # One more message than the conversation asks for, as if the recording went on.
    with cassette.open("a") as out:
        out.write('{"type":"input","text":"and spelt?"}\n')
    sink = Collect()

    replayed, sink = await run(workflow, store, replay=cassette)

    assert replayed.ok
    (warning,) = sink.of(RunWarning)
    assert warning.message.endswith(": 1 of 3 recorded messages (the replayed run differs "
                                    "from the recorded one)")  # fmt: skip


# --- what differs ----------------------------------------------------------------------------


async def test_a_changed_prompt_stops_the_replay_naming_the_step_the_turn_and_the_prompt(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, replies=["and rye?", ""], record=cassette)
    workflow.write_text(CHAT.replace('prompt: "sum up:', 'prompt: "summarise:'))
    calls: list[str] = []

    replayed, _ = await run(workflow, store, replay=cassette, providers=refusing_factory(calls))

    assert not replayed.ok
    assert calls == []
    assert replayed.exit_code == CassetteMismatch.exit_code == 1
    error = replayed.error
    assert error.startswith("step sum_up: turn 1 does not match the cassette ")
    assert "the prompt differs" in error
    assert '"summarise: Rye bread' in error and '"sum up: Rye bread' in error
    assert "options" not in error and "history" not in error


async def test_changed_options_are_a_mismatch_that_names_the_option(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, replies=["and rye?", ""], record=cassette)
    workflow.write_text(CHAT.replace("Rye bread is darker", "Rye bread is lighter"))

    replayed, _ = await run(workflow, store, replay=cassette)

    assert replayed.error.startswith("step chat: turn 1 does not match")
    assert "the options differ (replies)" in replayed.error
    assert "prompt" not in replayed.error.split("does not match")[1]


async def test_a_cassette_that_runs_out_of_turns_is_a_clear_error(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    await run(workflow, store, record=cassette)  # no person: one reply, then sum_up

    replayed, _ = await run(workflow, store, replay=cassette, replies=["and rye?", ""])

    assert not replayed.ok
    assert replayed.error.startswith("step chat: turn 2: the cassette ")
    assert "has no more turns for it (it recorded 1)" in replayed.error


async def test_a_replayed_provider_has_the_session_kind_of_the_recorded_one(
    tmp_path: Path, store: Store
) -> None:
    class SessionAgent:
        """Like an agent CLI: it keeps the conversation and is resumed by id."""

        session_kind: Literal["history", "session_id"] = "session_id"

        def __init__(self, name: str) -> None:
            self.name = name

        async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
            yield SessionId("sess-42")
            text = f"reply {turn.turn_number} (resumed: {turn.session_id or 'no'})"
            yield TextDelta(text)
            yield Final(text)

        async def aclose(self) -> None:
            pass

    workflow = tmp_path / "agent.yaml"
    workflow.write_text(
        textwrap.dedent("""
        name: agent
        states:
          initial: chat
          chat:
            type: agent
            provider: agent
            mode: conversation
            system_prompt: Be brief.
            prompt: hello
            on_success: done
          done: {type: terminal}
        """)
    )
    cassette = tmp_path / "agent.cassette.jsonl"
    recorded, _ = await run(
        workflow,
        store,
        replies=["more", ""],
        record=cassette,
        providers=with_providers(agent=SessionAgent),
    )
    assert recorded.ok, recorded.error

    replayed, _ = await run(workflow, store, replay=cassette, providers=refusing_factory([]))

    assert replayed.ok, replayed.error
    assert replayed.outputs == recorded.outputs
    assert replayed.outputs["chat"] == "reply 2 (resumed: sess-42)"
    kinds = [line["session_kind"] for line in lines(cassette) if line["type"] == "turn"]
    assert kinds == ["session_id", "session_id"]
    [turn_two] = [line for line in lines(cassette) if line.get("turn") == 2]
    assert turn_two["request"]["session_id"] is True
    assert turn_two["request"]["system_prompt"] is None  # not resent to a resumed session


WRITER_REVIEWER = """
name: haiku
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    system_prompt: You write haiku.
    prompt: A haiku about rain
    options: {replies: ["draft one", "draft two", "draft three"]}
    conversation:
      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        options: {replies: ["fix line 2", "APPROVED"]}
      until: 'message == "APPROVED"'
      max_turns: 6
    on_success: done
  done: {type: terminal, message: "{{.states.draft.Output}}"}
"""


async def test_a_conversation_between_two_agents_replays_each_speakers_turns(
    tmp_path: Path, store: Store
) -> None:
    workflow = tmp_path / "haiku.yaml"
    workflow.write_text(WRITER_REVIEWER)
    cassette = tmp_path / "haiku.cassette.jsonl"
    recorded, recorded_sink = await run(workflow, store, record=cassette)
    assert recorded.ok, recorded.error
    calls: list[str] = []

    replayed, replayed_sink = await run(
        workflow, store, replay=cassette, providers=refusing_factory(calls)
    )

    assert replayed.ok, replayed.error
    assert calls == []
    assert replayed.outputs == recorded.outputs
    assert transcript(store, replayed) == transcript(store, recorded)
    assert replayed_sink.text() == recorded_sink.text()
    speakers = [(x["speaker"], x["turn"]) for x in lines(cassette) if x["type"] == "turn"]
    assert ("reviewer", 1) in speakers and ("", 1) in speakers
    assert [x for x in lines(cassette) if x["type"] == "input"] == []  # nobody typed


async def test_turns_are_matched_per_step_and_speaker(tmp_path: Path) -> None:
    """A conversation partner's turns (`speaker` set) are a sequence of their own: the
    step's agent and the partner each get their own turn 1, even asked the very same thing
    in the other order."""

    class Counting:
        """Answers the same request differently each time: "answer 1", "answer 2"."""

        session_kind: Literal["history", "session_id"] = "history"

        def __init__(self, name: str) -> None:
            self.name, self.count = name, 0

        async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
            self.count += 1
            yield Final(f"answer {self.count}")

        async def aclose(self) -> None:
            pass

    masker = Masker()
    path = tmp_path / "partners.jsonl"
    recorder = Recorder(path, workflow="debate", masker=masker)
    provider = recorder.providers(Counting)("counting")

    async def ask(p: Any, speaker: str) -> str:
        turn = TurnRequest(prompt="your turn", step="debate", speaker=speaker)
        events = [e async for e in p.stream(turn)]
        return events[-1].text

    assert await ask(provider, "") == "answer 1"
    assert await ask(provider, "critic") == "answer 2"
    replay = Replayer(path, workflow="debate", masker=masker).providers()("counting")

    assert await ask(replay, "critic") == "answer 2"
    assert await ask(replay, "") == "answer 1"
    with pytest.raises(CassetteMismatch, match=r"step debate: critic's turn 1: "):
        await ask(replay, "critic")


async def test_a_provider_error_is_recorded_and_replayed(tmp_path: Path, store: Store) -> None:
    workflow = tmp_path / "fails.yaml"
    workflow.write_text(
        CHAT.replace(
            '      replies: ["Bread is baked',
            '      replies: [{error: "quota exceeded"}, "Bread is baked',
        )
    )
    cassette = tmp_path / "fails.cassette.jsonl"
    recorded, _ = await run(workflow, store, record=cassette)
    assert not recorded.ok and "quota exceeded" in recorded.error

    replayed, _ = await run(workflow, store, replay=cassette, providers=refusing_factory([]))

    assert replayed.error == recorded.error
    assert replayed.exit_code == recorded.exit_code
    [turn] = [line for line in lines(cassette) if line["type"] == "turn"]
    assert turn["end"] == "error" and turn["error"]["message"] == "scripted: quota exceeded"


# --- secrets ---------------------------------------------------------------------------------

SECRET_INPUT = "sk-live-7f3a9c2e11d4"
SECRET_ENV = "hunter2hunter2hunter2"  # longer than a streamed chunk: split across deltas


async def test_secrets_are_masked_in_the_cassette(tmp_path: Path, store: Store) -> None:
    workflow = tmp_path / "secret.yaml"
    workflow.write_text(
        textwrap.dedent(f"""
        name: secret
        inputs:
          - {{name: api_key}}
        states:
          initial: chat
          chat:
            type: agent
            provider: scripted
            mode: conversation
            prompt: "use {{{{.inputs.api_key}}}}"
            options:
              replies: ["the key {SECRET_INPUT} works", "the password is {SECRET_ENV}, ok"]
            on_success: done
          done: {{type: terminal}}
        """)
    )
    cassette = tmp_path / "secret.cassette.jsonl"

    recorded, _ = await run(
        workflow,
        store,
        inputs={"api_key": SECRET_INPUT},
        env={"SECRET_X": SECRET_ENV},
        replies=[f"mine is {SECRET_ENV}", ""],
        record=cassette,
    )

    assert recorded.ok, recorded.error
    text = cassette.read_text()
    assert SECRET_INPUT not in text and SECRET_ENV not in text
    assert "hunter2" not in text  # not even a piece of a secret split across deltas
    assert '"prompt":"use ***"' in text
    assert '{"type":"input","text":"mine is ***"}' in text
    assert '"final":"the password is ***, ok"' in text


# --- pacing ----------------------------------------------------------------------------------


class FakeClock:
    """A clock that advances 0.25 s each time it is read."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


@pytest.mark.parametrize("speed", [0, 1, 2.5])
async def test_replay_speed_multiplies_the_recorded_delays(
    workflow: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speed: float
) -> None:
    cassette = tmp_path / "chat.cassette.jsonl"
    monkeypatch.setattr(record_module, "clock", FakeClock())
    await run(workflow, store, record=cassette)
    monkeypatch.undo()
    pauses: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(replay_module, "sleep", fake_sleep)

    replayed, _ = await run(workflow, store, replay=cassette, replay_speed=speed)

    assert replayed.ok, replayed.error
    delays: list[float] = []  # between a turn's start and its events, as recorded
    for turn in read_cassette(cassette).turns:
        previous = 0.0
        for timed in turn.events:
            if timed.at > previous:
                delays.append(timed.at - previous)
            previous = timed.at
    assert len(delays) > 5 and all(delay >= 0.25 for delay in delays)  # the fake clock's
    assert pauses == ([] if speed == 0 else pytest.approx([d * speed for d in delays]))


async def test_a_negative_replay_speed_is_refused(workflow: Path, store: Store) -> None:
    with pytest.raises(UserError, match=r"replay speed must be a number >= 0 \(got -1\)"):
        await run(workflow, store, replay=workflow, replay_speed=-1)


# --- files that are not usable cassettes -------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cassette .* not found"),
        ("", "is not an awf cassette"),
        ('{"name": "chat"}\n', "is not an awf cassette"),
        ("name: chat\nstates: {}\n", "is not an awf cassette"),
        ('{"type":"header","format":"awf-cassette","version":99,"workflow":"chat"}\n',
         "is a version 99 cassette; this awf-nb reads version 1"),
        ('{"type":"header","format":"awf-cassette","version":1,"workflow":"chat"}\n'
         '{"type":"turn","step":"chat"}\n', r"\.jsonl:2: not a valid cassette line"),
        ('{"type":"header","format":"awf-cassette","version":1,"workflow":"other"}\n',
         'recorded from workflow "other", not "chat"'),
    ],
)  # fmt: skip
async def test_an_unusable_cassette_is_refused_before_the_run_starts(
    workflow: Path, store: Store, tmp_path: Path, content: str | None, message: str
) -> None:
    cassette = tmp_path / "bad.jsonl"
    if content is not None:
        cassette.write_text(content)
    calls: list[str] = []

    with pytest.raises(CassetteError, match=message) as caught:
        await run(workflow, store, replay=cassette, providers=refusing_factory(calls))

    assert caught.value.exit_code == 1
    assert store.list_run_ids() == []  # refused before a run was made


async def test_a_fifo_as_the_cassette_is_refused_without_waiting_on_it(
    workflow: Path, store: Store, tmp_path: Path
) -> None:
    """Opening a FIFO waits for a writer: it is refused before it is opened."""
    fifo = tmp_path / "cassette.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(CassetteError, match=r"not a regular file \(it is a named pipe"):
        await run(workflow, store, replay=fifo, providers=refusing_factory([]))
    assert store.list_run_ids() == []


async def test_a_cassette_that_cannot_be_written_is_refused(workflow: Path, store: Store) -> None:
    with pytest.raises(CassetteError, match="cannot write the cassette"):
        await run(workflow, store, record=workflow.parent / "no-such-folder" / "c.jsonl")


async def test_record_and_replay_together_are_refused(workflow: Path, store: Store) -> None:
    with pytest.raises(UserError, match="record and replay cannot be used together"):
        await run(workflow, store, record=workflow, replay=workflow)


async def test_a_reply_cut_short_is_recorded_but_refused_on_replay(
    tmp_path: Path, store: Store
) -> None:
    workflow = tmp_path / "slow.yaml"
    workflow.write_text(
        CHAT.replace(
            "    system_prompt: Be brief.\n", "    system_prompt: Be brief.\n    timeout: 0.3\n"
        ).replace("delay_ms: 2", "delay_ms: 1000")
    )
    cassette = tmp_path / "slow.cassette.jsonl"
    recorded, _ = await run(workflow, store, record=cassette)
    assert "timed out" in recorded.error
    [turn] = [line for line in lines(cassette) if line["type"] == "turn"]
    assert turn["end"] == "interrupted"
    arrived = "".join(e.get("text", "") for e in turn["events"])
    assert "Bread is baked from flour and water.".startswith(arrived)
    assert not any("final" in e for e in turn["events"])

    replayed, _ = await run(workflow, store, replay=cassette)

    assert replayed.error.startswith("step chat: turn 1 was cut short when it was recorded")
