"""The command environment of an `mcp_proxy` step, handed to `awf mcp-serve` by the live
awf process over a private channel instead of a file.

The environment holds secrets (API keys, tokens). The agent CLI starts `awf mcp-serve`
itself, with an environment of its own choosing (codex clears it) and no inherited file
descriptors, so the environment cannot ride along with the process. So the run's awf
serves it on a Unix socket in a private folder (0700, in the temporary directory: a
socket's path must be short) and the serve config file names only the socket and a
random token. `awf mcp-serve` connects, sends the token and reads the environment as JSON.
Nothing secret is ever written to disk: after a kill -9 the folder holds a dead socket and
the config file a token nothing answers to any more.

Bounds: a client has `CLIENT_TIMEOUT_SECONDS` to send its token (`MAX_TOKEN_BYTES` at
most); `awf mcp-serve` waits `FETCH_TIMEOUT_SECONDS` for the answer and reads at most
`MAX_ENV_BYTES` of it; the server thread ends when the channel is closed.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from awf_nb.errors import UserError

MAX_TOKEN_BYTES = 128
MAX_ENV_BYTES = 16 * 1024 * 1024
CLIENT_TIMEOUT_SECONDS = 5.0
FETCH_TIMEOUT_SECONDS = 10.0
ACCEPT_POLL_SECONDS = 0.5  # how often the server thread notices the channel was closed


class EnvChannel:
    """Serves environments to the `awf mcp-serve` processes of one run, by token."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="awf-env-"))  # 0700
        self.path = self.folder / "env.sock"
        self._envs: dict[str, bytes] = {}
        self._tokens: dict[bytes, str] = {}
        self._closed = threading.Event()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(str(self.path))
        self._socket.listen(16)
        self._socket.settimeout(ACCEPT_POLL_SECONDS)
        self._thread = threading.Thread(target=self._serve, name="awf-env-channel", daemon=True)
        self._thread.start()

    def offer(self, env: Mapping[str, str]) -> str:
        """The token under which `env` is served (the same for the same environment)."""
        data = json.dumps(dict(env), ensure_ascii=False, sort_keys=True).encode()
        token = self._tokens.get(data)
        if token is None:
            token = secrets.token_hex(24)
            self._tokens[data] = token
            self._envs[token] = data
        return token

    def close(self) -> None:
        """Stop serving and remove the folder (the socket)."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._socket.close()
        self._thread.join(ACCEPT_POLL_SECONDS * 4)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            with client:
                self._answer(client)

    def _answer(self, client: socket.socket) -> None:
        client.settimeout(CLIENT_TIMEOUT_SECONDS)
        received = b""
        try:
            while b"\n" not in received and len(received) <= MAX_TOKEN_BYTES:
                chunk = client.recv(MAX_TOKEN_BYTES + 1)
                if not chunk:
                    break
                received += chunk
            token = received.split(b"\n", 1)[0].decode("ascii", "replace").strip()
            client.sendall(self._envs.get(token, b""))
        except OSError:
            return  # a client that went away or never spoke: nothing to answer


def fetch_env(path: str, token: str, *, timeout: float = FETCH_TIMEOUT_SECONDS) -> dict[str, str]:
    """The environment the run's awf serves at `path` under `token` (`EnvChannel`)."""
    problem = (
        f"cannot get the command environment from the awf run that started this server ({path})"
    )
    hint = "mcp_proxy servers are started by a running awf step; run the step again"
    data = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(path)
            conn.sendall(token.encode("ascii") + b"\n")
            while chunk := conn.recv(65536):
                data += chunk
                if len(data) > MAX_ENV_BYTES:
                    raise UserError(f"{problem}: more than {MAX_ENV_BYTES} bytes", hint=hint)
    except OSError as exc:
        raise UserError(f"{problem}: {exc.strerror or exc}", hint=hint) from None
    if not data:
        raise UserError(f"{problem}: the token is not known (the run has ended?)", hint=hint)
    try:
        env = json.loads(data)
    except ValueError:
        raise UserError(f"{problem}: the answer is not JSON", hint=hint) from None
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise UserError(f"{problem}: the answer is not a map of names to strings", hint=hint)
    return {str(k): v for k, v in env.items()}
