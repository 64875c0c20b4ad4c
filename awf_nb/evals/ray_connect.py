"""How a Ray eval's driver connects to the cluster (`connect`), bounded and on loopback
when asked for loopback.

At most `CONNECT_TIMEOUT` for the cluster's address to answer, first as a TCP listener,
then as a Ray cluster (Ray's own retries at an address that does not answer last many
minutes, in native code that handles no signal); Ctrl-C and SIGTERM end the wait at once.
A loopback address (`127.0.0.1`, `localhost`, `::1`) keeps the driver on loopback: Ray
would otherwise swap it for the machine's own network address, where a cluster started for
loopback only does not listen, and try there for minutes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from awf_nb.engine.summary import format_duration
from awf_nb.errors import UserError

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # awf_nb/, shipped to the workers

# How long the driver waits for the cluster's address to answer, as a TCP listener and
# then as a Ray cluster (Ray's own retries at an address that does not answer last many
# minutes); the wait ends at once on Ctrl-C or SIGTERM.
CONNECT_TIMEOUT = 10.0
# How often that wait looks whether the answer came (signals are handled in between).
CONNECT_POLL = 0.1


def connect(ray: Any, address_option: str | None) -> None:
    """Connect this process to the cluster at `address_option` (else `RAY_ADDRESS`, else
    the one `ray start` started on this machine), or a clear error."""
    if ray.is_initialized():
        ray.shutdown()
    # no address: RAY_ADDRESS, else the cluster `ray start` started on this machine;
    # never a cluster of the driver's own (Ray's `ray.init()` would start one)
    address = address_option or os.environ.get("RAY_ADDRESS") or "auto"
    where = "this machine's cluster" if address == "auto" else address
    hint = (
        "start one with `ray start --head`, or pass --ray-address HOST:PORT; a "
        "cluster with token authentication (Ray's default) needs RAY_AUTH_MODE=token "
        "and its token (RAY_AUTH_TOKEN or ~/.ray/auth_token) here too"
    )
    options: dict[str, Any] = {}
    if address != "auto":
        host, port = _probe(address, where, hint)
    if address != "auto" and not address.startswith("ray://"):
        if _is_loopback(host):
            options["_node_ip_address"] = "127.0.0.1"
            address = f"127.0.0.1:{port}"
        with _loopback_driver(bool(options)):
            _answers(address, where, hint)
    _route_cluster_messages()
    refused: tuple[type[BaseException], ...] = (ConnectionError, *_refusals(ray))
    try:
        with _loopback_driver(bool(options)):
            ray.init(
                address=address,
                # the driver's awf-nb: the workers unpickle its plan and items
                runtime_env={"py_modules": [str(PACKAGE_DIR)]},
                logging_level="WARNING",
                log_to_driver=False,
                configure_logging=False,
                **options,
            )
    except refused as exc:
        raise UserError(
            f"cannot connect to the Ray cluster at {where}: {_first_line(exc)}", hint=hint
        ) from None


def _refusals(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's error for a cluster that refuses the driver (Ray with token authentication)."""
    refused = getattr(ray.exceptions, "AuthenticationError", None)
    return (refused,) if refused is not None else ()


def _route_cluster_messages() -> None:
    """The cluster's messages to this driver (a worker died, …) into awf's log, not onto
    stdout: Ray's driver prints them on `sys.stdout` from a thread of its own (whatever
    `log_to_driver` says), which would break `awf eval --json` and the progress display.
    The deaths that matter are awf's own warnings; Ray's text is shown with --verbose."""
    import ray._private.worker as ray_worker

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for line in data.get("lines", []):
            log.info("Ray (%s): %s", data.get("pid", "?"), line)

    if hasattr(ray_worker, "print_to_stdstream"):  # Ray's internal name (2.40 to 2.60)
        ray_worker.print_to_stdstream = to_log


def _probe(address: str, where: str, hint: str) -> tuple[str, int]:
    """A TCP connection to the cluster's `HOST:PORT` (or `ray://HOST:PORT`), within
    `CONNECT_TIMEOUT`: a clear error at once where nothing listens."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray-address must be HOST:PORT or ray://HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise UserError(
            f"cannot connect to the Ray cluster at {where}: {reason} "
            f"(waited up to {format_duration(CONNECT_TIMEOUT)})",
            hint=hint,
        ) from None
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback (`localhost`, `127.x.x.x`, `::1`)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def _loopback_driver(on: bool) -> Iterator[None]:
    """While `on`: Ray keeps a loopback address as it is. Otherwise it replaces
    `127.0.0.1` by the machine's network address (unless `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`
    is 0 when Ray is imported), where a cluster started for loopback does not listen, and
    retries there for minutes. Ray reads the setting from this module attribute."""
    if not on:
        yield
        return
    import ray._private.ray_constants as ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def _answers(address: str, where: str, hint: str) -> None:
    """The cluster at `address` answers as a Ray cluster within `CONNECT_TIMEOUT`, else a
    clear error. Ray's client blocks in native code (half a minute per try, and tries
    again for minutes), so it asks from a thread of its own, left behind on a timeout; this
    thread waits in short steps, so Ctrl-C and SIGTERM are handled at once."""
    import threading

    from ray._private.authentication.authentication_token_setup import (
        ensure_token_if_auth_enabled,
    )
    from ray._private.services import canonicalize_bootstrap_address

    # Ray's stub of its compiled _raylet leaves GcsClient out; the module has it
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    try:
        # as `ray.init` does first: Ray's client ends the process when the token it is
        # told to send is missing
        ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    except Exception as exc:
        raise UserError(
            f"cannot connect to the Ray cluster at {where}: {_first_line(exc)}", hint=hint
        ) from None
    answer: list[BaseException | None] = []

    def ask() -> None:
        try:
            GcsClient(address=canonicalize_bootstrap_address(address)).cluster_id  # noqa: B018
            answer.append(None)
        except BaseException as exc:
            answer.append(exc)

    asking = threading.Thread(target=ask, name="awf-ray-connect", daemon=True)
    asking.start()
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while not answer and time.monotonic() < deadline:
        asking.join(CONNECT_POLL)
    if not answer:
        raise UserError(
            f"cannot connect to the Ray cluster at {where}: it does not answer as a Ray "
            f"cluster (waited {format_duration(CONNECT_TIMEOUT)})",
            hint=hint,
        )
    failure = answer[0]
    if failure is not None and not isinstance(failure, Exception):
        raise failure
    if failure is not None:
        raise UserError(
            f"cannot connect to the Ray cluster at {where}: {_first_line(failure)}", hint=hint
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
