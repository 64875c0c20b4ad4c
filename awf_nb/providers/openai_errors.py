"""The openai_compatible provider's failures as one-line `ProviderError`s.

Each names the provider, the URL (as `openai_request.display_url` shows it) and what went
wrong, in the words of docs/providers.md; `retryable` / `retry_after` tell the engine
whether trying again may help. Whatever a server sends back is masked with the turn's
secrets (servers sometimes echo the key) and cut to one short line.
"""

from __future__ import annotations

import email.utils
import json
import socket
import ssl
import time
from typing import Any

import httpx2

from awf_nb.engine.summary import format_duration
from awf_nb.errors import ProviderError
from awf_nb.secrets import Masker

CONNECT_TIMEOUT = 10.0
MAX_SERVER_MESSAGE = 300


def http_error(
    provider: str, url: str, secrets: list[str], response: httpx2.Response, body: str
) -> ProviderError:
    """The error for a response that is not a success (`body`: what of it was read)."""
    status = response.status_code
    if status == 401:
        return ProviderError(
            provider,
            f"{url}: authentication failed (HTTP 401); check options.api_key or $OPENAI_API_KEY",
        )
    if status == 429:
        retry_after = retry_after_seconds(response.headers)
        wait = f", retry after {format_duration(retry_after)}" if retry_after is not None else ""
        return ProviderError(
            provider,
            f"{url}: rate limited{wait} (HTTP 429)",
            retryable=True,
            retry_after=retry_after,
        )
    if status >= 500:
        return ProviderError(provider, f"{url}: server error (HTTP {status})", retryable=True)
    if status < 400:
        location = response.headers.get("location", "")
        return ProviderError(
            provider,
            f"{url}: unexpected redirect (HTTP {status}) to "
            f"{mask(_without_userinfo(location), secrets) or 'nowhere'}; "
            "set base_url to the final address",
        )
    message = mask(server_message(body, response.reason_phrase), secrets)
    if status == 404:
        message += " (check base_url: it usually ends in /v1)"
    return ProviderError(provider, f"{url}: bad request (HTTP {status}): {message}")


def transport_error(
    provider: str, url: str, exc: httpx2.TransportError, read_timeout: float
) -> ProviderError:
    """The error for a request that got no response."""
    if isinstance(exc, httpx2.PoolTimeout):
        from awf_nb.providers.http_client import MAX_CONNECTIONS_VARIABLE, max_connections

        return ProviderError(
            provider,
            f"{url}: no free connection within {format_duration(read_timeout)} "
            f"({max_connections()} in use, the most this process opens: "
            f"${MAX_CONNECTIONS_VARIABLE})",
            retryable=True,
        )
    if isinstance(exc, httpx2.ConnectTimeout):
        reason = f"timed out after {format_duration(CONNECT_TIMEOUT)}"
    elif isinstance(exc, httpx2.TimeoutException):
        return ProviderError(
            provider, f"{url}: no response within {format_duration(read_timeout)} (read timeout)"
        )
    elif isinstance(exc, httpx2.ConnectError):
        reason = connect_reason(exc)
    elif isinstance(exc, httpx2.RemoteProtocolError | httpx2.ReadError | httpx2.WriteError):
        return ProviderError(
            provider,
            f"{url}: the server closed the connection without answering ({describe(exc)})",
            retryable=True,
        )
    else:
        return ProviderError(provider, f"{url}: {describe(exc)}", retryable=True)
    return ProviderError(provider, f"cannot connect to {url}: {reason}", retryable=True)


def connect_reason(exc: httpx2.ConnectError) -> str:
    """Why a connection failed, from the OS error under httpx's (often vague) message."""
    causes = _causes(exc)
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return "connection refused"
    if any(isinstance(c, socket.gaierror) for c in causes):
        return "host name not found"
    if any(isinstance(c, ssl.SSLError) for c in causes):
        return f"TLS error ({describe(causes[-1])})"
    detail = " ".join(str(c) for c in causes).lower()
    if "refused" in detail:
        return "connection refused"
    if any(s in detail for s in ("name or service", "nodename", "getaddrinfo", "name resolution")):
        return "host name not found"
    if "certificate" in detail or "ssl" in detail:
        return f"TLS error ({describe(exc)})"
    return describe(causes[-1])


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first (bounded)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10 and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def retry_after_seconds(headers: httpx2.Headers) -> float | None:
    """Seconds to wait from `Retry-After` (seconds or an HTTP date) or `retry-after-ms`."""
    if milliseconds := headers.get("retry-after-ms"):
        seconds = _seconds(milliseconds)
        if seconds is not None:
            return seconds / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(round(when.timestamp() - time.time(), 3), 0.0)


def _seconds(text: str) -> float | None:
    """A non-negative finite number of `text` (a header: `NaN` and `1e400` are not)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return max(value, 0.0) if value < float("inf") else None  # NaN < inf is False too


def server_message(body: str, reason: str) -> str:
    """The human part of an error response's body, on one line."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and (message := error_message(data)):
        return message
    text = " ".join((data if isinstance(data, str) else body).split())
    return preview(text) if text else reason or "no details"


def error_message(body: dict[str, Any]) -> str:
    """The human part of the error bodies servers send (OpenAI, vLLM, Ollama, FastAPI)."""
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error.get("msg") or _json(error)
    candidate = error or body.get("message") or body.get("detail") or ""
    if not isinstance(candidate, str):
        candidate = _json(candidate)
    return preview(" ".join(candidate.split()))


def mask(text: str, secrets: list[str]) -> str:
    """`text` with every secret replaced by `***` (servers sometimes echo the key)."""
    return Masker(secrets).mask(text) if secrets else text


def describe(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def preview(value: Any) -> str:
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= MAX_SERVER_MESSAGE else text[: MAX_SERVER_MESSAGE - 1] + "…"


def _json(value: Any) -> str:
    """JSON text of what a server sent, for a message (bounded work: a preview)."""
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        text = repr(type(value))
    return text[: MAX_SERVER_MESSAGE * 4]


def _without_userinfo(url: str) -> str:
    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL:
        return url
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url
