"""Live export of a run's spans over OTLP/HTTP with the OpenTelemetry SDK (the optional
`otel` extra): `pip install 'awf-nb[otel]'`.

A slow or dead collector never slows or fails a run: spans go into the SDK's
`BatchSpanProcessor` (a bounded queue of `MAX_QUEUE` spans, exported from its own thread,
each export given `EXPORT_TIMEOUT` seconds); what did not reach the collector is counted
and said once, in one line, when the run ends (`LiveExport.close`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from awf_nb._version import __version__
from awf_nb.errors import UserError
from awf_nb.traces.spans import CLIENT, SCHEMA_URL, STATUS_ERROR, STATUS_OK, Span

log = logging.getLogger(__name__)

MAX_QUEUE = 2048  # spans waiting to be sent; more are dropped (and counted)
BATCH_SIZE = 512
SCHEDULE_DELAY_MS = 500
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
_RESOURCE: Any = None
_SCOPE: Any = None


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


class _Counting:
    """The SDK exporter, counting the spans that reached the collector."""

    def __init__(self, exporter: Any) -> None:
        self._exporter = exporter
        self.sent = 0
        self.failures = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self._exporter.export(spans)
        except Exception:  # a broken collector is the run's last concern
            return SpanExportResult.FAILURE
        if result == SpanExportResult.SUCCESS:
            self.sent += len(spans)
        else:
            self.failures += 1
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def readable(spans: Iterable[Span]) -> list[Any]:
    """`spans` as the SDK's `ReadableSpan`s, ids kept."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    global _RESOURCE, _SCOPE
    if _RESOURCE is None:  # made once: Resource.create reads the environment, detectors
        _RESOURCE = Resource.create({"service.name": "awf-nb"})
        _SCOPE = InstrumentationScope("awf_nb", __version__, SCHEMA_URL)
    resource, scope = _RESOURCE, _SCOPE
    codes = {STATUS_OK: StatusCode.OK, STATUS_ERROR: StatusCode.ERROR}
    out = []
    for s in spans:
        trace_id = int(s.trace_id, 16)
        context = SpanContext(trace_id, int(s.span_id, 16), False, TraceFlags(1))
        parent = (
            SpanContext(trace_id, int(s.parent_id, 16), False, TraceFlags(1))
            if s.parent_id
            else None
        )
        code = codes.get(s.status, StatusCode.UNSET)
        out.append(
            ReadableSpan(
                name=s.name,
                context=context,
                parent=parent,
                resource=resource,
                attributes=s.attributes,
                events=[Event(n, a, t) for n, t, a in s.events],
                kind=SpanKind.CLIENT if s.kind == CLIENT else SpanKind.INTERNAL,
                status=Status(code, s.status_message if code is StatusCode.ERROR else None),
                start_time=s.start_ns,
                end_time=s.end_ns,
                instrumentation_scope=scope,
            )
        )
    return out


class LiveExport:
    """Sends one run's spans to the collector at `url`, never blocking the run."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        exporter_class, processor_class = _sdk()
        for name in _SDK_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.url = url
        self._exporter = _Counting(
            exporter_class(endpoint=url, headers=dict(headers or {}), timeout=EXPORT_TIMEOUT)
        )
        self._processor = processor_class(
            self._exporter,
            max_queue_size=MAX_QUEUE,
            schedule_delay_millis=SCHEDULE_DELAY_MS,
            max_export_batch_size=BATCH_SIZE,
            export_timeout_millis=EXPORT_TIMEOUT * 1000,
        )
        self.submitted = 0
        self._closed = False

    def add(self, span: Span) -> None:
        self.submitted += 1
        self._processor.on_end(readable([span])[0])

    def close(self) -> int:
        """Send what is queued (waiting at most `CLOSE_TIMEOUT`), stop; the number of spans
        that never reached the collector. Blocking: called off the run's loop."""
        if self._closed:
            return 0
        self._closed = True
        # A collector that already failed an export is not waited for again.
        if not self._exporter.failures:
            self._processor.force_flush(int(CLOSE_TIMEOUT * 1000))
        # The exporter first: its shutdown cuts short the retries of an export in flight,
        # so the processor's own shutdown (which exports what is left) returns at once.
        self._exporter.shutdown()
        self._processor.shutdown()
        return max(self.submitted - self._exporter.sent, 0)


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
