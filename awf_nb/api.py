"""The Python API: `load`, `arun`, `run`, `RunResult`, `SimulatedUser`.

    result = awf_nb.run("workflows/code-review.yaml", inputs={"target": "src"})
    result = await awf_nb.arun(yaml_text, replies=["yes", ""])
    result = awf_nb.run("chat.yaml", record="chat.cassette.jsonl")   # then replay="…"

A thin layer over the run set-up (`awf_nb.runs`): it picks where the run is shown
(`show=`), then prepares and runs it like every other entry point.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from awf_nb.engine.partner import SimulatedUser
from awf_nb.errors import AwfError
from awf_nb.frontends.connect import FrontendChoice, Show, pick_frontend
from awf_nb.runs import setup
from awf_nb.runs.options import RunOptions
from awf_nb.runs.results import RunResult
from awf_nb.runs.setup import load
from awf_nb.workflow.model import Workflow

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from awf_nb.runs.options import RunKeywords

__all__ = ["RunResult", "SimulatedUser", "afork", "arun", "fork", "load", "run"]


async def arun(
    workflow: str | os.PathLike[str] | Workflow,
    inputs: Mapping[str, Any] | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Run a workflow on the running event loop and return its result.

    `show` picks how the run is shown (`frontends.connect.pick_frontend`): "auto" (the
    default) shows it where someone can see it — the live panel in a notebook, streamed
    replies and progress in a terminal — and nothing in a script whose output is not a
    terminal; True always shows it, False never. A `sink` of your own replaces all that.

    The other keywords are those of `awf_nb.runs.RunOptions`, among them:
    `replies` answers conversation turns in order (then end of input). In a terminal where
    a person types (stdin and stderr are terminals, and `show` is not False), a
    conversation asks at a `> ` prompt; otherwise, without `replies` or `reader`, it ends
    after its first reply. (To chat in a notebook, use the `%%awf` magic.)
    `user=awf_nb.SimulatedUser(persona=..., provider="local", max_turns=5)` lets an agent
    play the person in every conversation, for testing a conversational workflow.
    Runs are stored (state file, transcript, history) unless `storage=False`.

    `record=PATH` writes every provider turn and person message to a cassette (secrets
    masked); `replay=PATH` runs again from one without calling any provider, answering the
    conversation with the recorded messages first; `record_missing=PATH` does the one or
    the other, depending on whether PATH exists. `replay_speed` multiplies the recorded
    delays: 0 (the default) replays at once, 1 at the original pace.
    `yes=True` runs tool calls listed in a step's `tools.confirm` without asking (a run
    with nobody to ask refuses them otherwise). `limits={"max_tokens": 20000}` adds limits
    on top of the workflow's own. `model="ollama:llama3.2"` runs every `provider: local`
    step on that model instead of the bundled one (default: $AWF_MODEL; the forms are in
    docs/providers.md).

    The `AWF_LOG` environment variable (debug, info, warning, error) shows awf's log
    messages on stderr.
    """
    from awf_nb import logs

    logs.configure_from_env()
    given = RunOptions(inputs=inputs or {}, **options)
    frontend = given.frontend
    if given.sink is None and frontend is None:
        frontend = FrontendChoice(pick_frontend(show))
        # The person types at a `> ` prompt only in a terminal they type into.
        types = frontend.kind == "terminal" and _isatty(sys.stdin)
        given = dataclasses.replace(
            given, frontend=frontend, interactive=given.interactive and types
        )
    prepared = setup.prepare_run(workflow, given)
    view = prepared.frontend.view
    if isinstance(frontend, FrontendChoice) and frontend.kind == "notebook":
        from awf_nb.frontends.notebook.panel import display_panel

        display_panel(view)
        view.attach(
            stop=prepared.runner.interrupt_turn,
            cancel=prepared.runner.cancel,
            loop=asyncio.get_running_loop(),
        )
    return await prepared.execute()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def run(
    workflow: str | os.PathLike[str] | Workflow,
    inputs: Mapping[str, Any] | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Synchronous `arun`. Inside a running event loop (a notebook), use `await arun(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(workflow, inputs, show=show, **options))
    raise AwfError(
        "awf_nb.run() cannot be used inside a running event loop",
        hint="use `await awf_nb.arun(...)` instead (or the %%awf magic in a notebook)",
    )


async def afork(
    run_id: str,
    at: str,
    edit: str | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Branch from here: a new run with `run_id`'s history up to step `at` (`"STEP"` or,
    in a conversation, `"STEP#TURN"`: its TURN-th message), that message replaced by `edit`
    when given; then it goes on, as `arun` does (same keywords). The original run is not
    changed; the new one records `forked_from`."""
    from awf_nb.runs.fork import fork_run
    from awf_nb.runs.options import Resume
    from awf_nb.store import Store

    storage = options.get("storage")
    store = (
        storage
        if isinstance(storage, Store)
        else Store(None if storage in (None, True) else storage)
    )
    new_id, point = fork_run(store, run_id, at, edit, env=options.get("env"))
    options["storage"] = store
    return await arun(Resume(new_id, from_step=point.resume_step), show=show, **options)  # type: ignore[arg-type]


def fork(
    run_id: str,
    at: str,
    edit: str | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Synchronous `afork`. Inside a running event loop (a notebook), use `await afork(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(afork(run_id, at, edit, show=show, **options))
    raise AwfError(
        "awf_nb.fork() cannot be used inside a running event loop",
        hint="use `await awf_nb.afork(...)` instead (or %awf fork in a notebook)",
    )
