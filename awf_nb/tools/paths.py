"""The working directory a step's file tools (Read, Write, Edit, Glob, Grep) are confined to.

Every path a model gives is resolved (`..` collapsed, symlinks followed) and must then lie
inside the working directory: `../x`, an absolute path elsewhere and a symlink pointing out
are all refused. That check looks at the path *before* it is used; a file swapped for a
symlink in between (by a command running at the same time) would slip through. So files
are opened first and the file *opened* is checked (`open_inside`: its real path, read back
from the descriptor), and a file is written through a descriptor of its folder that is
checked the same way (`open_folder`): what was opened or written is inside, whatever the
path names by then.

Bash (and command tools) are not confined: a shell command can reach whatever the user
running awf can. See docs/tools.md.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from awf_nb.tools.output import ToolError
from awf_nb.workflow.files import fd_path


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

    def open_inside(self, path: Path | str, flags: int, *, dir_fd: int | None = None) -> int:
        """`os.open(path, flags)`, refused (`ToolError`, descriptor closed) when the file
        it opened is not inside the workspace — a symlink swapped in after `real` checked
        the path. `OSError` as `os.open` raises it."""
        fd = os.open(path, flags | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            opened = fd_path(fd)
            if opened is not None and not self.contains(opened):
                raise ToolError(
                    f"{self.show(path)} changed while it was opened: it now leads outside "
                    f"the working directory {self.root}, and was not used"
                )
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_folder(self, path: Path | str) -> int:
        """A descriptor of the folder `path` (inside the workspace, checked as opened)."""
        return self.open_inside(path, os.O_RDONLY | os.O_DIRECTORY)


def is_regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)
