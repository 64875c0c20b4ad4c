"""Tests for awf_nb.store: state files, transcripts, history."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awf_nb.engine.state import ConversationState, RunState, StepState, Turn
from awf_nb.errors import AwfSystemError, UserError
from awf_nb.store import HistoryEntry, Store

RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")


def make_state(run_id: str, **fields: object) -> RunState:
    return RunState(run_id=run_id, workflow_name=fields.pop("workflow_name", "wf"), **fields)


def chat_state(store: Store, kept_turns: int = 2) -> tuple[RunState, ConversationState]:
    """A run whose step `chat` has a live conversation: `kept_turns` turns predate it."""
    run_id = store.new_run_id()
    turns = [Turn(role="user", content=f"old {i}") for i in range(kept_turns)]
    conv = ConversationState(session_id="s1", turns=turns, live_from=kept_turns)
    state = make_state(run_id, steps={"chat": StepState(name="chat", conversation=conv)})
    conv.transcript_line = store.append_transcript(run_id, {"step": "setup", "role": "system"})
    conv.transcript_line += 1
    return state, conv


# -- root and ids -----------------------------------------------------------------------


def test_root_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Store(tmp_path / "explicit").root == tmp_path / "explicit"
    assert Store(str(tmp_path / "s")).root == tmp_path / "s"
    assert Store().root == tmp_path / "env"
    monkeypatch.delenv("AWF_STORAGE")
    assert Store().root == tmp_path / "xdg" / "awf"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert Store().root == tmp_path / "home" / ".local" / "share" / "awf"


def test_layout_and_lazy_creation(tmp_path: Path) -> None:
    store = Store(tmp_path / "a" / "b")
    assert not store.root.exists()
    assert store.input_history_path == store.root / "input_history"
    assert store.history_path == store.root / "history.db"
    run_id = store.new_run_id()
    store.save_state(make_state(run_id))
    store.append_transcript(run_id, {"step": "x", "role": "user", "content": "hi"})
    store.record_run(make_state(run_id))
    assert (store.root / "runs" / run_id / "state.json").is_file()
    assert (store.root / "runs" / run_id / "transcript.jsonl").is_file()
    assert store.history_path.is_file()


def test_new_run_id_format_and_uniqueness(store: Store) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    ids = [store.new_run_id() for _ in range(300)]
    after = datetime.now(UTC)
    assert all(RUN_ID.match(run_id) for run_id in ids)
    assert len(set(ids)) == len(ids)
    # Each id starts with the UTC second it was made in: between the two clock readings.
    stamps = [datetime.strptime(i[:15], "%Y%m%d-%H%M%S").replace(tzinfo=UTC) for i in ids]
    assert before <= stamps[0] <= stamps[-1] <= after
    assert stamps == sorted(stamps)


def test_new_run_id_retries_on_collision(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    hexes = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    import secrets

    monkeypatch.setattr(secrets, "token_hex", lambda n: next(hexes))
    first, second = store.new_run_id(), store.new_run_id()
    assert first.endswith("aaaaaa") and second.endswith("bbbbbb")


def test_run_ids_sort_by_time(store: Store) -> None:
    early = "20250101-000000-ffffff"
    late = "20250101-000001-000000"
    for run_id in (late, early):
        store.save_state(make_state(run_id))
    assert store.list_run_ids() == [early, late]


# -- state ------------------------------------------------------------------------------


def test_state_round_trip(store: Store) -> None:
    run_id = store.new_run_id()
    state = make_state(
        run_id,
        status="completed",
        inputs={"path": "src", "n": 3},
        executed=["build", "chat"],
        completed_at=datetime.now(UTC),
        steps={
            "build": StepState(
                name="build",
                status="completed",
                output='{"ok": true}',
                exit_code=0,
                response={"ok": True},
                json={"ok": True},
                tokens_used=12,
            ),
            "chat": StepState(
                name="chat",
                conversation=ConversationState(
                    turns=[Turn(role="user", content="hi"), Turn(role="assistant", content="yo")],
                    total_turns=1,
                ),
            ),
        },
    )
    store.save_state(state)
    assert store.load_state(run_id) == state
    on_disk = json.loads(store.state_path(run_id).read_text())
    assert on_disk["steps"]["build"]["json"] == {"ok": True}  # snake_case, alias kept
    assert on_disk["steps"]["build"]["exit_code"] == 0


def test_runs_of_one_workflow_text_share_one_copy_of_it(store: Store) -> None:
    first, second, other = (store.new_run_id() for _ in range(3))
    store.save_state(make_state(first, workflow_source="name: wf\n"))
    store.save_state(make_state(second, workflow_source="name: wf\n"))
    store.save_state(make_state(other, workflow_source="name: other\n"))
    source = [store.run_dir(run_id) / "workflow.yaml" for run_id in (first, second, other)]
    assert source[0].stat().st_ino == source[1].stat().st_ino  # one file, two names
    assert source[2].stat().st_ino != source[0].stat().st_ino
    assert stat.S_IMODE(source[1].stat().st_mode) == 0o600
    # a run resumed later, its first copy gone, reads its own text
    for path in store.run_dir(first).iterdir():
        path.unlink()
    store.run_dir(first).rmdir()
    assert Store(store.root).load_state(second).workflow_source == "name: wf\n"


def test_a_workflow_text_that_cannot_be_linked_is_written(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first, second = store.new_run_id(), store.new_run_id()
    store.save_state(make_state(first, workflow_source="name: wf\n"))
    store.save_state(make_state(second, workflow_source="name: wf\n"))
    path = store.run_dir(second) / "workflow.yaml"
    assert path.read_text() == "name: wf\n"
    assert path.stat().st_ino != (store.run_dir(first) / "workflow.yaml").stat().st_ino


def test_save_leaves_no_temp_files(store: Store) -> None:
    run_id = store.new_run_id()
    for attempt in range(5):
        store.save_state(make_state(run_id, message=str(attempt)))
    assert [p.name for p in store.run_dir(run_id).iterdir()] == ["state.json"]
    assert store.load_state(run_id).message == "4"


def test_atomic_write_never_shows_a_partial_file(store: Store) -> None:
    run_id = store.new_run_id()
    big = "x" * 300_000  # large enough that a non-atomic write is seen half done
    store.save_state(make_state(run_id, message="0", steps={"s": StepState(name="s", output=big)}))
    path = store.state_path(run_id)
    writes = 150
    done = threading.Event()
    errors: list[Exception] = []

    def writer() -> None:
        try:
            for i in range(1, writes + 1):
                step = StepState(name="s", output=big[: len(big) - i])
                store.save_state(make_state(run_id, message=str(i), steps={"s": step}))
        except Exception as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    reads, seen = 0, set()
    while not done.is_set() or reads == 0:
        state = RunState.from_json(path.read_bytes())  # raises on a partial file
        assert len(state.steps["s"].output) == len(big) - int(state.message)
        seen.add(state.message)
        reads += 1
        if reads > 100_000:  # bound the loop whatever happens
            break
    thread.join(timeout=60)  # a hang guard: the writer must be done by then
    assert not thread.is_alive(), "the writer did not finish its 150 writes within 60 s"
    assert not errors
    assert reads > 10 and len(seen) > 2


def test_live_conversation_round_trip(store: Store) -> None:
    state, conv = chat_state(store)
    run_id = state.run_id
    expected = list(conv.turns)
    for i in range(3):
        for turn in (
            Turn(role="user", content=f"question {i}"),
            Turn(role="assistant", content=f"answer {i}", tokens=7, tokens_estimated=True),
        ):
            store.append_turn(run_id, "chat", turn)
            conv.turns.append(turn)
            expected.append(turn)
        # another step's messages and tool calls interleave in the same transcript
        store.append_transcript(run_id, {"step": "other", "role": "user", "content": "x"})
        store.append_transcript(run_id, {"step": "chat", "role": "tool", "content": "ls"})
        store.save_state(state)

    on_disk = json.loads(store.state_path(run_id).read_text())
    assert [t["content"] for t in on_disk["steps"]["chat"]["conversation"]["turns"]] == [
        "old 0",
        "old 1",
    ]
    assert len(state.steps["chat"].conversation.turns) == 8  # the caller's state is intact
    loaded = store.load_state(run_id)
    assert loaded.steps["chat"].conversation.turns == expected
    assert loaded.steps["chat"].conversation.live_from == 2


def test_live_conversation_ignores_records_before_its_start(store: Store) -> None:
    run_id = store.new_run_id()
    # an earlier conversation of the same step (a previous loop iteration)
    store.append_transcript(run_id, {"step": "chat", "role": "user", "content": "earlier"})
    line = store.append_turn(run_id, "chat", Turn(role="user", content="now"))
    conv = ConversationState(turns=[], live_from=0, transcript_line=line)
    store.save_state(make_state(run_id, steps={"chat": StepState(name="chat", conversation=conv)}))
    turns = store.load_state(run_id).steps["chat"].conversation.turns
    assert [t.content for t in turns] == ["now"]


def test_finished_conversation_is_stored_whole(store: Store) -> None:
    state, conv = chat_state(store)
    conv.turns.append(Turn(role="assistant", content="done"))
    conv.live_from = None
    store.save_state(state)
    on_disk = json.loads(store.state_path(state.run_id).read_text())
    assert len(on_disk["steps"]["chat"]["conversation"]["turns"]) == 3


def test_checkpoint_size_does_not_grow_with_turns(store: Store) -> None:
    sizes = []
    for turns in (10, 1000):
        state, conv = chat_state(store)
        for i in range(turns):
            turn = Turn(role="assistant" if i % 2 else "user", content=f"message {i:05d}")
            store.append_turn(state.run_id, "chat", turn)
            conv.turns.append(turn)
        store.save_state(state)
        sizes.append(store.state_path(state.run_id).stat().st_size)
        assert len(store.load_state(state.run_id).steps["chat"].conversation.turns) == turns + 2
    assert sizes[0] == sizes[1]


def test_unknown_run_id(store: Store) -> None:
    with pytest.raises(UserError) as err:
        store.load_state("nope")
    assert err.value.message == f'run "nope" not found in {store.root}'
    assert err.value.exit_code == 1
    for bad in ("", "..", "../x", "/etc"):
        with pytest.raises(UserError, match="not found"):
            store.load_state(bad)


def test_run_id_prefix(store: Store) -> None:
    for run_id in ("20250101-000000-abc123", "20250101-000000-abd456", "20250102-000000-000000"):
        store.save_state(make_state(run_id))
    assert store.load_state("20250102").run_id == "20250102-000000-000000"
    assert store.load_state("20250101-000000-abc").run_id == "20250101-000000-abc123"
    with pytest.raises(UserError, match=r'"20250101-000000-ab" is ambiguous.*abc123.*abd456'):
        store.load_state("20250101-000000-ab")


def test_reserved_run_without_state_is_not_listed(store: Store) -> None:
    run_id = store.new_run_id()
    assert store.list_run_ids() == []
    with pytest.raises(UserError, match="not found"):
        store.load_state(run_id)


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b'{"run_id": "r", "workflow_na', "Unterminated string"),
        (b'{"run_id": "r"}', "workflow_name: Field required"),
        (b"\xff\xfe", "Expecting value"),
        (b"[]", "Input should be"),
    ],
)
def test_corrupt_state_file(store: Store, content: bytes, detail: str) -> None:
    run_id = "20250101-000000-000000"
    store.save_state(make_state(run_id))
    store.state_path(run_id).write_bytes(content)
    with pytest.raises(UserError) as err:
        store.load_state(run_id)
    assert str(store.state_path(run_id)) in err.value.message
    assert "corrupt" in err.value.message and detail in err.value.message


def test_state_from_a_newer_version(store: Store) -> None:
    run_id = "20250101-000000-000000"
    store.save_state(make_state(run_id, storage_version=99))
    with pytest.raises(UserError, match="newer awf-nb"):
        store.load_state(run_id)


# -- transcript -------------------------------------------------------------------------


def test_transcript_lines_are_numbered(store: Store) -> None:
    run_id = store.new_run_id()
    numbers = [
        store.append_transcript(run_id, {"step": "s", "role": "user", "content": f"m{i}\nx"})
        for i in range(5)
    ]
    assert numbers == [0, 1, 2, 3, 4]
    records = store.read_transcript(run_id)
    assert [r["content"] for r in records] == [f"m{i}\nx" for i in range(5)]
    assert all(datetime.fromisoformat(r["ts"]) for r in records)
    assert [r["content"] for r in store.read_transcript(run_id, start=3)] == ["m3\nx", "m4\nx"]
    assert store.read_transcript(run_id, start=10) == []
    # a new Store (a resumed run in another process) continues the numbering
    assert Store(store.root).append_transcript(run_id, {"role": "user", "content": "z"}) == 5


def test_transcript_keeps_given_fields(store: Store) -> None:
    run_id = store.new_run_id()
    record = {"step": "s", "role": "assistant", "content": "é ✓", "ts": "T", "extra": [1]}
    store.append_transcript(run_id, record)
    assert store.read_transcript(run_id) == [record]
    assert "é ✓" in store.transcript_path(run_id).read_text(encoding="utf-8")


def test_a_turn_line_holds_the_step_the_turn_extras_and_a_time_in_that_order(
    store: Store,
) -> None:
    run_id = store.new_run_id()
    calls = [{"id": "c1", "name": "Read", "arguments": '{"path": "é.txt"}'}]
    turn = Turn(role="assistant", content='ça \u2713 "q"\n', duration=0.012, tool_calls=calls)
    store.append_turn(run_id, "work", turn, partner="critic")
    line = store.transcript_path(run_id).read_text(encoding="utf-8")
    record = json.loads(line)
    assert list(record) == ["step", *Turn.model_fields, "partner", "ts"]
    assert record == {"step": "work", **turn.model_dump(), "partner": "critic", "ts": record["ts"]}
    assert datetime.fromisoformat(record["ts"]).tzinfo is not None
    assert "ça ✓" in line and line.endswith("}\n") and line.count("\n") == 1
    assert store._turn_from_record(run_id, record) == turn  # what a resume reads back


def test_turn_lines_of_a_step_with_a_quoted_name_read_back_with_one_time_each(
    store: Store,
) -> None:
    run_id = store.new_run_id()
    store.append_turn(run_id, 'é "one"', Turn(role="user", content="hi"))
    store.append_turn(run_id, 'é "one"', Turn(role="tool", content="x"), ts="ignored")
    lines = store.transcript_path(run_id).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == ['é "one"', 'é "one"']
    assert [list(r) for r in records] == [["step", *Turn.model_fields, "ts"]] * 2
    assert all(datetime.fromisoformat(r["ts"]).tzinfo is not None for r in records)


def test_torn_transcript_line(store: Store) -> None:
    run_id = store.new_run_id()
    store.append_transcript(run_id, {"role": "user", "content": "a"})
    store.append_transcript(run_id, {"role": "user", "content": "b"})
    with store.transcript_path(run_id).open("ab") as file:
        file.write(b'{"role": "assistant", "content": "half a rep')  # killed mid-write
    assert [r["content"] for r in store.read_transcript(run_id)] == ["a", "b"]
    resumed = Store(store.root)
    assert resumed.append_transcript(run_id, {"role": "user", "content": "c"}) == 2
    assert [r["content"] for r in resumed.read_transcript(run_id)] == ["a", "b", "c"]


def test_corrupt_transcript_line(store: Store) -> None:
    run_id = store.new_run_id()
    store.append_transcript(run_id, {"role": "user", "content": "a"})
    with store.transcript_path(run_id).open("ab") as file:
        file.write(b"garbage\n")
    with pytest.raises(UserError, match=r"transcript .*transcript.jsonl is corrupt at line 2"):
        store.read_transcript(run_id)


class FsyncLog:
    """Records what `os.fsync` is called on, inside the store: the run's transcript, its
    directory, or another file (a state file's temp file, the workflow source)."""

    def __init__(self, store: Store, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store, self.run_id = store, run_id
        self.calls: list[os.stat_result] = []
        real = os.fsync

        def fsync(fd: int) -> None:
            self.calls.append(os.fstat(fd))
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    def kinds(self) -> list[str]:
        transcript = self.store.transcript_path(self.run_id)
        inode = transcript.stat().st_ino if transcript.exists() else None
        return [
            "transcript" if st.st_ino == inode else "dir" if stat.S_ISDIR(st.st_mode) else "file"
            for st in self.calls
        ]


def test_appended_lines_are_not_fsynced_until_a_checkpoint(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = store.new_run_id()
    fsyncs = FsyncLog(store, run_id, monkeypatch)
    for i in range(20):
        store.append_transcript(run_id, {"role": "user", "content": f"m{i}"})
    assert fsyncs.kinds() == []
    # written all the same: another reader (a resumed process) sees every line at once
    assert len(Store(store.root).read_transcript(run_id)) == 20


def test_a_checkpoint_fsyncs_the_transcript_before_the_state_file(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = store.new_run_id()
    store.save_state(make_state(run_id))
    fsyncs = FsyncLog(store, run_id, monkeypatch)
    store.append_transcript(run_id, {"role": "user", "content": "a"})
    store.append_transcript(run_id, {"role": "assistant", "content": "b"})
    store.save_state(make_state(run_id, message="after two lines"))
    assert fsyncs.kinds() == ["transcript", "file", "dir"]


def test_a_checkpoint_with_nothing_new_in_the_transcript_does_not_fsync_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = store.new_run_id()
    store.append_transcript(run_id, {"role": "user", "content": "a"})
    store.save_state(make_state(run_id))
    fsyncs = FsyncLog(store, run_id, monkeypatch)
    store.save_state(make_state(run_id, message="again"))
    assert fsyncs.kinds() == ["file", "dir"]


def test_sync_transcript_fsyncs_only_unsynced_lines(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = store.new_run_id()
    fsyncs = FsyncLog(store, run_id, monkeypatch)
    store.sync_transcript(run_id)  # no transcript yet: nothing to do
    store.append_transcript(run_id, {"role": "user", "content": "a"})
    store.sync_transcript(run_id)
    store.sync_transcript(run_id)
    assert fsyncs.kinds() == ["transcript"]
    store.append_transcript(run_id, {"role": "user", "content": "b"})
    store.sync_transcript(run_id)
    assert fsyncs.kinds() == ["transcript", "transcript"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files via /proc")
def test_a_synced_transcript_holds_no_open_file(store: Store) -> None:
    """Between checkpoints the transcript may stay open for the next line; once synced
    (a checkpoint, the person asked for input) nothing of it is held open."""

    def open_transcripts() -> list[str]:
        targets = []
        for fd in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                targets.append(os.readlink(fd))
        return [t for t in targets if t.endswith("transcript.jsonl")]

    run_id = store.new_run_id()
    for i in range(3):
        store.append_transcript(run_id, {"role": "user", "content": f"m{i}"})
    store.sync_transcript(run_id)
    assert open_transcripts() == []
    store.append_transcript(run_id, {"role": "user", "content": "again"})
    store.save_state(make_state(run_id))
    assert open_transcripts() == []
    assert [r["content"] for r in store.read_transcript(run_id)] == ["m0", "m1", "m2", "again"]


def test_each_run_syncs_its_own_transcript(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = store.new_run_id(), store.new_run_id()
    store.append_transcript(first, {"role": "user", "content": "a"})
    store.append_transcript(second, {"role": "user", "content": "b"})
    fsyncs = FsyncLog(store, first, monkeypatch)
    store.sync_transcript(first)
    assert fsyncs.kinds() == ["transcript"]
    fsyncs.calls.clear()
    store.sync_transcript(first)
    assert fsyncs.kinds() == []
    store.sync_transcript(second)  # still unsynced: the first run's sync was its own
    assert len(fsyncs.calls) == 1 and fsyncs.kinds() == ["file"]


@pytest.mark.parametrize("bad", ["", ".", "..", "../escape", "a/b"])
def test_invalid_run_ids_are_refused(store: Store, bad: str) -> None:
    with pytest.raises(UserError, match="invalid run id"):
        store.save_state(make_state(bad))
    with pytest.raises(UserError, match="invalid run id"):
        store.append_transcript(bad, {"role": "user"})
    with pytest.raises(UserError, match="invalid run id"):
        store.read_transcript(bad)
    assert not store.runs_dir.exists() or list(store.runs_dir.iterdir()) == []


def test_transcript_of_unknown_run(store: Store) -> None:
    with pytest.raises(UserError, match='run "nope" not found'):
        store.read_transcript("nope")
    assert store.read_transcript(store.new_run_id()) == []


# -- history ----------------------------------------------------------------------------


def history_state(run_id: str, workflow: str, status: str, minutes: int, **fields) -> RunState:
    started = datetime(2025, 5, 1, 12, 0, tzinfo=UTC) + timedelta(minutes=minutes)
    return make_state(
        run_id,
        workflow_name=workflow,
        status=status,
        started_at=started,
        completed_at=started + timedelta(seconds=90),
        **fields,
    )


def test_history_filters_and_order(store: Store) -> None:
    rows = [
        ("r1", "build", "completed", 0),
        ("r2", "review", "failed", 1),
        ("r3", "build", "failed", 2),
        ("r4", "build", "completed", 3),
        ("r5", "review", "completed", 4),
    ]
    for run_id, workflow, status, minutes in reversed(rows):
        store.record_run(history_state(run_id, workflow, status, minutes))

    def ids(**kwargs) -> list[str]:
        return [entry.run_id for entry in store.history(**kwargs)]

    assert ids() == ["r5", "r4", "r3", "r2", "r1"]
    assert ids(workflow="build") == ["r4", "r3", "r1"]
    assert ids(status="failed") == ["r3", "r2"]
    assert ids(workflow="build", status="completed") == ["r4", "r1"]
    assert ids(limit=2) == ["r5", "r4"]
    assert ids(workflow="nothing") == []
    assert len(store.history(limit=None)) == 5


def test_history_entry_fields_and_upsert(store: Store) -> None:
    state = history_state(
        "r1",
        "build",
        "running",
        0,
        inputs={"path": "src", "when": datetime(2025, 1, 1, tzinfo=UTC)},
        parent_run_id="p0",
        steps={"a": StepState(name="a", tokens_used=5), "b": StepState(name="b", tokens_used=7)},
    )
    store.record_run(state)
    state.status, state.error = "failed", "step a: boom"
    store.record_run(state)
    [entry] = store.history()
    assert entry == HistoryEntry(
        run_id="r1",
        workflow="build",
        status="failed",
        started_at=state.started_at,
        completed_at=state.completed_at,
        duration=90.0,
        tokens=12,
        error="step a: boom",
        inputs={"path": "src", "when": "2025-01-01 00:00:00+00:00"},
        parent_run_id="p0",
    )
    as_dict = entry.as_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict["started_at"] == "2025-05-01T12:00:00+00:00"


def test_history_of_a_run_in_progress(store: Store) -> None:
    state = make_state("r1", status="running")
    store.record_run(state)
    [entry] = store.history()
    assert entry.completed_at is None and entry.status == "running"


def test_history_bad_arguments(store: Store) -> None:
    with pytest.raises(UserError, match='unknown run status "complete"'):
        store.history(status="complete")
    with pytest.raises(UserError, match="at least 1"):
        store.history(limit=0)


def test_history_empty_store(store: Store) -> None:
    assert store.history() == []
    assert store.list_run_ids() == []
    assert not store.root.exists()


def test_history_uses_wal(store: Store) -> None:
    import sqlite3

    store.record_run(make_state("r1"))
    with sqlite3.connect(store.history_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_history_keeps_one_connection_per_thread(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    opened: list[str] = []
    real_connect = sqlite3.connect

    def counting_connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        opened.append(threading.current_thread().name)
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", counting_connect)
    for index in range(5):
        store.record_run(make_state(f"r{index}"))
    assert len(store.history()) == 5
    assert len(opened) == 1  # one connection for the five writes and the read
    other = threading.Thread(target=lambda: store.record_run(make_state("r9")), name="other")
    other.start()
    other.join()
    assert opened[1:] == ["other"]  # a thread of its own has a connection of its own
    assert len(store.history()) == 6


def test_history_opens_again_a_file_moved_away(store: Store) -> None:
    store.record_run(make_state("r1"))
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{store.history_path}{suffix}")
        if path.exists():
            path.rename(f"{path}.damaged")
    store.record_run(make_state("r2"))
    assert [entry.run_id for entry in store.history()] == ["r2"]  # a new history
    assert stat.S_IMODE(store.history_path.stat().st_mode) == 0o600


def test_corrupt_history_db(store: Store) -> None:
    store.root.mkdir(parents=True)
    store.history_path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(AwfSystemError, match=re.escape(str(store.history_path))):
        store.record_run(make_state("r1"))


# -- system errors ----------------------------------------------------------------------


def test_unwritable_root(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = Store(blocker / "storage")
    for action in (
        store.new_run_id,
        lambda: store.save_state(make_state("r1")),
        lambda: store.append_transcript("r1", {"role": "user"}),
        lambda: store.record_run(make_state("r1")),
    ):
        with pytest.raises(AwfSystemError) as err:
            action()
        assert str(blocker) in err.value.message
        assert err.value.exit_code == 4


def disk_full(fd: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_on_state(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = store.new_run_id()
    store.save_state(make_state(run_id, message="before"))
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(AwfSystemError) as err:
        store.save_state(make_state(run_id, message="after"))
    assert str(store.state_path(run_id)) in err.value.message
    assert "No space left on device" in err.value.message
    monkeypatch.undo()
    assert [p.name for p in store.run_dir(run_id).iterdir()] == ["state.json"]
    assert store.load_state(run_id).message == "before"


def test_disk_full_on_transcript(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = store.new_run_id()
    monkeypatch.setattr(os, "write", disk_full_write)
    with pytest.raises(AwfSystemError, match=r"transcript\.jsonl: No space left on device"):
        store.append_transcript(run_id, {"role": "user"})


def disk_full_write(fd: int, data: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_when_the_transcript_is_synced_keeps_the_old_state(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transcript that cannot be made durable fails the checkpoint before the state file
    is replaced: the saved state never refers to lines that are not on disk."""
    run_id = store.new_run_id()
    store.save_state(make_state(run_id, message="before"))
    store.append_transcript(run_id, {"role": "user", "content": "a"})
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(AwfSystemError, match=r"transcript\.jsonl: No space left on device"):
        store.save_state(make_state(run_id, message="after"))
    monkeypatch.undo()
    assert store.load_state(run_id).message == "before"
    fsyncs = FsyncLog(store, run_id, monkeypatch)
    store.save_state(make_state(run_id, message="after"))  # the lines are still unsynced
    assert fsyncs.kinds()[0] == "transcript"


def test_a_reply_written_but_not_yet_checkpointed_is_counted_on_load(store: Store) -> None:
    """The transcript is written before the state file: a crash between the two leaves
    a saved reply count one short, and loading counts the turns instead."""
    state, conv = chat_state(store, kept_turns=0)
    conv.total_turns = 1
    store.save_state(state)
    said = [("user", "hi"), ("assistant", "a1"), ("user", "more"), ("assistant", "a2")]
    for role, content in said:
        store.append_turn(state.run_id, "chat", Turn(role=role, content=content))
    loaded = store.load_state(state.run_id).steps["chat"].conversation
    assert [t.content for t in loaded.turns] == ["hi", "a1", "more", "a2"]
    assert loaded.total_turns == 2


def test_replies_count_tool_rounds_with_the_reply_they_continue() -> None:
    conv = ConversationState(
        turns=[
            Turn(role="system", content="s"),
            Turn(role="user", content="q"),
            Turn(role="assistant", content="", tool_calls=[{"id": "c", "name": "Read"}]),
            Turn(role="tool", content="r", tool_call_id="c", name="Read"),
            Turn(role="assistant", content="answer"),
            Turn(role="user", content="q2"),
            Turn(role="assistant", content="answer 2"),
        ]
    )
    assert conv.count_replies() == 2
