"""`http.request`, and the one HTTP exchange every operation uses (`fetch`).

Response bodies are read up to 1 MiB (`MAX_BODY_BYTES`); the rest is dropped and
`body_truncated` says so. Transport failures (refused, timeout, bad URL) fail the step with
a message naming the URL. A response is a success whatever its status, as in AWF: route on
`{{.states.NAME.Response.status_code}}`, or list `retryable_status_codes` to fail the step
(and let `retry:` try again) on those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from awf_nb.engine.operations.base import OperationContext, OperationResult
from awf_nb.engine.summary import format_duration
from awf_nb.errors import ExecutionError

MAX_BODY_BYTES = 1 << 20
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


@dataclass
class Response:
    status_code: int
    reason: str
    headers: dict[str, str]
    body: str
    truncated: bool

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


async def fetch(
    what: str,
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    content: str | None = None,
    json_body: Any = None,
    timeout: float = 30.0,
) -> Response:
    """One HTTP exchange; `what` names the operation in error messages."""
    if not url.startswith(("http://", "https://")):
        raise ExecutionError(f"{what}: url must start with http:// or https://, got {url!r}")
    try:
        async with (
            httpx.AsyncClient(timeout=timeout, follow_redirects=True) as client,
            client.stream(
                method, url, headers=headers, content=content, json=json_body
            ) as response,
        ):
            body, truncated = await _read_capped(response)
            return Response(
                status_code=response.status_code,
                reason=response.reason_phrase,
                headers=dict(response.headers),
                body=body.decode(response.encoding or "utf-8", errors="replace"),
                truncated=truncated,
            )
    except httpx.TimeoutException:
        raise ExecutionError(
            f"{what}: {method} {url}: no answer within {format_duration(timeout)}"
        ) from None
    except httpx.HTTPError as exc:
        detail = str(exc) or type(exc).__name__
        raise ExecutionError(f"{what}: {method} {url}: {detail}") from None


async def _read_capped(response: httpx.Response) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        room = MAX_BODY_BYTES - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


async def request(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    method = inputs["method"].strip().upper()
    if method not in METHODS:
        raise ExecutionError(
            f"http.request: method must be one of {', '.join(METHODS)}, got {inputs['method']!r}"
        )
    headers = {str(k): str(v) for k, v in (inputs.get("headers") or {}).items()}
    response = await fetch(
        "http.request",
        method,
        inputs["url"].strip(),
        headers=headers,
        content=inputs.get("body"),
        timeout=float(inputs["timeout"]),
    )
    outputs = {
        "status_code": response.status_code,
        "body": response.body,
        "headers": response.headers,
        "body_truncated": response.truncated,
    }
    retryable = {int(code) for code in inputs.get("retryable_status_codes") or []}
    if response.status_code in retryable:
        return OperationResult(
            outputs, f"http.request: retryable status code {response.status_code}"
        )
    return OperationResult(outputs)
