"""Spans in the OTLP/JSON encoding (an `ExportTraceServiceRequest` per line), and the
bounded file a run's spans are written to, next to its transcript.

The encoding is written here rather than taken from `opentelemetry-proto`: the offline file
must not need the optional `otel` extra, and protobuf's own JSON printer writes trace and
span ids in base64 where OTLP/JSON asks for hex — the few lines below are the encoding.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from awf_nb._version import __version__
from awf_nb.traces.spans import SCHEMA_URL, Span

log = logging.getLogger(__name__)

TRACE_FILE = "trace.otlp.jsonl"
# The cap of a run's trace file: spans past it are counted, not written (documented in
# docs/observability.md). A line is written every this many ended spans and at the end.
MAX_TRACE_BYTES = 16 * 1024 * 1024
BATCH = 64
SERVICE = "awf-nb"


def _value(value: Any) -> dict[str, Any]:
    kind = type(value)  # exact types first: a span's values are almost all plain ones
    if kind is str:
        return {"stringValue": value}
    if kind is int:
        return {"intValue": str(value)}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attrs.items()]


def encode(spans: Iterable[Span]) -> dict[str, Any]:
    """An `ExportTraceServiceRequest` of `spans`, as OTLP/JSON."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": SERVICE})},
                "scopeSpans": [
                    {
                        "scope": {"name": "awf_nb", "version": __version__},
                        "schemaUrl": SCHEMA_URL,
                        "spans": [_span(s) for s in spans],
                    }
                ],
                "schemaUrl": SCHEMA_URL,
            }
        ]
    }


def _span(s: Span) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": s.trace_id,
        "spanId": s.span_id,
        "name": s.name,
        "kind": s.kind,
        "startTimeUnixNano": str(s.start_ns),
        "endTimeUnixNano": str(s.end_ns),
        "attributes": _attributes(s.attributes),
        "events": [
            {"timeUnixNano": str(t), "name": n, "attributes": _attributes(a)}
            for n, t, a in s.events
        ],
        "status": {"code": s.status, **({"message": s.status_message} if s.status_message else {})},
    }
    if s.parent_id:
        out["parentSpanId"] = s.parent_id
    return out


def _plain(value: dict[str, Any]) -> Any:
    if "arrayValue" in value:
        return [_plain(v) for v in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])
    return next(iter(value.values())) if value else None


def decode(lines: Iterable[str]) -> Iterator[Span]:
    """The spans of OTLP/JSON lines (the file `TraceFile` writes)."""
    for line in lines:
        if not line.strip():
            continue
        request = json.loads(line)
        for rs in request.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    yield Span(
                        s["traceId"],
                        s["spanId"],
                        s.get("parentSpanId", ""),
                        s["name"],
                        int(s.get("kind", 1)),
                        int(s["startTimeUnixNano"]),
                        int(s["endTimeUnixNano"]),
                        {a["key"]: _plain(a["value"]) for a in s.get("attributes", [])},
                        [
                            (
                                e["name"],
                                int(e["timeUnixNano"]),
                                {a["key"]: _plain(a["value"]) for a in e.get("attributes", [])},
                            )
                            for e in s.get("events", [])
                        ],
                        int(s.get("status", {}).get("code", 0)),
                        s.get("status", {}).get("message", ""),
                    )


class TraceFile:
    """Appends a run's ended spans to its trace file, a line per batch, up to
    `MAX_TRACE_BYTES` (spans past it are counted in `dropped`). A write that fails is
    logged once and the run goes on."""

    def __init__(self, path: Path, max_bytes: int = MAX_TRACE_BYTES) -> None:
        self.path = path
        self._max = max_bytes
        self._size = path.stat().st_size if path.exists() else 0
        self._pending: list[Span] = []
        self.dropped = 0
        self._failed = False

    def add(self, span: Span) -> None:
        self._pending.append(span)
        if len(self._pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        spans, self._pending = self._pending, []
        if not spans or self._failed:
            self.dropped += len(spans) if self._failed else 0
            return
        data = (json.dumps(encode(spans), separators=(",", ":")) + "\n").encode()
        if self._size + len(data) > self._max:
            self.dropped += len(spans)
            return
        try:
            if not self._size:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Private to the user, as every file of a run is (0600): spans may carry
            # inputs, errors and, with --trace-content, the messages.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "ab") as f:
                f.write(data)
            self._size += len(data)
        except OSError as exc:
            self._failed = True
            self.dropped += len(spans)
            log.warning("cannot write the trace file %s (%s); the run goes on", self.path, exc)
