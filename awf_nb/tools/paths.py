"""The working directory a step's built-in tools are confined to.

Every path a model gives is resolved (`..` collapsed, symlinks followed) and must then lie
inside the working directory: `../x`, an absolute path elsewhere and a symlink pointing out
are all refused. A file swapped for a symlink between the check and its use is not caught;
run awf in a sandbox (a container) when the workspace itself cannot be trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

from awf_nb.tools.output import ToolError


class Workspace:
    """A working directory, and the resolution of paths against it."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        self._root = str(self.root)
        self._inside = os.path.join(self._root, "")  # the prefix of every path inside

    def resolve(self, raw: object, *, what: str = "path") -> Path:
        """The real path `raw` names, if it is inside the workspace; else `ToolError`."""
        return Path(self.real(raw, what=what))

    def real(self, raw: object, *, what: str = "path") -> str:
        """`resolve` as a string: for a path only handed to the OS (a `Path` costs a few
        microseconds to make and to turn back, on every Read)."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError(f"{what} must be a non-empty string")
        if "\0" in raw:
            raise ToolError(f"{what} must not contain a NUL character")
        # No `~` expansion: a home folder is outside the workspace anyway. `os.path`, not
        # `pathlib`: every tool call resolves its paths, and this costs a third. A symlink
        # loop stays unresolved here and fails where the file is used.
        try:
            real = os.path.realpath(os.path.join(self._root, raw))
        except OSError as exc:
            raise ToolError(f"{what} {raw}: cannot be resolved: {exc}") from None
        if not self.contains(real):
            raise ToolError(
                f"{what} {raw} is outside the working directory {self.root}: "
                "only paths inside it can be used"
            )
        return real

    def contains(self, path: Path | str) -> bool:
        """Whether an already resolved `path` is the workspace or inside it."""
        path = os.fspath(path)
        return path == self._root or path.startswith(self._inside)

    def show(self, path: Path | str) -> str:
        """`path` as the model should write it: relative to the workspace."""
        try:
            relative = Path(path).relative_to(self.root)
        except ValueError:
            return str(path)
        return os.fspath(relative) if relative.parts else "."
