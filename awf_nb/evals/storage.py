"""An eval's folder in the store: what makes an eval reproducible, resumable and listable.

Under the storage root (the runs' own, `awf_nb.store`):

    evals/<EVAL_ID>/manifest.json   id, workflow, status, process, totals, options (atomic)
    evals/<EVAL_ID>/eval.json       the resolved eval file (paths absolute, flags applied)
    evals/<EVAL_ID>/workflow.yaml   the workflow text as it was run
    evals/<EVAL_ID>/variants/NAME.yaml  each variant's workflow text as it was run (its
                                    `set:` values in it), for an eval with `variants:`
    evals/<EVAL_ID>/cases.jsonl     the cases as they were read (resume runs these)
    evals/<EVAL_ID>/runs.jsonl      one line per run started: case, epoch, (variant,) run id
    evals/<EVAL_ID>/results.jsonl   one line per finished run (an `EvalRow`)
    evals/<EVAL_ID>/pairwise.jsonl  one line per pair the pairwise judge decided
    evals/<EVAL_ID>/lock            held (flock) by the process running the eval: its pid,
                                    host and start, for the one it refuses

Lines of runs.jsonl and results.jsonl are appended with one `write` before the eval goes
on, so `kill -9` loses at most the runs in flight: `--resume` reruns exactly the
(case, epoch[, variant]) runs without a result line. Result lines are forced onto the disk
(fsync) in groups: with a line written `RESULTS_SYNC_INTERVAL` after the last fsync, and
when the eval ends (an fsync per line writes its page again for every line). A power loss
may cost the lines of that last moment: their runs are rerun by `--resume`. A torn last
line (the writer was killed in the middle of it) is ignored when read and cut off before
the next append.

Each (case, epoch) is also an ordinary run under `runs/` (`awf status RUN_ID`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import MISSING, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from awf_nb.errors import AwfSystemError, UserError
from awf_nb.evals.datasets import Case
from awf_nb.evals.model import MAX_EPOCHS, MAX_MAX_RUNS, MAX_VARIANTS, VARIANT_NAME
from awf_nb.evals.results import EvalResult, EvalRow
from awf_nb.safe_text import terminal_safe
from awf_nb.store import PRIVATE_DIR, PRIVATE_FILE, Store, atomic_write
from awf_nb.store.files import drop_torn_tail, system_error

EVALS_DIR = "evals"
MANIFEST = "manifest.json"
RESOLVED = "eval.json"
WORKFLOW = "workflow.yaml"
VARIANTS = "variants"
CASES = "cases.jsonl"
RUNS = "runs.jsonl"
RESULTS = "results.jsonl"
PAIRWISE = "pairwise.jsonl"
LOCK = "lock"
_ID_ATTEMPTS = 100
RESULTS_SYNC_INTERVAL = 1.0  # seconds between two fsyncs of results.jsonl, at least
# What a manifest's counts may be (the eval file's own bounds): a folder changed by hand to
# `epochs: 1000000000` is refused when read, not planned.
_BOUNDS = (
    ("epochs", 1, MAX_EPOCHS),
    ("total", 0, MAX_MAX_RUNS),
    ("cases", 0, MAX_MAX_RUNS),
    ("concurrency", 1, 1_000_000),
    ("pid", 0, 1 << 32),
    ("seed", -(1 << 63), (1 << 63) - 1),
)


@dataclass
class Manifest:
    """What `awf evals` lists and `--resume` needs besides the rows."""

    eval_id: str
    workflow: str
    workflow_path: str
    eval_path: str  # the eval file ("" for an eval given in Python or a notebook cell)
    base_dir: str  # the eval file's folder: commands run there, templates read from it
    created_at: str
    status: str = "running"  # running | completed | cancelled | stopped (| interrupted: shown)
    finished_at: str = ""
    pid: int = 0
    pid_started: str = ""
    host: str = ""
    total: int = 0  # (case, epoch) pairs
    cases: int = 0
    epochs: int = 1
    concurrency: int = 1
    seed: int = 0
    cassette_mode: str = ""  # record | replay | record-missing | ""
    cassette_dir: str = ""
    scorers: list[tuple[str, str]] = field(default_factory=list)
    executor: str = "local"
    budget: float | None = None  # USD for the whole eval (`budget:`, `--budget`)
    stopped: str = ""  # why a "stopped" eval stopped: "budget"
    rescored_from: str = ""  # `awf eval-rescore`: the eval whose runs these rows score
    variants: list[str] = field(default_factory=list)  # those run, the file's order

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["scorers"] = [list(s) for s in self.scorers]
        data["variants"] = list(self.variants)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Manifest:
        """The manifest read back, checked: a folder changed by hand (a wrong type, an
        absurd count) is a `ValueError` naming the field, never a crash or a hang later."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for name in ("eval_id", "workflow", "workflow_path", "created_at"):
            if name not in known:
                raise ValueError(f'"{name}" is missing')
        budget = known.get("budget")
        if budget is not None and (
            isinstance(budget, bool)
            or not isinstance(budget, int | float)
            or not 0 <= budget < float("inf")
        ):
            raise ValueError(f'"budget" must be a number of USD, not {json.dumps(budget)[:40]}')
        for name, value in known.items():
            if name in ("scorers", "budget", "variants"):
                continue
            default = cls.__dataclass_fields__[name].default
            expected = str if isinstance(default, str) or default is MISSING else int
            if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f'"{name}" must be a whole number, not {json.dumps(value)[:40]}')
            if expected is str and not isinstance(value, str):
                raise ValueError(f'"{name}" must be text, not {json.dumps(value)[:40]}')
        for name, low, high in _BOUNDS:
            if name in known and not low <= known[name] <= high:
                raise ValueError(f'"{name}" must be from {low} to {high:,}, not {known[name]:,}')
        scorers = known.get("scorers", [])
        if not isinstance(scorers, list) or not all(
            isinstance(s, list) and len(s) == 2 and all(isinstance(p, str) for p in s)
            for s in scorers
        ):
            raise ValueError('"scorers" must be a list of [name, kind] pairs')
        known["scorers"] = [tuple(s) for s in scorers]
        variants = known.get("variants", [])
        if (
            not isinstance(variants, list)
            or len(variants) > MAX_VARIANTS
            or not all(isinstance(v, str) and VARIANT_NAME.match(v) for v in variants)
            or len(set(variants)) != len(variants)
        ):
            raise ValueError(f'"variants" must be a list of at most {MAX_VARIANTS} variant names')
        known["variants"] = list(variants)
        return cls(**known)

    def shown_status(self) -> str:
        """ "running" whose process is gone (kill -9, a crash) shows as "interrupted"."""
        if self.status != "running":
            return self.status
        if not self.pid:  # it stopped before it ever ran
            return "interrupted"
        from awf_nb.engine.state import process_start_time

        if self.host and self.host != socket.gethostname():
            return self.status
        if self.pid == os.getpid():
            return self.status
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return "interrupted"
        except PermissionError:
            pass
        started = process_start_time(self.pid)
        if self.pid_started and started and started != self.pid_started:
            return "interrupted"
        return self.status


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EvalFolder:
    """One eval's folder (see the module docstring)."""

    def __init__(self, store: Store, eval_id: str) -> None:
        self._lock_fd: int | None = None  # the lock file, open while `lock` holds it
        self.store = store
        self.eval_id = eval_id
        self.path = evals_dir(store) / eval_id
        self._synced_at: dict[str, float] = {}  # file name -> when it was last fsynced
        self._unsynced: set[str] = set()  # files with lines written since their fsync

    # -- creating and opening ----------------------------------------------------------------

    @classmethod
    def create(cls, store: Store) -> EvalFolder:
        """A new folder with a fresh id (`20261122-030501-3fa9c1`, sorting by start)."""
        from awf_nb.engine.state import new_run_id

        root = evals_dir(store)
        store._ensure_dir(root)
        for _ in range(_ID_ATTEMPTS):
            eval_id = new_run_id()
            try:
                (root / eval_id).mkdir(mode=PRIVATE_DIR)
            except FileExistsError:
                continue
            except OSError as exc:
                raise system_error("cannot create", root, exc) from None
            return cls(store, eval_id)
        raise AwfSystemError(f"cannot find a free eval id in {root}")

    @classmethod
    def open(cls, store: Store, eval_id: str) -> EvalFolder:
        """The folder of `eval_id` (an exact id or a unique prefix of one)."""
        ids = list_eval_ids(store)
        if eval_id in ids:
            return cls(store, eval_id)
        matches = [i for i in ids if eval_id and i.startswith(eval_id)]
        if len(matches) == 1:
            return cls(store, matches[0])
        if not matches:
            raise UserError(
                f'eval "{eval_id}" not found in {store.root}',
                hint="`awf evals` lists the evals; --storage or $AWF_STORAGE selects another "
                "storage directory",
            )
        raise UserError(
            f'eval id "{eval_id}" is ambiguous: it starts {len(matches)} eval ids '
            f"({', '.join(matches[:5])})",
            hint="give more characters of the id",
        )

    # -- writing -----------------------------------------------------------------------------

    def write_start(
        self,
        manifest: Manifest,
        resolved: dict[str, Any],
        workflow_text: str,
        cases: list[Case],
        variant_texts: dict[str, str] | None = None,
    ) -> None:
        """The files written once, when the eval starts."""
        atomic_write(self.path / RESOLVED, _json(resolved, indent=2))
        atomic_write(self.path / WORKFLOW, workflow_text.encode())
        if variant_texts:
            try:
                (self.path / VARIANTS).mkdir(mode=PRIVATE_DIR, exist_ok=True)
            except OSError as exc:
                raise system_error("cannot create", self.path / VARIANTS, exc) from None
            for name, text in variant_texts.items():
                atomic_write(self.path / VARIANTS / f"{name}.yaml", text.encode())
        lines = b"".join(_line(_case_record(case)) for case in cases)
        atomic_write(self.path / CASES, lines)
        self.write_manifest(manifest)

    def write_manifest(self, manifest: Manifest) -> None:
        atomic_write(self.path / MANIFEST, _json(manifest.as_dict(), indent=2))

    def lock(self) -> None:
        """Hold the eval's lock (`lock`, an fcntl lock the system drops when the process
        ends) until `finish`: two processes resuming the same eval at once would both run
        every pending run. The second is refused, told who holds it."""
        import fcntl

        path = self.path / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise system_error("cannot create", path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 512).decode(errors="replace").split("\t")
            os.close(fd)
            pid, host, since = [*holder, "?", "?", "?"][:3]
            raise UserError(
                f"eval {self.eval_id} is being run by process {terminal_safe(pid.strip())} "
                f"on {terminal_safe(host.strip())} since {terminal_safe(since.strip())}",
                hint="stop it first, or wait for it to finish",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\t{socket.gethostname()}\t{now_text()}".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        fd = self._lock_fd
        if fd is not None:
            os.close(fd)  # closing drops the flock
            self._lock_fd = None

    def claim(self, manifest: Manifest) -> None:
        """Mark the eval as running in this process (refused if another one runs it)."""
        from awf_nb.engine.state import process_start_time

        self.lock()

        alive = manifest.pid and manifest.pid != os.getpid()
        if alive and manifest.shown_status() == "running":
            self.unlock()
            raise UserError(
                f"eval {self.eval_id} is still running (process {manifest.pid}); "
                "stop it first, or wait for it to finish"
            )
        manifest.status = "running"
        manifest.pid = os.getpid()
        manifest.pid_started = process_start_time(manifest.pid)
        manifest.host = socket.gethostname()
        manifest.finished_at = ""
        self.write_manifest(manifest)

    def finish(self, manifest: Manifest, status: str) -> None:
        self.sync()
        manifest.status = status
        manifest.finished_at = now_text()
        self.write_manifest(manifest)
        self.unlock()

    def sync(self) -> None:
        """Force the result lines written so far onto the disk, if some are not yet."""
        for name in sorted(self._unsynced):
            path = self.path / name
            try:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise system_error("cannot write", path, exc) from None
            self._unsynced.discard(name)
            self._synced_at[name] = time.monotonic()

    def append_run(self, case: str, epoch: int, run_id: str, variant: str = "") -> None:
        """Which run serves a (case, epoch[, variant]): for people and tools (the run is in
        the store either way), so written without an fsync."""
        record: dict[str, Any] = {"case": case, "epoch": epoch, "run_id": run_id}
        if variant:
            record["variant"] = variant
        self._append(RUNS, record, sync=False)

    def append_result(self, row: EvalRow) -> None:
        """A finished run's row, written before this returns (resume relies on it): a
        killed process keeps it; forced onto the disk in groups (see the module doc)."""
        self._append(RESULTS, row.as_dict(), sync=None)

    def append_pairwise(self, outcome: Any) -> None:
        """A judged pair (`pairwise.PairOutcome`), on the disk before this returns."""
        self._append(PAIRWISE, outcome.as_dict())

    def _append(self, name: str, record: dict[str, Any], *, sync: bool | None = True) -> None:
        """Append a line; `sync`: fsync it now (True), not (False), in groups (None: when
        `RESULTS_SYNC_INTERVAL` has passed since the file's last fsync, else by `sync`)."""
        if sync is None:
            last = self._synced_at.get(name)
            sync = last is None or time.monotonic() - last >= RESULTS_SYNC_INTERVAL
            if not sync:
                self._unsynced.add(name)
        path = self.path / name
        data = _line(record)
        try:
            drop_torn_tail(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if sync:
                    os.fsync(fd)
                    self._unsynced.discard(name)
                    self._synced_at[name] = time.monotonic()
            finally:
                os.close(fd)
        except OSError as exc:
            raise system_error("cannot write", path, exc) from None

    # -- reading -----------------------------------------------------------------------------

    def manifest(self) -> Manifest:
        path = self.path / MANIFEST
        try:
            return Manifest.from_dict(json.loads(path.read_bytes()))
        except FileNotFoundError:
            raise UserError(f"eval {self.eval_id}: {path} is missing") from None
        except (OSError, ValueError, TypeError) as exc:
            raise UserError(f"eval {self.eval_id}: cannot read {path}: {exc}") from None

    def resolved(self) -> dict[str, Any]:
        return _read_json(self.path / RESOLVED, self.eval_id)

    def workflow_text(self, variant: str = "") -> str:
        """The workflow text as it was run (of `variant`, in an eval with variants)."""
        name = f"{VARIANTS}/{variant}.yaml" if variant else WORKFLOW
        try:
            return (self.path / name).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"eval {self.eval_id}: cannot read {name}: {exc}") from None

    def cases(self) -> list[Case]:
        """The cases as they were read, checked: each line a case, each id once."""
        path = self.path / CASES
        cases: list[Case] = []
        seen: dict[str, int] = {}
        for number, record in _numbered_records(path):
            try:
                replies = record.get("replies")
                if not isinstance(record["id"], str) or not isinstance(record["row"], dict):
                    raise TypeError("an id (text) and a row (an object) are needed")
                if replies is not None and not (
                    isinstance(replies, list) and all(isinstance(r, str) for r in replies)
                ):
                    raise TypeError('"replies" must be a list of texts')
                line = record.get("line", 0)
                if isinstance(line, bool) or not isinstance(line, int):
                    raise TypeError('"line" must be a whole number')
            except (KeyError, TypeError) as exc:
                raise UserError(f"{path}:{number}: not a case ({_reason(exc)})") from None
            case_id = record["id"]
            if case_id in seen:
                raise UserError(
                    f"{path}:{number}: case {terminal_safe(case_id)!r} is also on line "
                    f"{seen[case_id]}: each case once (the folder was changed by hand?)"
                )
            seen[case_id] = number
            cases.append(Case(case_id, record["row"], tuple(replies) if replies else None, line))
        return cases

    def rows(self) -> list[EvalRow]:
        """The finished rows (the last line per (case, epoch, variant) wins), each checked."""
        path = self.path / RESULTS
        rows: dict[tuple[str, int, str], EvalRow] = {}
        for number, record in _numbered_records(path):
            try:
                row = EvalRow.from_dict(record)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise UserError(f"{path}:{number}: not a result row ({_reason(exc)})") from None
            rows[row.run_key] = row
        return list(rows.values())

    def pairs(self) -> list[Any]:
        """The pairs the pairwise judge decided (`pairwise.PairOutcome`; the last line per
        pair wins), each checked."""
        from awf_nb.evals.pairwise import PairOutcome

        path = self.path / PAIRWISE
        found: dict[tuple[str, int, str, str], PairOutcome] = {}
        for number, record in _numbered_records(path):
            try:
                outcome = PairOutcome.from_dict(record)
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(f"{path}:{number}: not a judged pair ({_reason(exc)})") from None
            found[outcome.key] = outcome
        return list(found.values())

    def runs(self) -> list[dict[str, Any]]:
        return [record for _, record in _numbered_records(self.path / RUNS)]

    def result(self) -> EvalResult:
        manifest = self.manifest()
        return EvalResult(
            eval_id=self.eval_id,
            workflow=manifest.workflow,
            rows=self.rows(),
            scorers=manifest.scorers,
            epochs=manifest.epochs,
            status=manifest.shown_status(),
            total=manifest.total,
            storage=str(self.store.root),
            created_at=manifest.created_at,
            finished_at=manifest.finished_at,
            stopped=manifest.stopped,
            budget=manifest.budget,
            rescored_from=manifest.rescored_from,
            variants=list(manifest.variants),
            pairs=self.pairs(),
        )


def evals_dir(store: Store) -> Path:
    return store.root / EVALS_DIR


def list_eval_ids(store: Store) -> list[str]:
    root = evals_dir(store)
    if not root.is_dir():
        return []
    try:
        return sorted(e.name for e in root.iterdir() if (e / MANIFEST).is_file())
    except OSError as exc:
        raise system_error("cannot list evals in", root, exc) from None


def list_evals(
    store: Store, limit: int | None = None, problems: list[str] | None = None
) -> list[EvalResult]:
    """Past evals, newest first (by when they were created). One that cannot be read (a
    folder changed by hand, a torn disk) is listed all the same, with status "unreadable"
    and nothing else, and what is wrong with it is added to `problems`: one bad eval never
    hides the others."""
    found: list[tuple[str, str, Manifest | UserError]] = []
    for eval_id in list_eval_ids(store):
        try:
            read = EvalFolder(store, eval_id).manifest()
        except UserError as exc:
            # The id starts with when it was made: 20261125-091500-…
            created = f"{eval_id[:4]}-{eval_id[4:6]}-{eval_id[6:8]}T{eval_id[9:11]}:" \
                f"{eval_id[11:13]}:{eval_id[13:15]}"  # fmt: skip
            found.append((created, eval_id, exc))
        else:
            found.append((read.created_at, eval_id, read))
    found.sort(reverse=True)
    results = []
    for _, eval_id, manifest in found[:limit] if limit else found:
        error = manifest if isinstance(manifest, UserError) else None
        if error is None:
            try:
                results.append(EvalFolder(store, eval_id).result())
                continue
            except UserError as exc:
                error = exc
        if problems is not None:
            problems.append(f"eval {eval_id}: {error.message}")
        results.append(
            EvalResult(
                eval_id=eval_id, workflow="?", rows=[], scorers=[], epochs=1,
                status="unreadable", total=0, storage=str(store.root),
            )
        )  # fmt: skip
    return results


def _case_record(case: Case) -> dict[str, Any]:
    return {
        "id": case.id,
        "row": case.row,
        "replies": list(case.replies) if case.replies is not None else None,
        "line": case.line,
    }


def _json(data: Any, indent: int | None = None) -> bytes:
    return json.dumps(data, ensure_ascii=False, indent=indent, default=str).encode()


def _line(record: dict[str, Any]) -> bytes:
    return (
        json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    ).encode()


def _read_json(path: Path, eval_id: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UserError(f"eval {eval_id}: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"eval {eval_id}: {path} is not a JSON object")
    return data


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"{exc.args[0]!r} is missing"
    return terminal_safe(str(exc))[:200]


def _numbered_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The JSON lines of `path` with their line numbers; a torn last line (a killed
    writer) is left out, and a line that is not a JSON object is a `UserError` there."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise system_error("cannot read", path, exc) from None
    records = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise UserError(f"{path}:{number}: not JSON ({_reason(exc)})") from None
        if not isinstance(record, dict):
            raise UserError(f"{path}:{number}: not a JSON object")
        records.append((number, record))
    return records
