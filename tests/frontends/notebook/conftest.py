"""Fixtures for the real-peer notebook tests: kernels, JupyterLab and Chromium.

Kernel tests (marker `kernel`):
- `kernel_python`: a venv per ipykernel series (6.29 and 7.4; the run mode the frontend
  picks differs by version), built once under `.kernel-venvs/` (or `$AWF_KERNEL_VENVS`).
  Parametrized, so every kernel test runs on both; a test that only makes sense on one
  series overrides it with `@pytest.mark.parametrize("kernel_python", ["6.29"], indirect=True)`.
- `awf_kernel`: a fresh kernel on that venv with `%load_ext awf_nb` done (shut down after).

Browser tests (marker `browser`):
- `jupyterlab`: a JupyterLab server on 127.0.0.1 serving a temp folder (one per module);
  `lab`: the same, shutting down the test's kernels and undoing its settings afterwards.
- `chromium`: Debian's /usr/bin/chromium driven headless by Playwright (one per module; the
  tests skip with a reason only when that binary is missing).
- `page`: a fresh browser page; when the test fails, a screenshot, the page's console and
  its widget traffic (`page.kernel_frames`) go to `test-artifacts/`.

Heavy imports (jupyter_client, playwright) happen inside the fixtures, so tests in this
folder that use none of them do not need those packages.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.jupyterlab import JupyterLabServer
from tests.support.kernels import (
    REPO_ROOT,
    KernelSession,
    ensure_kernel_venv,
    installed_version,
    kernel_session,
)

KERNEL_SERIES = ("6.29", "7.4")
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "test-artifacts"


# ---------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class KernelPython:
    """The python of a kernel venv and the ipykernel it really has."""

    series: str
    python: Path
    ipykernel: str

    @property
    def has_subshells(self) -> bool:
        return int(self.ipykernel.split(".")[0]) >= 7


@pytest.fixture(scope="session")
def kernel_venvs() -> dict[str, Path]:
    """The python of every kernel venv; missing ones are built side by side (pip mostly
    waits on the network, so two builds take about as long as one)."""
    with ThreadPoolExecutor(max_workers=len(KERNEL_SERIES)) as pool:
        return dict(zip(KERNEL_SERIES, pool.map(ensure_kernel_venv, KERNEL_SERIES), strict=True))


@pytest.fixture(scope="session", params=KERNEL_SERIES, ids=lambda s: f"ipykernel-{s}")
def kernel_python(request: pytest.FixtureRequest, kernel_venvs: dict[str, Path]) -> KernelPython:
    series = str(request.param)
    python = kernel_venvs[series]
    version = installed_version(python, "ipykernel")
    assert version.startswith(f"{series}."), f"{python} has ipykernel {version}, not {series}.*"
    return KernelPython(series, python, version)


@pytest.fixture
def awf_kernel(kernel_python: KernelPython, tmp_path: Path) -> Iterator[KernelSession]:
    """A fresh kernel (cwd and AWF storage in tmp_path) with `%load_ext awf_nb` done."""
    with kernel_session(kernel_python.python, tmp_path) as kernel:
        loaded = kernel.execute("%load_ext awf_nb", timeout=60)
        assert loaded.status == "ok", f"%load_ext awf_nb failed: {loaded.reply['content']}"
        yield kernel


# ---------------------------------------------------------------------------- browser


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Keep each phase's report on the item so the `page` fixture knows the test failed.
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLabServer]:
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    env = {"AWF_STORAGE": str(home / "awf-storage")}
    with JupyterLabServer(root, home, env=env) as server:
        yield server


@pytest.fixture
def lab(jupyterlab: JupyterLabServer) -> Iterator[JupyterLabServer]:
    """The module's JupyterLab; the kernels a test started are shut down after it."""
    yield jupyterlab
    jupyterlab.shut_down_kernels()
    jupyterlab.reset_lab_settings()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Playwright `Browser` on Debian's chromium (never Playwright's download)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (CI installs it: .ci/system-packages)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


class KernelFrames:
    """The kernel websocket frames of a page that concern widgets (comm messages), with the
    time and direction of each: what reached the kernel, and when."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.frames: list[tuple[float, str, str]] = []

    def watch(self, socket: Any) -> None:
        socket.on("framesent", lambda payload: self._record("sent", payload))
        socket.on("framereceived", lambda payload: self._record("received", payload))

    def _record(self, direction: str, payload: str | bytes) -> None:
        text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
        if '"comm_' in text or (direction == "sent" and "subshell" in text):
            self.frames.append((time.monotonic() - self.started, direction, text))

    def sent_comm_messages(self) -> list[str]:
        return [text for _, direction, text in self.frames if direction == "sent"]

    def dump(self) -> str:
        return "\n".join(
            f"{at:8.3f} {direction:8} {_frame_summary(text)}" for at, direction, text in self.frames
        )


def _frame_summary(text: str) -> str:
    fields = []
    for name in ("msg_type", "subshell_id", "method", "event", "value", "execution_state"):
        found = re.search(rf'"{name}"\s*:\s*("(?:[^"\\]|\\.)*"|null|true|false)', text)
        if found:
            fields.append(f"{name}={found.group(1)[:60]}")
    return " ".join(fields) or text[:120]


@pytest.fixture
def page(chromium: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page; `page.kernel_frames` logs its widget traffic (a `KernelFrames`)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    console: list[str] = []
    frames = KernelFrames()
    page.kernel_frames = frames
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.on("websocket", frames.watch)
    try:
        yield page
    finally:
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            _save_failure_artifacts(page, request.node.name, console, frames)
        context.close()


def _save_failure_artifacts(
    page: Any, test_name: str, console: list[str], frames: KernelFrames
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    stem = re.sub(r"[^\w.-]+", "_", test_name)
    try:
        page.screenshot(path=str(ARTIFACTS / f"{stem}.png"), full_page=True)
    except Exception as error:  # the page may be gone; the logs are still useful
        console.append(f"(no screenshot: {error})")
    (ARTIFACTS / f"{stem}.console.txt").write_text("\n".join(console))
    (ARTIFACTS / f"{stem}.frames.txt").write_text(frames.dump())


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    """An IPython shell (no kernel) with the awf extension loaded, shared by a module."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("awf_nb")
    yield ip


# Names the `%%awf` / `%awf` tests bind in the shell's namespace (`--out NAME`, `_awf`): the
# shell is shared by a module, so each test starts without the previous test's handles.
BOUND_NAMES = ("_awf", "h", "chat", "result", "recorded", "replayed")


@pytest.fixture
def ip(shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The module's shell working in `tmp_path`, with its own run store and no handles left
    by an earlier test; `autoawait` is back on afterwards for a test that turned it off."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "storage"))
    monkeypatch.delenv("AWF_NO_INTERACTIVE", raising=False)
    for name in BOUND_NAMES:
        shell.user_ns.pop(name, None)
    yield shell
    shell.autoawait = True
