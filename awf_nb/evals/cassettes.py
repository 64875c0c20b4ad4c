"""An eval's cassettes: one file per run in a folder, recorded or replayed.

`record` writes `DIR/<case>-<epoch>.cassette.jsonl` per run (in an eval with variants,
`DIR/<variant>/<case>-<epoch>.cassette.jsonl`; the pairwise judge's under
`DIR/pairwise/<variant>/`), `replay` serves each run from its own and needs every one of
them before anything starts (a missing one is an error naming the case),
`record-missing` replays those that exist and records the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.errors import UserError
from awf_nb.evals.run_setup import CassetteUse

if TYPE_CHECKING:
    from awf_nb.evals.datasets import Case
    from awf_nb.evals.storage import Manifest

CassetteMode = Literal["record", "replay", "record-missing"]
CASSETTE_SUFFIX = ".cassette.jsonl"


def cassette_path(folder: Path, case: Case, epoch: int, variant: str = "") -> Path:
    name = f"{case.file_stem}-{epoch}{CASSETTE_SUFFIX}"
    return folder / variant / name if variant else folder / name


def cassette_use(manifest: Manifest, case: Case, epoch: int, variant: str) -> CassetteUse | None:
    """The cassette of one run (of `variant`): recorded, or replayed (`record-missing`:
    replayed when it exists)."""
    mode, folder = manifest.cassette_mode, manifest.cassette_dir
    if not mode:
        return None
    path = cassette_path(Path(folder), case, epoch, variant)
    if mode == "record":
        return CassetteUse("record", path)
    if mode == "replay" or path.is_file():
        return CassetteUse("replay", path)
    return CassetteUse("record", path)


def check_cassettes(manifest: Manifest, pending: Iterable[tuple[Case, int, str]]) -> None:
    """Before anything runs: every cassette a replay needs exists, the folder a
    recording writes to can be made."""
    mode, folder = manifest.cassette_mode, Path(manifest.cassette_dir or ".")
    if not mode:
        return
    if mode == "replay":
        first: tuple[Case, int, str] | None = None
        missing = 0
        for case, epoch, variant in pending:
            if not cassette_path(folder, case, epoch, variant).is_file():
                first = first or (case, epoch, variant)
                missing += 1
        if first is not None:
            case, epoch, variant = first
            more = f" (and {missing - 1} more)" if missing > 1 else ""
            of = f" of variant {variant}" if variant else ""
            raise UserError(
                f'no cassette for case "{case.id}" epoch {epoch}{of}: '
                f"{cassette_path(folder, case, epoch, variant)} is missing{more}",
                hint=f"record them with --record-missing {folder}",
            )
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for variant in manifest.variants:
            (folder / variant).mkdir(exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot create the cassette folder {folder}: {exc.strerror or exc}"
        ) from None


def cassette_options(
    record: str | os.PathLike[str] | None,
    replay: str | os.PathLike[str] | None,
    record_missing: str | os.PathLike[str] | None,
) -> tuple[CassetteMode | None, Path | None]:
    """The cassette mode and folder `--record` / `--replay` / `--record-missing` ask for."""
    asked: tuple[tuple[CassetteMode, str | os.PathLike[str] | None], ...] = (
        ("record", record),
        ("replay", replay),
        ("record-missing", record_missing),
    )
    given: Sequence[tuple[CassetteMode, Any]] = [
        (mode, value) for mode, value in asked if value is not None
    ]
    if len(given) > 1:
        raise UserError("--record, --replay and --record-missing exclude each other: choose one")
    if not given:
        return None, None
    mode, value = given[0]
    return mode, Path(value).expanduser()
