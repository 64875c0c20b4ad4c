"""The size limits of the file tools (Read, Glob, Grep) for one step, and how a size is shown.

Their defaults and ranges are the workflow's (`SIZE_LIMITS` of
`awf_nb.workflow.tools_model`); a step's `tools:` block may change each. A message about a
limit names the key that raises it (`tools.max_read_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from awf_nb.workflow.tools_model import SIZE_LIMITS, ToolsConfig

__all__ = ["FileLimits", "format_size"]


@dataclass(frozen=True)
class FileLimits:
    """How much one call of a file tool may read or look at."""

    read_bytes: int = SIZE_LIMITS["max_read_bytes"][0]  # Read: text returned
    read_skip_bytes: int = SIZE_LIMITS["max_read_skip_bytes"][0]  # Read: `offset` reach
    grep_file_bytes: int = SIZE_LIMITS["max_grep_file_bytes"][0]  # Grep: of one file
    grep_bytes: int = SIZE_LIMITS["max_grep_bytes"][0]  # Grep: in all
    walk_entries: int = SIZE_LIMITS["max_walk_entries"][0]  # Glob, Grep: entries looked at

    @classmethod
    def of(cls, config: ToolsConfig) -> FileLimits:
        """The limits a `tools:` block sets."""
        return cls(
            read_bytes=config.max_read_bytes,
            read_skip_bytes=config.max_read_skip_bytes,
            grep_file_bytes=config.max_grep_file_bytes,
            grep_bytes=config.max_grep_bytes,
            walk_entries=config.max_walk_entries,
        )


def format_size(size: int) -> str:
    """`512 bytes`, `64 KiB`, `5 MiB`, `1.5 GiB`: a size as a person reads it."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"
