"""A `local` turn run in the test's own process: the model process's generation code
(`local_model.run_turn`, as its worker calls it) without the process around it, so a test
can watch or fake what happens inside (the prompt rendered, a fake llama)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from awf_nb.engine.ports import TurnRequest
from awf_nb.providers import local, local_model
from awf_nb.providers.history import build_messages


async def in_process(turn: TurnRequest, model_path: Path | None = None) -> AsyncIterator[Any]:
    """The events the model process would send for `turn` (in a worker thread, as there)."""
    options = local.parse_options(turn.options)
    path = model_path or local.resolve_model_path(options.model, Path(turn.working_dir))
    job = local_model.Job(
        build_messages(turn),
        options.for_turn(),
        path,
        list(turn.tools),
        output_format=turn.output_format,
    )
    events: list[Any] = []
    await asyncio.to_thread(local_model.run_turn, job, events.append, threading.Event())
    for event in events:
        if not isinstance(event, local_model.Generating):
            yield event
