"""Live export of a run's spans over OTLP/HTTP with the OpenTelemetry SDK (the optional
`otel` extra): `pip install 'awf-nb[otel]'`.

A slow or dead collector never slows or fails a run: spans go into the SDK's
`BatchSpanProcessor` (a bounded queue of `MAX_QUEUE` spans, exported from its own thread,
each export given `EXPORT_TIMEOUT` seconds); what did not reach the collector is counted
and said once, in one line, when the run ends (`LiveExport.close`).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from awf_nb._version import __version__
from awf_nb.errors import UserError
from awf_nb.traces.spans import CLIENT, SCHEMA_URL, STATUS_ERROR, STATUS_OK, Span

log = logging.getLogger(__name__)

MAX_QUEUE = 2048  # spans waiting to be sent; more are dropped (and counted)
BATCH_SIZE = 512
EXPORT_TIMEOUT = 5.0  # seconds per export request (the SDK retries within it)
CLOSE_TIMEOUT = 2.0  # seconds the end of a run waits for the last spans to be sent
# The SDK's own loggers: their messages about a dead collector are said once, by us.
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk._shared_internal",
)
TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of `endpoint` (a collector's base URL, or the full URL)."""
    endpoint = endpoint.strip()
    if not endpoint.startswith(("http://", "https://")):
        raise UserError(
            f"the OTLP endpoint {endpoint!r} is not an http:// or https:// URL "
            "(e.g. http://127.0.0.1:4318)"
        )
    return (
        endpoint
        if endpoint.rstrip("/").endswith(TRACES_PATH)
        else endpoint.rstrip("/") + TRACES_PATH
    )


def endpoint_from(given: str | None, env: Mapping[str, str]) -> str | None:
    """The traces URL a run exports to: `given` (`--otlp`), else $AWF_OTLP_ENDPOINT, else
    the standard $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
    $OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); None: no live export."""
    for value, full in (
        (given, False),
        (env.get("AWF_OTLP_ENDPOINT"), False),
        (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), True),
        (env.get("OTEL_EXPORTER_OTLP_ENDPOINT"), False),
    ):
        if value and value.strip():
            return value.strip() if full else traces_url(value)
    return None


def headers_from(env: Mapping[str, str]) -> dict[str, str]:
    """$OTEL_EXPORTER_OTLP_TRACES_HEADERS / $OTEL_EXPORTER_OTLP_HEADERS (`k=v,k2=v2`)."""
    from urllib.parse import unquote

    text = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    headers: dict[str, str] = {}
    for item in (text or "").split(","):
        name, eq, value = item.partition("=")
        if eq and name.strip():
            headers[unquote(name.strip())] = unquote(value.strip())
    return headers


def _sdk() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise UserError(
            "exporting traces to a collector needs the OpenTelemetry SDK: "
            "pip install 'awf-nb[otel]' (or drop --otlp / AWF_OTLP_ENDPOINT)"
        ) from None
    return OTLPSpanExporter, BatchSpanProcessor


class _Converter:
    """Makes the SDK's `ReadableSpan` of a `Span`, ids kept. What every span shares (the
    resource, the scope, the SDK's classes, the kinds and status codes) is made once."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        class _Resource(Resource):
            """The SDK's encoder groups spans by resource, hashing it once a span; the
            resource never changes, so its hash (JSON of its attributes) is made once."""

            _hash: int

            def __hash__(self) -> int:
                return self._hash

        # Resource.create reads the environment and runs the resource detectors.
        created = Resource.create({"service.name": "awf-nb"})
        self.resource = _Resource(created.attributes, created.schema_url)
        self.resource._hash = Resource.__hash__(created)
        self.scope = InstrumentationScope("awf_nb", __version__, SCHEMA_URL)
        self.event, self.readable, self.context = Event, ReadableSpan, SpanContext
        self.sampled = TraceFlags(TraceFlags.SAMPLED)
        self.kinds = {CLIENT: SpanKind.CLIENT}
        self.internal = SpanKind.INTERNAL
        self.status_class, self.error = Status, StatusCode.ERROR
        self.statuses = {STATUS_OK: Status(StatusCode.OK), None: Status(StatusCode.UNSET)}

    def __call__(self, s: Span) -> Any:
        trace_id = int(s.trace_id, 16)
        sampled = self.sampled
        parent = (
            self.context(trace_id, int(s.parent_id, 16), False, sampled) if s.parent_id else None
        )
        if s.status == STATUS_ERROR:
            status = self.status_class(self.error, s.status_message)
        else:
            status = self.statuses.get(s.status) or self.statuses[None]
        return self.readable(
            name=s.name,
            context=self.context(trace_id, int(s.span_id, 16), False, sampled),
            parent=parent,
            resource=self.resource,
            attributes=s.attributes,
            events=[self.event(n, a, t) for n, t, a in s.events] if s.events else (),
            kind=self.kinds.get(s.kind, self.internal),
            status=status,
            start_time=s.start_ns,
            end_time=s.end_ns,
            instrumentation_scope=self.scope,
        )


_CONVERTER: _Converter | None = None


def _readable(span: Span) -> Any:
    global _CONVERTER
    if _CONVERTER is None:
        _CONVERTER = _Converter()
    return _CONVERTER(span)


def readable(spans: Iterable[Span]) -> list[Any]:
    """`spans` as the SDK's `ReadableSpan`s, ids kept."""
    return [_readable(s) for s in spans]


class _Shared:
    """One endpoint's exporter and `BatchSpanProcessor`, shared by every run of the process
    that exports there (set up once: its export thread, its connection). It counts, per
    run (per trace id), the spans the collector took and the spans it was given."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        exporter_class, processor_class = _sdk()
        for name in _SDK_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.url = url
        self.pid = os.getpid()
        self._exporter = exporter_class(endpoint=url, headers=dict(headers), timeout=EXPORT_TIMEOUT)
        # This object is the processor's exporter (export, shutdown, force_flush). Queued
        # spans are sent at the SDK's default interval (5 s, $OTEL_BSP_SCHEDULE_DELAY) and
        # at each run's end: each request costs the export thread ~2 ms of CPU whatever it
        # carries, so sending more often costs a conversation's turns more than its spans.
        self.processor = processor_class(
            self,
            max_queue_size=MAX_QUEUE,
            max_export_batch_size=BATCH_SIZE,
            export_timeout_millis=EXPORT_TIMEOUT * 1000,
        )
        self.changed = threading.Condition()
        self.runs: dict[int, LiveExport] = {}  # by trace id: the runs not yet ended
        self.failing = False  # the last export did not reach the collector
        self.submitted = 0  # spans given to the processor, by every run
        self.done = 0  # spans the export thread tried to send
        self._flush = threading.Event()
        self._closed = False
        self._stopped = False
        # A run's end asks for what is queued to be sent now (`flush`), from this thread:
        # the SDK's force_flush has no bound of its own, a run's end must have one.
        threading.Thread(target=self._flusher, name="awf-otlp-flush", daemon=True).start()

    # The exporter side, called on the processor's threads.
    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self._exporter.export(spans)
        except Exception:  # a broken collector is the run's last concern
            result = SpanExportResult.FAILURE
        ok = result == SpanExportResult.SUCCESS
        with self.changed:
            self.failing = not ok
            self.done += len(spans)
            for span in spans:
                run = self.runs.get(span.context.trace_id)
                if run is not None:
                    run.done += 1
                    run.sent += ok
            self.changed.notify_all()
        return result

    def shutdown(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def flush(self) -> None:
        """Send what is queued now, off the caller's thread."""
        self._flush.set()

    def _flusher(self) -> None:
        while not self._closed:
            self._flush.wait()
            self._flush.clear()
            if not self._closed:
                self.processor.force_flush()

    def close(self) -> None:
        """Send what is left (waiting at most `CLOSE_TIMEOUT`), then stop: at the process's
        exit."""
        with self.changed:
            if self.done < self.submitted and not self.failing:
                self.flush()
                self.changed.wait_for(
                    lambda: self.done >= self.submitted or self.failing, CLOSE_TIMEOUT
                )
        self._closed = True
        self._flush.set()
        # The exporter first: its shutdown cuts short the retries of an export in flight,
        # so the processor's own shutdown (which exports what is left) returns at once.
        self.shutdown()
        self.processor.shutdown()


_SHARED: dict[tuple[str, tuple[tuple[str, str], ...]], _Shared] = {}
_SHARED_LOCK = threading.Lock()


def _shared(url: str, headers: Mapping[str, str]) -> _Shared:
    """The process's export to `url` with `headers`, set up on first use (again in a
    forked child, whose copy has no export thread)."""
    key = (url, tuple(sorted(headers.items())))
    with _SHARED_LOCK:
        shared = _SHARED.get(key)
        if shared is None or shared.pid != os.getpid():
            if not _SHARED:
                atexit.register(_close_all)
            shared = _SHARED[key] = _Shared(url, headers)
        return shared


def _close_all() -> None:
    """At the process's exit: the spans still queued are sent (bounded), every export stopped."""
    with _SHARED_LOCK:
        shared = list(_SHARED.values())
        _SHARED.clear()
    for one in shared:
        if one.pid == os.getpid():
            one.close()


class LiveExport:
    """Sends one run's spans to the collector at `url` through the process's shared export
    (`_Shared`), never blocking the run."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        self._shared = _shared(url, headers or {})
        self.url = url
        self.submitted = 0
        self.sent = 0  # spans the collector took (counted by the export thread)
        self.done = 0  # spans the export thread tried to send
        self._trace_id: int | None = None
        self._closed = False

    def add(self, span: Span) -> None:
        readable_span = _readable(span)
        if self._trace_id is None:
            self._trace_id = readable_span.context.trace_id
            with self._shared.changed:
                self._shared.runs[self._trace_id] = self
        self.submitted += 1
        self._shared.submitted += 1
        self._shared.processor.on_end(readable_span)

    def close(self) -> int:
        """Wait until the run's spans are sent (at most `CLOSE_TIMEOUT`, and not at all
        while the collector fails); the number that did not reach the collector. Other
        runs' spans, and the export itself, go on. Blocking: called off the run's loop."""
        if self._closed:
            return 0
        self._closed = True
        shared = self._shared
        with shared.changed:
            if self.done < self.submitted and not shared.failing:
                shared.flush()
                shared.changed.wait_for(
                    lambda: self.done >= self.submitted or shared.failing, CLOSE_TIMEOUT
                )
            if self._trace_id is not None:
                shared.runs.pop(self._trace_id, None)
            return max(self.submitted - self.sent, 0)


def send(spans: list[Span], url: str, headers: Mapping[str, str] | None = None) -> int:
    """Send stored spans to the collector at `url` (`awf trace --send`); how many did not
    reach it."""
    exporter_class, _ = _sdk()
    for name in _SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = exporter_class(endpoint=url, headers=dict(headers or {}), timeout=EXPORT_TIMEOUT)
    failed = 0
    try:
        for start in range(0, len(spans), BATCH_SIZE):
            batch = spans[start : start + BATCH_SIZE]
            if exporter.export(readable(batch)) != SpanExportResult.SUCCESS:
                failed += len(batch)
    finally:
        exporter.shutdown()
    return failed
