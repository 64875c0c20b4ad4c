"""The workflow search path (spec §1) and resolving a workflow name to its file."""

from __future__ import annotations

import os
from pathlib import Path

from awf_nb.errors import UserError

WORKFLOW_SUFFIXES = (".yaml", ".yml")


def search_path(cwd: Path | None = None) -> list[Path]:
    """The folders searched for workflow names, in order (spec §1)."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    dirs = [base / entry for entry in os.environ.get("AWF_WORKFLOWS_PATH", "").split(":") if entry]
    dirs += [base / ".awf" / "workflows", base / "workflows"]
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    dirs.append(Path(config_home) / "awf" / "workflows")
    unique: dict[Path, None] = {}
    for directory in dirs:
        unique.setdefault(Path(os.path.normpath(directory)), None)
    return list(unique)


def find_workflow(
    name: str | os.PathLike[str], *, cwd: Path | None = None, relative_to: Path | None = None
) -> Path:
    """Resolve a workflow name to its file: `NAME.yaml`, then `NAME.yml`, in each folder.

    `relative_to` (the calling workflow's folder, for `call_workflow`) is searched first.
    Names that climb out of the search folders (`..`, absolute paths elsewhere) are refused.
    """
    text = os.fspath(name)
    dirs = ([Path(relative_to)] if relative_to is not None else []) + search_path(cwd)
    if not text.strip():
        raise UserError("workflow name is empty")
    if ".." in Path(text).parts:
        raise UserError(f'workflow "{text}": a workflow name must not contain ".."')
    if Path(text).is_absolute():
        return _absolute_in_search_dirs(Path(text), dirs)
    for directory in dirs:
        for candidate in _candidates(directory / text):
            if candidate.is_file():
                return candidate
    searched = ", ".join(_display(d, Path(cwd) if cwd else Path.cwd()) for d in dirs)
    raise UserError(f'workflow "{text}" not found (searched: {searched})')


def _candidates(base: Path) -> list[Path]:
    if base.suffix in WORKFLOW_SUFFIXES:
        return [base]
    return [base.with_name(base.name + suffix) for suffix in WORKFLOW_SUFFIXES]


def _absolute_in_search_dirs(path: Path, dirs: list[Path]) -> Path:
    if not any(candidate.exists() for candidate in _candidates(path)):
        raise UserError(f'workflow file "{path}" does not exist')
    resolved = path.resolve()
    for directory in dirs:
        if resolved.is_relative_to(directory.resolve()):
            for candidate in _candidates(path):
                if candidate.is_file():
                    return candidate
            raise UserError(f'workflow "{path}" not found')
    raise UserError(
        f'workflow "{path}": an absolute path must be inside a workflow folder '
        "(give the file path to `awf`, or put the file on AWF_WORKFLOWS_PATH)"
    )


def _display(path: Path, cwd: Path) -> str:
    try:
        return os.fspath(path.relative_to(cwd))
    except ValueError:
        return os.fspath(path)
