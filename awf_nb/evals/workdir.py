"""The working directory a Ray eval sends its workers: packed on the driver, unpacked
privately on each worker, removed after the eval.

`pack` zips the driver's working directory (the workflow's files and whatever its commands
read) into memory, leaving out folders no run needs (`.git`, `.venv`, the run store, …)
and files whose names look secret (`SECRET_FILE_PATTERNS`: `.env*`, `*.pem`, `*.key`,
`secrets/`, `id_rsa*`, …) unless they are listed in `AWF_RAY_FILES` (paths relative to the
working directory, separated by `:` or `,`). Symbolic links are left out: one could point
at any file of the driver's machine. The zip is bounded by `MAX_WORKDIR_BYTES`.

`relocate` / `relocated` move a path (a workflow's file and folder) from under the driver's
working directory to the same place under the worker's.

`unpack` writes it under a worker's own folder (made 0700 by `tempfile.mkdtemp`), files
0600 (0700 when executable on the driver). The folder is named after the worker's process
(`awf-ray-worker-PID-…`), so `sweep` can remove those a killed worker left behind.
"""

from __future__ import annotations

import fnmatch
import io
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from awf_nb.errors import UserError

if TYPE_CHECKING:
    from awf_nb.workflow.model import Workflow

# Ray's own limit on a job's working directory; a larger one is an error naming it.
MAX_WORKDIR_BYTES = 500 * 1024 * 1024
# Folders never sent (by name, at any depth).
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "__pycache__", "node_modules"})
# Names (of a file, or of a folder at any depth) that look like they hold secrets.
SECRET_FILE_PATTERNS = (
    ".env", ".env.*", "*.env", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks",
    "*.keystore", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", ".pgpass",
    ".npmrc", ".pypirc", ".git-credentials", "credentials", "credentials.*", "secrets",
    "secret", ".secrets", "*.secret", "*.secrets", ".aws", ".ssh", ".gnupg", ".docker",
)  # fmt: skip
LISTED_VARIABLE = "AWF_RAY_FILES"
WORKER_PREFIX = "awf-ray-worker-"


def looks_secret(name: str) -> bool:
    """Whether a file or folder called `name` looks like it holds secrets."""
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_FILE_PATTERNS)


def listed_files(env: dict[str, str] | os._Environ[str]) -> set[str]:
    """The relative paths `AWF_RAY_FILES` lists (sent though their names look secret)."""
    raw = env.get(LISTED_VARIABLE, "")
    parts = (part.strip() for chunk in raw.split(":") for part in chunk.split(","))
    return {PurePosixPath(part).as_posix().removeprefix("./") for part in parts if part}


def pack(root: Path, skipped: Iterable[Path] = (), listed: Iterable[str] = ()) -> bytes:
    """The working directory `root` as zip bytes (see the module docstring); `skipped`
    are folders left out (the run store), `listed` relative paths sent all the same."""
    listed = set(listed)
    skip = {Path(path).resolve() for path in skipped}
    buffer = io.BytesIO()
    total = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder, dirs, files in os.walk(root):
            here = Path(folder)
            relative = here.relative_to(root)
            dirs[:] = sorted(
                name
                for name in dirs
                if name not in SKIPPED_DIRS
                and (here / name).resolve() not in skip
                and not (here / name).is_symlink()
                and _sent((relative / name).as_posix(), listed, folder=True)
            )
            for name in sorted(files):
                path = here / name
                rel = (relative / name).as_posix()
                if path.is_symlink() or not _sent(rel, listed, folder=False):
                    continue
                try:
                    info = path.stat()
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue
                total += info.st_size
                if total > MAX_WORKDIR_BYTES:
                    raise UserError(
                        f"the working directory {root} holds more than "
                        f"{MAX_WORKDIR_BYTES // (1024 * 1024)} MiB to send to the Ray workers",
                        hint="run awf eval from a folder with only what the workflow needs",
                    )
                entry = zipfile.ZipInfo.from_file(path, rel)
                entry.compress_type = zipfile.ZIP_DEFLATED
                with path.open("rb") as source, archive.open(entry, "w") as target:
                    shutil.copyfileobj(source, target)
    return buffer.getvalue()


def _sent(rel: str, listed: set[str], *, folder: bool) -> bool:
    """Whether the file (or folder) at `rel` travels: no part of its path looks secret,
    or it is listed (or inside a listed folder); a secret-looking folder is walked only
    for what is listed under it."""
    if not any(looks_secret(part) for part in rel.split("/")):
        return True
    if rel in listed or any(rel.startswith(path + "/") for path in listed):
        return True
    return folder and any(path.startswith(rel + "/") for path in listed)


def unpack(data: bytes, target: Path) -> None:
    """Write the zip `data` under `target`: files 0600, or 0700 when executable."""
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for entry in archive.infolist():
            rel = PurePosixPath(entry.filename)
            if rel.is_absolute() or ".." in rel.parts or entry.is_dir():
                continue
            path = target.joinpath(*rel.parts)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            executable = (entry.external_attr >> 16) & 0o100
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700 if executable else 0o600
            )
            with os.fdopen(fd, "wb") as out, archive.open(entry) as source:
                shutil.copyfileobj(source, out)


def worker_folder() -> Path:
    """A new private folder for this worker process (its name holds the process id)."""
    return Path(tempfile.mkdtemp(prefix=f"{WORKER_PREFIX}{os.getpid()}-"))


def sweep() -> list[Path]:
    """Remove the folders of this user's workers whose process is gone (a killed worker
    cannot remove its own); the folders removed."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{WORKER_PREFIX}*-*"):
        pid = path.name.removeprefix(WORKER_PREFIX).split("-", 1)[0]
        try:
            if not pid.isdigit() or path.stat().st_uid != os.getuid() or _alive(int(pid)):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def relocate(path: Path | None, old: Path, new: Path) -> Path | None:
    """`path` under the driver's working directory `old`, as the same file under the
    worker's `new`; a path elsewhere stays as it is (shared file systems)."""
    if path is None:
        return None
    try:
        return new / Path(path).relative_to(old)
    except ValueError:
        return path


def relocated(workflow: Workflow, old: Path, new: Path) -> Workflow:
    """`workflow` with its file and folder moved from the driver's `old` to `new`."""
    update = {"source_path": relocate(workflow.source_path, old, new),
              "source_dir": relocate(workflow.source_dir, old, new)}  # fmt: skip
    return workflow.model_copy(update=update)
