"""Running a shell command for a tool call (the Bash built-in and command tools).

The command runs through the project's one process supervisor (`engine.process`): in its
own process group, stopped as a whole on timeout and when the call is cancelled, and (as a
contained group) nothing it started outlives the call — background jobs, `nohup` and
`setsid` ones included (see `ProcessGroup.start`). Its
output is collected up to a hard limit — past it the command is stopped, so `yes` cannot
fill the memory — then masked and capped to what a model can use (`tools.output`).
A failing command is a result with `is_error=True`, never an exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from awf_nb.engine.ports import ToolResult
from awf_nb.engine.process import ProcessResult, run_process
from awf_nb.engine.summary import format_limit
from awf_nb.engine.tool_slots import tool_process_slot
from awf_nb.secrets import Masker
from awf_nb.tools.output import MAX_OUTPUT_CHARS, finish

# Output kept in memory before the command is stopped (characters, stdout and stderr).
HARD_OUTPUT_LIMIT = 8 * 1024 * 1024


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    masker: Masker,
    limit: int = MAX_OUTPUT_CHARS,
    hard_limit: int = HARD_OUTPUT_LIMIT,
    contain: bool = True,
) -> ToolResult:
    """Run `argv` to its end (or timeout, or the hard output limit) as a tool result.

    The text is stdout then stderr; a non-zero exit, a timeout or a stop for too much
    output add a last line saying so and make the result an error.
    """
    out: list[str] = []
    err: list[str] = []
    size = 0
    overflowed = False
    runner: asyncio.Task[ProcessResult] | None = None

    def collect(sink: list[str]) -> Callable[[str], None]:
        def on_chunk(text: str) -> None:
            nonlocal size, overflowed
            if overflowed:
                return
            sink.append(text)
            size += len(text)
            if size > hard_limit and runner is not None and not runner.done():
                overflowed = True
                runner.cancel()  # run_process stops the process group on cancellation

        return on_chunk

    # Within an eval's bound on tool processes at once; waiting for a slot is not part of
    # the call's own timeout (engine/tool_slots.py).
    async with tool_process_slot():
        runner = asyncio.create_task(
            run_process(
                argv,
                cwd=cwd,
                env=env,
                timeout=timeout,
                on_stdout=collect(out),
                on_stderr=collect(err),
                contain=contain,
            )
        )
        try:
            result: ProcessResult | None = await runner
        except asyncio.CancelledError:
            current = asyncio.current_task()
            # Our own stop for too much output is not a cancellation of the call.
            if not overflowed or (current is not None and current.cancelling()):
                raise
            result = None
        except OSError as exc:
            return ToolResult(f"cannot start the command: {exc}", is_error=True)
    stdout, stderr = "".join(out), "".join(err)
    text = stdout
    if stderr:
        text += ("" if not text or text.endswith("\n") else "\n") + stderr
    text = finish(text, masker, cut=overflowed, limit=limit)
    if result is None:
        return ToolResult(
            _with_note(text, f"[output exceeded {hard_limit} characters: the command was stopped]"),
            is_error=True,
        )
    if result.timed_out:
        return ToolResult(
            _with_note(text, f"[timed out after {format_limit(timeout)}]"), is_error=True
        )
    if result.exit_code != 0:
        return ToolResult(_with_note(text, f"[exit code {result.exit_code}]"), is_error=True)
    return ToolResult(text if text else "(no output)")


def _with_note(text: str, note: str) -> str:
    if not text:
        return note
    return text + ("" if text.endswith("\n") else "\n") + note
