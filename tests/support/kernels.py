"""Real Jupyter kernels for the kernel-level notebook tests.

Two pieces:

- `ensure_kernel_venv(series)`: a venv with one ipykernel series (e.g. "6.29"), awf-nb's
  `notebook` extra (ipywidgets, markdown-it-py) and awf-nb itself (editable), built once under a cache folder and reused while its
  stamp matches. The notebook frontend picks its run mode by ipykernel version, so the tests
  need each version for real, not a mock.
- `KernelSession`: a kernel started through `jupyter_client` from a kernelspec pointing at
  such a venv, with what a frontend does: execute cells, follow iopub, keep the state of
  every widget model (comm_open + update messages), and send widget events back as
  `comm_msg` on the main shell channel or through a kernel subshell (ipykernel >= 7).

Every wait takes a timeout; a session always shuts its kernel down.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

from tests.support import stream_view

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV_ROOT = REPO_ROOT / ".kernel-venvs"
VENV_ROOT_ENV = "AWF_KERNEL_VENVS"
PIP_TIMEOUT_SECONDS = 900.0
KERNEL_READY_SECONDS = 90.0

Message = dict[str, Any]


class KernelTestError(AssertionError):
    """A kernel did not do what a test waited for (with the recent messages for context)."""


# ---------------------------------------------------------------------------- venvs


def venv_root() -> Path:
    return Path(os.environ.get(VENV_ROOT_ENV) or DEFAULT_VENV_ROOT)


def _kernel_requirements() -> list[str]:
    """What a kernel needs besides ipykernel: awf-nb's runtime dependencies and its
    `notebook` extra, read from pyproject.toml so they never drift."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["notebook"]]


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _stamp(series: str) -> dict[str, Any]:
    return {
        "ipykernel": f"{series}.*",
        "requirements": _kernel_requirements(),
        "repo": str(REPO_ROOT),
        "base_python": sys.version.split()[0],
    }


def ensure_kernel_venv(series: str, root: Path | None = None) -> Path:
    """The python of a venv with `ipykernel=={series}.*` and awf-nb; built if missing.

    A file lock makes concurrent test sessions wait for one build instead of racing; the
    stamp is written last, so a build that died half-way is thrown away and redone.
    """
    root = root or venv_root()
    root.mkdir(parents=True, exist_ok=True)
    _ignore_in_git(root)
    venv = root / f"ipykernel-{series}"
    stamp_path = venv / "awf-kernel-venv.json"
    wanted = _stamp(series)
    with (root / f"ipykernel-{series}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp_matches(stamp_path, wanted) and _venv_python(venv).exists():
            return _venv_python(venv)
        shutil.rmtree(venv, ignore_errors=True)
        _build_venv(venv, series)
        stamp_path.write_text(json.dumps(wanted, indent=2))
    return _venv_python(venv)


def _ignore_in_git(root: Path) -> None:
    """A cache folder that ignores itself (as .pytest_cache does): venvs are never committed."""
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text(
            "# Built by tests/support/kernels.py (kernel-test venvs): never commit.\n*\n"
        )


def _stamp_matches(path: Path, wanted: dict[str, Any]) -> bool:
    try:
        return json.loads(path.read_text()) == wanted
    except (OSError, ValueError):
        return False


def _build_venv(venv: Path, series: str) -> None:
    _run([sys.executable, "-m", "venv", str(venv)], "create the venv")
    python = str(_venv_python(venv))
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # One resolver pass for everything but awf-nb itself, then awf-nb without deps so the
    # resolver cannot swap the ipykernel series under test.
    _run(
        [*pip, f"ipykernel=={series}.*", *_kernel_requirements()],
        f"install ipykernel {series}.*",
    )
    _run([*pip, "--no-deps", "-e", str(REPO_ROOT)], "install awf-nb (editable)")


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired as timeout:
        raise KernelTestError(f"could not {what}: timed out after {timeout.timeout:g}s") from None
    if done.returncode != 0:
        raise KernelTestError(
            f"could not {what} (exit {done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )


def installed_version(python: Path, package: str) -> str:
    """The version of `package` in the venv of `python` (importlib.metadata)."""
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def write_kernelspec(folder: Path, name: str, python: Path) -> Path:
    """A kernelspec folder `folder/name` whose kernel is `python -m ipykernel_launcher`."""
    spec_dir = folder / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": "python",
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return spec_dir


# ---------------------------------------------------------------------------- widgets


@dataclass
class WidgetModel:
    """What the kernel told the frontend about one widget (its comm)."""

    comm_id: str
    state: dict[str, Any] = field(default_factory=dict)
    # A StreamHTML widget (streamed replies and output): what its view shows, kept from its
    # custom messages the way its JavaScript keeps it.
    streamed: tuple[str, str] | None = None

    def update(self, state: dict[str, Any]) -> None:
        self.state.update(state)
        if self.streamed is not None and "value" in state:
            self.streamed = (str(state["value"]), "")

    def receive(self, message: dict[str, Any]) -> None:
        if self.streamed is not None:
            self.streamed = stream_view.apply(*self.streamed, message)

    @property
    def model_name(self) -> str:
        return str(self.state.get("_model_name", ""))

    @property
    def classes(self) -> list[str]:
        return list(self.state.get("_dom_classes", ()))

    @property
    def value(self) -> Any:
        if self.streamed is not None:
            return "".join(self.streamed)
        return self.state.get("value")


@dataclass
class ExecuteOutcome:
    """The execute_reply of a cell plus the iopub messages that had it as parent."""

    reply: Message
    outputs: list[Message]

    @property
    def status(self) -> str:
        return str(self.reply["content"]["status"])

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.outputs
            if m["msg_type"] == "stream" and m["content"].get("name") == "stdout"
        )

    @property
    def error(self) -> Message | None:
        return next((m for m in self.outputs if m["msg_type"] == "error"), None)


# ---------------------------------------------------------------------------- kernels


class KernelSession:
    """One running kernel plus a frontend's view of it (see the module docstring)."""

    def __init__(self, python: Path, spec_folder: Path, cwd: Path, env: dict[str, str]) -> None:
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager

        name = "awf-test-kernel"
        write_kernelspec(spec_folder, name, python)
        self._manager = KernelManager(
            kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec_folder)])
        )
        started = time.monotonic()
        # The kernel's own stdout/stderr (tracebacks from widget callbacks, warnings) go to a
        # log that failure messages quote.
        self.log_path = cwd / "kernel.log"
        with self.log_path.open("wb") as log:
            self._manager.start_kernel(cwd=str(cwd), env=env, stdout=log, stderr=log)
        self.client = self._manager.client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=KERNEL_READY_SECONDS)
        except RuntimeError as error:
            self.shutdown()
            raise KernelTestError(f"the kernel did not start: {error}") from None
        self.start_seconds = time.monotonic() - started
        self.widgets: dict[str, WidgetModel] = {}
        self.iopub: list[Message] = []
        self._idle_parents: set[str] = set()
        self._replies: dict[str, Message] = {}
        # ipywidgets' browser-side sync throttle, emulated (see `set_value`).
        self._sync_pending: dict[str, int] = {}  # comm_id -> updates awaiting their idle
        self._sync_buffer: dict[str, tuple[dict[str, Any], str | None]] = {}
        self._sync_parents: dict[str, str] = {}  # msg_id of an update -> comm_id

    # -- executing cells

    def submit(self, code: str, *, allow_stdin: bool = True) -> str:
        """Send an execute_request; returns its msg_id (does not wait). `allow_stdin` as
        JupyterLab sends it (a person can answer); False as nbclient and nbval send it."""
        return self.client.execute(code, store_history=True, allow_stdin=allow_stdin)

    def execute(
        self, code: str, timeout: float = 60.0, *, allow_stdin: bool = True
    ) -> ExecuteOutcome:
        """Run a cell and wait until it is idle; returns its reply and outputs."""
        return self.wait_for_cell(self.submit(code, allow_stdin=allow_stdin), timeout)

    def wait_for_cell(self, msg_id: str, timeout: float = 60.0) -> ExecuteOutcome:
        self.pump_until(lambda: msg_id in self._idle_parents, timeout, f"cell {msg_id} idle")
        reply = self._shell_reply(msg_id, timeout)
        outputs = [m for m in self.iopub if m["parent_header"].get("msg_id") == msg_id]
        return ExecuteOutcome(reply, outputs)

    def is_idle(self, msg_id: str) -> bool:
        return msg_id in self._idle_parents

    def _shell_reply(self, msg_id: str, timeout: float) -> Message:
        deadline = time.monotonic() + timeout
        while msg_id not in self._replies:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KernelTestError(f"no execute_reply for {msg_id} within {timeout:g}s")
            try:
                reply = self.client.get_shell_msg(timeout=min(remaining, 1.0))
            except Empty:
                continue
            self._replies[reply["parent_header"].get("msg_id", "")] = reply
        return self._replies.pop(msg_id)

    # -- following iopub

    def pump_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Read iopub until `condition()` holds; fails with context after `timeout`."""
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KernelTestError(
                    f"timed out after {timeout:g}s waiting for {what}\n{self.describe()}"
                )
            try:
                message = self.client.get_iopub_msg(timeout=min(remaining, 0.5))
            except Empty:
                continue
            self._take(message)

    def drain(self, seconds: float = 0.3) -> None:
        """Read whatever iopub has within `seconds` (to see late updates)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                self._take(self.client.get_iopub_msg(timeout=remaining))
            except Empty:
                return

    def _take(self, message: Message) -> None:
        self.iopub.append(message)
        kind, content = message["msg_type"], message["content"]
        if kind == "status" and content.get("execution_state") == "idle":
            parent = message["parent_header"].get("msg_id", "")
            self._idle_parents.add(parent)
            if parent in self._sync_parents:
                self._sync_done(self._sync_parents.pop(parent))
        elif kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            state = dict(content.get("data", {}).get("state", {}))
            model = WidgetModel(content["comm_id"], state)
            if "initial_tail" in state:  # a StreamHTML
                model.streamed = (str(state.get("value", "")), str(state["initial_tail"]))
            self.widgets[content["comm_id"]] = model
        elif kind == "comm_msg" and content["comm_id"] in self.widgets:
            data = content.get("data", {})
            if data.get("method") in ("update", "echo_update"):
                self.widgets[content["comm_id"]].update(data.get("state", {}))
            elif data.get("method") == "custom":
                self.widgets[content["comm_id"]].receive(data.get("content", {}))
        elif kind == "comm_close":
            self.widgets.pop(content["comm_id"], None)

    # -- widget queries

    def find_widgets(
        self, model_name: str | None = None, css_class: str | None = None, **state: Any
    ) -> list[WidgetModel]:
        return [
            w
            for w in self.widgets.values()
            if (model_name is None or w.model_name == model_name)
            and (css_class is None or css_class in w.classes)
            and all(w.state.get(key) == value for key, value in state.items())
        ]

    def button(self, description: str) -> WidgetModel:
        found = self.find_widgets("ButtonModel", description=description)
        if len(found) != 1:
            raise KernelTestError(f"expected one {description!r} button, found {len(found)}")
        return found[0]

    def textarea(self) -> WidgetModel:
        found = self.find_widgets("TextareaModel")
        if len(found) != 1:
            raise KernelTestError(f"expected one Textarea, found {len(found)}")
        return found[0]

    def texts(self, css_class: str) -> list[str]:
        """The values of the widgets with `css_class` (e.g. awf-assistant bubbles)."""
        return [str(w.value or "") for w in self.find_widgets(css_class=css_class)]

    def wait_for_text(self, css_class: str, needle: str, timeout: float = 30.0) -> None:
        self.pump_until(
            lambda: any(needle in text for text in self.texts(css_class)),
            timeout,
            f"{needle!r} in a widget with class {css_class}",
        )

    def composer(self) -> WidgetModel:
        """The run panel's text box and buttons (composer.py: one widget)."""
        found = self.find_widgets(css_class="awf-controls")
        if len(found) != 1:
            raise KernelTestError(f"expected one run panel composer, found {len(found)}")
        return found[0]

    def wait_for_input_box(self, timeout: float = 30.0) -> WidgetModel:
        """The composer once the run waits for the user (Send can be used)."""

        def ready() -> bool:
            return any(w.state.get("can_send") for w in self.find_widgets(css_class="awf-controls"))

        self.pump_until(ready, timeout, "the message box (Send enabled)")
        return self.composer()

    def descendants(self, root: WidgetModel) -> list[WidgetModel]:
        """Every widget displayed inside `root` (following `children` references)."""
        found: dict[str, WidgetModel] = {}
        pending = [root]
        while pending:
            widget = pending.pop()
            for reference in widget.state.get("children", ()):
                child = self.widgets.get(str(reference).removeprefix("IPY_MODEL_"))
                if child is not None and child.comm_id not in found:
                    found[child.comm_id] = child
                    pending.append(child)
        return list(found.values())

    # -- sending widget events, like a browser

    def create_subshell(self, timeout: float = 10.0) -> str:
        """A new kernel subshell (ipykernel >= 7): create_subshell_request on control."""
        request = self.client.session.msg("create_subshell_request", {})
        self.client.control_channel.send(request)
        reply = self._control_reply(request["header"]["msg_id"], timeout)
        if reply["content"].get("status") != "ok":
            raise KernelTestError(f"create_subshell_request failed: {reply['content']}")
        return str(reply["content"]["subshell_id"])

    def _control_reply(self, msg_id: str, timeout: float) -> Message:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                reply = self.client.control_channel.get_msg(timeout=remaining)
            except Empty:
                break
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply
        raise KernelTestError(f"no control reply for {msg_id} within {timeout:g}s")

    def send_comm(self, comm_id: str, data: dict[str, Any], subshell_id: str | None = None) -> str:
        """Send a comm_msg (on a subshell when `subshell_id` is given); returns its msg_id."""
        message = self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if subshell_id is not None:
            message["header"]["subshell_id"] = subshell_id
        self.client.shell_channel.send(message)
        return str(message["header"]["msg_id"])

    def set_value(self, widget: WidgetModel, value: Any, subshell_id: str | None = None) -> None:
        """What a browser sends when the user types into a text widget.

        Exactly as ipywidgets' JavaScript does it (WidgetModel.sync / _handle_status): while
        an earlier update of the same model has not been answered by an iopub `idle` status
        whose parent is that update, the new state is held back in a buffer and sent only
        when that idle arrives. A kernel that never reports idle for an update therefore
        loses every later update of that model, in a browser and here alike.
        """
        comm_id = widget.comm_id
        if self._sync_pending.get(comm_id, 0) >= 1:
            state, _ = self._sync_buffer.get(comm_id, ({}, None))
            self._sync_buffer[comm_id] = ({**state, "value": value}, subshell_id)
            return
        self._send_sync(comm_id, {"value": value}, subshell_id)

    def _send_sync(self, comm_id: str, state: dict[str, Any], subshell_id: str | None) -> None:
        msg_id = self.send_comm(
            comm_id, {"method": "update", "state": state, "buffer_paths": []}, subshell_id
        )
        self._sync_pending[comm_id] = self._sync_pending.get(comm_id, 0) + 1
        self._sync_parents[msg_id] = comm_id

    def _sync_done(self, comm_id: str) -> None:
        self._sync_pending[comm_id] = max(self._sync_pending.get(comm_id, 0) - 1, 0)
        if self._sync_pending[comm_id] < 1 and comm_id in self._sync_buffer:
            state, subshell_id = self._sync_buffer.pop(comm_id)
            self._send_sync(comm_id, state, subshell_id)

    def held_back_updates(self) -> dict[str, dict[str, Any]]:
        """Widget updates the emulated browser has not sent yet (waiting for an idle)."""
        return {comm_id: state for comm_id, (state, _) in self._sync_buffer.items()}

    def send_message(self, text: str, subshell_id: str | None = None) -> None:
        """What the panel's composer sends when the user types `text` and clicks Send (or
        presses Enter): one custom message with the action and the text."""
        self.press("send", subshell_id, text=text)

    def press(
        self, action: str, subshell_id: str | None = None, *, text: str | None = None
    ) -> None:
        """What the composer sends for a click on its End conversation ("end"), Stop
        ("stop") or Cancel run ("cancel") button."""
        content: dict[str, Any] = {"action": action}
        if text is not None:
            content["text"] = text
        self.send_comm(
            self.composer().comm_id, {"method": "custom", "content": content}, subshell_id
        )

    def answer_pause(self, action: str, text: str | None = None) -> None:
        """What a breakpoint's pause box (pause_view.js) sends for a click on one of its
        buttons ("continue", "step", "edit", "skip", "abort"): the action and the text area's
        text (`text`; what the kernel put there when None), in one message."""
        (box,) = self.find_widgets(css_class="awf-pause-do")
        content = {"action": action, "text": box.value if text is None else text}
        self.send_comm(box.comm_id, {"method": "custom", "content": content})

    def click(self, widget: WidgetModel, subshell_id: str | None = None) -> None:
        """What a browser sends when the user clicks a Button."""
        self.send_comm(
            widget.comm_id,
            {"method": "custom", "content": {"event": "click"}},
            subshell_id,
        )

    # -- diagnostics and shutdown

    def describe(self, last: int = 15) -> str:
        """The recent iopub traffic and widget texts, for failure messages."""
        lines = ["recent iopub messages:"]
        for message in self.iopub[-last:]:
            lines.append(f"  {message['msg_type']}: {json.dumps(message['content'])[:300]}")
        lines.append("widgets with text:")
        for widget in self.widgets.values():
            if isinstance(widget.value, str) and widget.value:
                lines.append(f"  {widget.model_name} {widget.classes}: {widget.value[:200]!r}")
        if self._sync_buffer:
            lines.append(
                "widget updates held back (no idle status for the previous update of the same"
                f" model, as ipywidgets' browser throttle does): {self.held_back_updates()}"
            )
        lines.append("kernel log (tail):")
        lines.extend(f"  {line}" for line in self._log_tail())
        return "\n".join(lines)

    def _log_tail(self, count: int = 20) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-count:]
        except OSError:
            return ["(no log)"]

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop_channels()
        if self._manager.has_kernel:
            try:
                self._manager.shutdown_kernel(now=False)
            except Exception:
                self._manager.shutdown_kernel(now=True)


@contextlib.contextmanager
def kernel_session(
    python: Path, workdir: Path, env: dict[str, str] | None = None
) -> Iterator[KernelSession]:
    """A `KernelSession` in `workdir` that is always shut down afterwards."""
    session = KernelSession(python, workdir / ".kernelspecs", workdir, env or kernel_env(workdir))
    try:
        yield session
    finally:
        session.shutdown()


def kernel_env(workdir: Path) -> dict[str, str]:
    """The environment of a test kernel: isolated storage, interactive mode left to tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWF_", "JPY_"))}
    env.update(
        AWF_STORAGE=str(workdir / "storage"),
        PYTHONUNBUFFERED="1",
        # Jupyter's own runtime/config files stay inside the test folder.
        JUPYTER_RUNTIME_DIR=str(workdir / ".jupyter-runtime"),
        IPYTHONDIR=str(workdir / ".ipython"),
    )
    # The kernel's venv alone decides what it imports (awf-nb is installed there, editable).
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    return env
