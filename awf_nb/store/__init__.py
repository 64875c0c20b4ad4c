"""Durable storage of runs: state files, transcripts and the run history.

Layout under the storage root (`--storage`, else `$AWF_STORAGE`, else
`$XDG_DATA_HOME/awf`, else `~/.local/share/awf`):

    runs/<run_id>/state.json        the RunState, replaced atomically at every checkpoint
    runs/<run_id>/workflow.yaml     the workflow text exactly as written (for resume); the
                                    runs of one text a store writes share one file (hard
                                    links: an eval's runs all run the same workflow)
    runs/<run_id>/transcript.jsonl  one JSON line per message or tool call, append-only
    history.db                      one row per run (SQLite, WAL: shared by processes)
    input_history                   readline history of the terminal reader

A live conversation's turns are not rewritten into the state file at every turn: the
turns from `ConversationState.live_from` on are appended to the transcript and put back
by `load_state`, so a per-turn checkpoint costs the same at turn 10 and turn 1,000.

State files are fsynced at every checkpoint; transcript lines are fsynced in groups, with
the next checkpoint (see `Store` for what a killed process or a power loss keeps).

The package's modules: `files.py` (private files, atomic writes), `transcript.py` (the
transcripts), `history.py` (the run history); `Store` puts them under one root.

The store writes what it is given; masking secrets is the engine's job. Everything here is
private to the user (folders 0700, files 0600): the workflow text is kept unmasked, because
a resumed run needs it exactly as written, and it is never shown (`RunState.to_json`
leaves it out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import AwfSystemError, UserError
from awf_nb.store.files import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    SOURCE_FILE,
    STATE_FILE,
    TRANSCRIPT_FILE,
    Layout,
    SourceCopies,
    atomic_write,
    fsync_dir,
    fsync_file,
    is_plain_name,
    system_error,
)
from awf_nb.store.history import HistoryEntry, RunHistory
from awf_nb.store.transcript import Transcripts

if TYPE_CHECKING:  # the state models (pydantic) are imported only where a state is read
    from awf_nb.engine.state import ConversationState, RunState, Turn

# The layout and the writing of private files, for what stores next to the runs (an eval's
# folder, its run store).
__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "SOURCE_FILE",
    "STATE_FILE",
    "TRANSCRIPT_FILE",
    "HistoryEntry",
    "Store",
    "atomic_write",
    "checkpoint_view",
    "default_root",
]

HISTORY_FILE = "history.db"
INPUT_HISTORY_FILE = "input_history"
STORAGE_VERSION = 1  # the newest RunState.storage_version this code can read

_RUN_ID_ATTEMPTS = 100


def default_root() -> Path:
    """`$AWF_STORAGE`, else `$XDG_DATA_HOME/awf`, else `~/.local/share/awf`."""
    if storage := os.environ.get("AWF_STORAGE"):
        return Path(storage).expanduser()
    if data_home := os.environ.get("XDG_DATA_HOME"):
        return Path(data_home).expanduser() / "awf"
    return Path.home() / ".local" / "share" / "awf"


class Store:
    """State files, transcripts and history under one storage root.

    Safe to share between threads; several processes may share a root as long as each
    run is written by one process at a time (the transcript line count is kept in memory).

    What survives what. Every transcript line is written with one `write` before the
    engine goes on, so a killed process (`kill -9`, Ctrl-C, a crash of awf) loses nothing:
    the kernel has the bytes. Forcing them onto the disk (fsync) is done in groups, not
    after every line: a run's unsynced lines are fsynced by `save_state` before the state
    file is written (so a saved state never refers to lines that are not on disk) — at
    every checkpoint: a step transition, a conversation turn, the end of the run — and by
    `sync_transcript`, which the engine calls before it asks the person for input. A power
    loss or a kernel crash may cost the lines written since the last checkpoint; the
    state file on disk describes the run as it was then, and `awf resume` redoes the rest.

    `durable=False` (an eval's many runs in one process) writes the same files the same
    way — a killed process still loses nothing — but forces nothing onto the disk at a
    checkpoint: a run's files are fsynced once, by `settle(run_id)` when it has ended. A
    power loss may then cost the runs in flight, which an eval reruns anyway; fsyncs on
    the event loop at every turn of hundreds of conversations would stall them all.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, durable: bool = True) -> None:
        self.durable = durable
        self._to_settle: set[str] = set()  # runs written since their last `settle`
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.runs_dir = self.root / "runs"
        self.history_path = self.root / HISTORY_FILE
        self.input_history_path = self.root / INPUT_HISTORY_FILE
        self._sources_saved: set[str] = set()
        self._source_copies = SourceCopies()  # one copy of a text for the runs of it
        # The parts share the layout, never the store: a store that is gone is collected
        # at once (no cycle), and its transcripts' descriptors are closed with it.
        self._layout = layout = Layout(self.root)
        self._ensure_dir = layout.ensure_dir
        self._transcripts = Transcripts(layout, durable=durable, to_settle=self._to_settle)
        self._history = RunHistory(self.history_path, layout, durable=durable)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # -- runs ---------------------------------------------------------------------------

    def new_run_id(self) -> str:
        """A new run id (`20261122-030501-3fa9c1`: UTC time + random hex), reserved.

        Ids sort by start time; the run directory is created exclusively, so an id is
        unique even when several processes start runs in the same second.
        """
        from awf_nb.engine.state import new_run_id

        self._ensure_dir(self.runs_dir)
        for _ in range(_RUN_ID_ATTEMPTS):
            run_id = new_run_id()
            try:
                (self.runs_dir / run_id).mkdir(mode=PRIVATE_DIR)
            except FileExistsError:
                continue
            except OSError as exc:
                raise system_error("cannot create run directory", self.runs_dir, exc) from exc
            return run_id
        raise AwfSystemError(f"cannot find a free run id in {self.runs_dir}")

    def run_dir(self, run_id: str) -> Path:
        return self._layout.run_dir(run_id)

    def state_path(self, run_id: str) -> Path:
        return self._layout.state_path(run_id)

    def transcript_path(self, run_id: str) -> Path:
        return self._layout.transcript_path(run_id)

    def list_run_ids(self) -> list[str]:
        """Ids of the runs that have a state file, oldest first."""
        if not self.runs_dir.is_dir():
            return []
        try:
            return sorted(
                entry.name for entry in self.runs_dir.iterdir() if (entry / STATE_FILE).is_file()
            )
        except OSError as exc:
            raise system_error("cannot list runs in", self.runs_dir, exc) from exc

    def resolve_run_id(self, run_id: str) -> str:
        """The full id of the run `run_id` names: an exact id or a unique prefix of one."""
        if is_plain_name(run_id) and self.state_path(run_id).is_file():
            return run_id
        matches = [rid for rid in self.list_run_ids() if run_id and rid.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UserError(
                f'run "{run_id}" not found in {self.root}',
                hint="`awf history` lists the runs; --storage or $AWF_STORAGE selects another "
                "storage directory",
            )
        shown = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
        raise UserError(
            f'run id "{run_id}" is ambiguous in {self.root}: it starts {len(matches)} run ids '
            f"({shown})",
            hint="give more characters of the id",
        )

    # -- state --------------------------------------------------------------------------

    def save_state(self, state: RunState) -> None:
        """Write the state file atomically (a reader sees the old or the new file, whole).

        The turns of a live conversation from `live_from` on are left out: they are in the
        transcript already, and `load_state` puts them back. The run's transcript is
        fsynced first, so the state on disk never refers to lines that are not.
        """
        path = self.state_path(state.run_id)
        self.sync_transcript(state.run_id)
        self._ensure_dir(path.parent)
        if state.workflow_source and state.run_id not in self._sources_saved:
            self._source_copies.write(
                path.parent / SOURCE_FILE, state.workflow_source, fsync=self.durable
            )
            self._sources_saved.add(state.run_id)
        atomic_write(path, checkpoint_view(state).to_json().encode(), fsync=self.durable)
        if not self.durable:
            self._to_settle.add(state.run_id)

    def load_state(self, run_id: str) -> RunState:
        """The run's state, live conversation turns restored from its transcript.

        `run_id` may be a unique prefix of the id.
        """
        from awf_nb.engine.state import RunState

        run_id = self.resolve_run_id(run_id)
        path = self.state_path(run_id)
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise system_error("cannot read", path, exc) from exc
        try:
            state = RunState.from_json(text)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise UserError(
                f"state file {path} is corrupt: {_describe(exc)}",
                hint="the run cannot be shown or resumed; delete its directory to drop it",
            ) from exc
        if state.storage_version > STORAGE_VERSION:
            raise UserError(
                f"state file {path} was written by a newer awf-nb "
                f"(storage version {state.storage_version})",
                hint="upgrade awf-nb to read it",
            )
        source = path.parent / SOURCE_FILE
        if not state.workflow_source and source.is_file():
            try:
                state.workflow_source = source.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"cannot read {source}: {_describe(exc)}") from exc
        self._restore_live_turns(state)
        # A run marked running whose process is gone (kill -9, a crash) is interrupted.
        state.status = state.shown_status()  # type: ignore[assignment]
        return state

    def _restore_live_turns(self, state: RunState) -> None:
        live = {
            name: step.conversation
            for name, step in state.steps.items()
            if step.conversation is not None and step.conversation.live_from is not None
        }
        if not live:
            return
        first_line = min(conv.transcript_line for conv in live.values())
        records = self.read_transcript(state.run_id, first_line)
        for name, conv in live.items():
            kept = conv.turns[: conv.live_from]
            offset = conv.transcript_line - first_line
            restored = [
                self._turn_from_record(state.run_id, record)
                for record in records[offset:]
                if record.get("step") == name
                and (
                    record.get("role") in ("user", "assistant", "system")
                    # a tool's result in chat mode; a bare `tool` line notes what an agent
                    # CLI ran in its own turn, which is no message of the conversation
                    or (record.get("role") == "tool" and record.get("tool_call_id"))
                )
            ]
            conv.turns = kept + restored
            # The transcript is written before the state file: after a crash between the
            # two, the turns are right and the saved count may be one short.
            conv.total_turns = conv.count_replies()

    def _turn_from_record(self, run_id: str, record: dict[str, Any]) -> Turn:
        from awf_nb.engine.state import Turn

        fields = {key: record[key] for key in Turn.model_fields if key in record}
        try:
            return Turn.model_validate(fields)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise UserError(
                f"transcript {self.transcript_path(run_id)} is corrupt: {_describe(exc)}"
            ) from exc

    # -- transcript ---------------------------------------------------------------------

    def append_transcript(self, run_id: str, record: dict[str, Any]) -> int:
        """Append one record as a JSON line; its 0-based line number.

        The line is written with one `write` (a killed process keeps it) and fsynced later,
        with the others written since, by `sync_transcript` (which every `save_state`
        calls). A `ts` (UTC, ISO 8601) is added when the record has none.
        """
        return self._transcripts.append(run_id, record)

    def append_turn(self, run_id: str, step: str, turn: Turn, **extra: Any) -> int:
        """Append a conversation turn of `step` to the transcript; its line number (the
        same line as `append_transcript` of the turn's fields, `step` and `extra`)."""
        return self._transcripts.append_turn(run_id, step, turn, **extra)

    def sync_transcript(self, run_id: str) -> None:
        """Force the run's transcript lines written so far onto the disk (fsync), if any
        are not yet: before the person is asked for input, when a step or the run ends."""
        self._transcripts.sync(run_id)

    def settle(self, run_id: str) -> None:
        """Force a run's files (transcript, state, workflow text, folder) onto the disk:
        what `durable=False` leaves to the end of a run. Does nothing for a durable store."""
        if self.durable:
            return
        self.sync_transcript(run_id)
        self._to_settle.discard(run_id)
        folder = self.run_dir(run_id)
        for name in (TRANSCRIPT_FILE, STATE_FILE, SOURCE_FILE):
            try:
                fsync_file(folder / name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise system_error("cannot write", folder / name, exc) from exc
        fsync_dir(folder)

    def read_transcript(self, run_id: str, start: int = 0) -> list[dict[str, Any]]:
        """The transcript's records from line `start` on (a torn last line is skipped)."""
        return self._transcripts.read(run_id, start)

    # -- history ------------------------------------------------------------------------

    def record_run(self, state: RunState) -> None:
        """Insert or update the run's history row."""
        self._history.record(state)

    def history(
        self, workflow: str | None = None, status: str | None = None, limit: int | None = 20
    ) -> list[HistoryEntry]:
        """Runs, newest first, optionally of one workflow and/or one status.

        `limit=None` lists every run.
        """
        return self._history.entries(workflow, status, limit)


def checkpoint_view(state: RunState) -> RunState:
    """`state` as the state file holds it: live conversations cut at `live_from`.

    Shallow copies only, so the cost does not grow with the number of live turns.
    """
    steps = dict(state.steps)
    changed = False
    for name, step in state.steps.items():
        conv = step.conversation
        if conv is None or conv.live_from is None or len(conv.turns) <= conv.live_from:
            continue
        trimmed: ConversationState = conv.model_copy(update={"turns": conv.turns[: conv.live_from]})
        steps[name] = step.model_copy(update={"conversation": trimmed})
        changed = True
    return state.model_copy(update={"steps": steps}) if changed else state


def _describe(exc: Exception) -> str:
    """One line saying what is wrong with a file's content."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"{where}: {first['msg']}{more}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
