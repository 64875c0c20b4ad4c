"""OpenTelemetry GenAI traces of runs: live over OTLP/HTTP, and offline in a file next to
the run's transcript (docs/observability.md).

`Tracing` is what `prepare_run` asks for (`RunOptions.trace_*`); `Tracer` is the event
sink it puts in front of the frontend's: every (masked) event goes to the `SpanBuilder`,
each ended span to the run's trace file and, when an endpoint is set, to the collector.
Without an endpoint nothing beyond the file is done (no OpenTelemetry import).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awf_nb.engine import events as ev
from awf_nb.engine.ports import EventSink
from awf_nb.engine.state import RunState
from awf_nb.traces.otlp_json import TRACE_FILE, TraceFile
from awf_nb.traces.spans import SEMCONV_VERSION, Span, SpanBuilder

log = logging.getLogger("awf_nb.traces")

__all__ = ["SEMCONV_VERSION", "TRACE_FILE", "TraceCost", "Tracer", "Tracing", "file_enabled"]

FILE_VARIABLE = "AWF_TRACE_FILE"  # "0" / "false" / "no" / "off": no trace file


def file_enabled(given: bool | None, env: Mapping[str, str]) -> bool:
    """Whether runs write their trace file: `given` (`--no-trace-file`), else
    $AWF_TRACE_FILE, else yes."""
    if given is not None:
        return given
    return env.get(FILE_VARIABLE, "").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class TraceCost:
    """How a run is priced, for its spans' `awf.usage.cost_usd` (an eval's `pricing:`):
    `turn(step, input_tokens, output_tokens)` is the USD of one model turn of `step`,
    `run(state)` the run's whole USD, as the eval's table shows it; None: no price."""

    turn: Callable[[str, int, int], float | None]
    run: Callable[[RunState], float | None]


@dataclass(frozen=True)
class Tracing:
    """What a run's traces are: `url` (live OTLP/HTTP traces URL, None: not live),
    `headers`, `content` (message contents on spans), `folder` (the run's store folder, from
    its id; None: no trace file), `tags` (attributes of the run span), `cost` (how the run
    is priced; None: only what providers report is on the spans)."""

    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bool = False
    folder: Callable[[str], Path] | None = None
    tags: Mapping[str, Any] = field(default_factory=dict)
    cost: TraceCost | None = None


class Tracer:
    """An `EventSink` that records the run's spans, then passes each event on to `inner`."""

    def __init__(self, inner: EventSink | None, tracing: Tracing) -> None:
        self._inner = inner
        self._folder = tracing.folder
        self._file: TraceFile | None = None
        self._live = None
        if tracing.url is not None:
            from awf_nb.traces.live import LiveExport

            self._live = LiveExport(tracing.url, tracing.headers)
        self._cost = tracing.cost
        self.builder = SpanBuilder(
            self._ended,
            content=tracing.content,
            tags=dict(tracing.tags),
            price=tracing.cost.turn if tracing.cost is not None else None,
        )
        # The run's state, to price the whole run when it ends (`follow`).
        self._state: Callable[[], RunState] | None = None
        self._closer: threading.Thread | None = None
        self._failed = False

    def follow(self, state: Callable[[], RunState]) -> None:
        """Price the run from `state()` when it ends (given once its runner exists)."""
        self._state = state

    def _ended(self, span: Span) -> None:
        if self._file is not None:
            self._file.add(span)
        if self._live is not None:
            self._live.add(span)

    def emit(self, event: ev.RunEvent) -> None:
        try:
            # Exact types, not isinstance: most events (streamed text) only pass by.
            if type(event) is ev.RunStarted and self._folder and self._file is None:
                self._file = TraceFile(self._folder(event.run_id) / TRACE_FILE)
            if type(event) is ev.RunFinished and self._cost and self._state is not None:
                self.builder.run_cost = self._cost.run(self._state())
            self.builder.emit(event)
            if type(event) is ev.RunFinished:
                self._run_ended()
        except Exception as exc:  # tracing never ends a run
            if not self._failed:
                self._failed = True
                log.warning("the run's trace is incomplete: %s: %s", type(exc).__name__, exc)
        if self._inner is not None:
            self._inner.emit(event)

    def _run_ended(self) -> None:
        if self._file is not None:
            self._file.flush()
        if self._live is not None and self._closer is None:
            # The last spans are sent from a thread: the run's loop is never held up.
            self._closer = threading.Thread(
                target=self._close_live, name="awf-otlp-close", daemon=False
            )
            self._closer.start()

    def _close_live(self) -> None:
        live = self._live
        if live is None:
            return
        dropped = live.close()
        if dropped:
            where = f"; the trace is kept in {self._file.path}" if self._file is not None else ""
            log.warning(
                "run %s: %d of %d trace spans did not reach the OTLP collector at %s%s",
                self.builder.run_id or "?", dropped, live.submitted, live.url, where,
            )  # fmt: skip

    def wait(self, timeout: float | None = None) -> None:
        """Wait (blocking) until the last spans are sent or given up on."""
        if self._closer is not None:
            self._closer.join(timeout)
