"""Nothing silent: awf logs what a person would not see otherwise (`awf_nb.logs`).

- a frontend (event sink) that raises on every event: one warning on stderr, the run goes
  on and completes; its traceback at debug level (`AWF_LOG=debug`, `--debug`);
- a provider that fails to close: shown by `--verbose` (and its traceback by `--debug`),
  not by default;
- the generation thread of a local model's turn that was stopped, failing afterwards: a
  debug message instead of nothing.

Scripts run in a fresh interpreter, so that what reaches stderr is what a person sees.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from awf_nb.errors import UserError
from awf_nb.logs import level_from_env

ROOT = Path(__file__).resolve().parents[1]
SECRET = "pw-9d8c7b6a5f4e"

STEPS = """
name: three
states:
  initial: one
  one: {type: command, command: "echo one", on_success: two}
  two: {type: command, command: "echo two", on_success: three}
  three: {type: command, command: "echo three", on_success: done}
  done: {type: terminal}
"""


def python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "three.yaml").write_text(STEPS)
    environment = {k: v for k, v in os.environ.items() if k != "AWF_LOG"}
    environment.update({"PYTHONPATH": str(ROOT), "DB_PASSWORD": SECRET, **env})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


BROKEN_FRONTEND = """
    import os
    import awf_nb

    class Broken:
        def emit(self, event):
            raise RuntimeError("cannot draw with " + os.environ["DB_PASSWORD"])

    result = awf_nb.run("three.yaml", sink=Broken(), storage=False)
    print("status", result.status, result.outputs["three"])
"""


def test_a_frontend_failing_on_every_event_is_reported_once(tmp_path: Path) -> None:
    shown = python(BROKEN_FRONTEND, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["status", "completed", "three"]
    reports = [line for line in shown.stderr.splitlines() if "frontend" in line]
    assert len(reports) == 1, shown.stderr
    assert "the frontend (Broken) failed to show an event (RunStarted" in reports[0]
    assert "RuntimeError: cannot draw with ***" in reports[0]
    assert SECRET not in shown.stderr
    assert "Traceback" not in shown.stderr


def test_awf_log_debug_adds_the_frontend_s_traceback(tmp_path: Path) -> None:
    shown = python(BROKEN_FRONTEND, tmp_path, AWF_LOG="debug")
    assert shown.returncode == 0, shown.stderr
    assert "awf: warning: awf_nb.engine.run: run " in shown.stderr  # debug names the logger
    assert "Traceback (most recent call last)" in shown.stderr
    assert 'File "<string>", line 7, in emit\nRuntimeError: cannot draw with ***' in shown.stderr
    assert SECRET not in shown.stderr


FLAKY_PROVIDER = """
    import sys
    from awf_nb.frontends.cli import main
    from awf_nb.providers import register_provider
    from awf_nb.providers.scripted import ScriptedProvider

    class Flaky(ScriptedProvider):
        async def aclose(self):
            raise OSError("the socket was already gone")

    register_provider("flaky", Flaky)
    open("chat.yaml", "w").write(
        "name: chat\\nstates:\\n  initial: ask\\n"
        "  ask: {type: agent, provider: flaky, prompt: hi, options: {replies: [hello]},"
        " on_success: done}\\n  done: {type: terminal}\\n"
    )
    sys.exit(main([*sys.argv[1:], "run", "chat.yaml", "--storage", "runs"]))
"""


@pytest.mark.parametrize(
    ("flags", "env", "message", "traceback"),
    [
        ([], {}, False, False),
        (["--verbose"], {}, True, False),
        (["--debug"], {}, True, True),
        ([], {"AWF_LOG": "info"}, True, False),
    ],
    ids=["default", "verbose", "debug", "AWF_LOG=info"],
)
def test_a_provider_that_fails_to_close_is_logged(
    flags: list[str], env: dict[str, str], message: bool, traceback: bool, tmp_path: Path
) -> None:
    code = FLAKY_PROVIDER.replace("sys.argv[1:]", repr(flags))
    shown = python(code, tmp_path, **env)
    assert shown.returncode == 0, shown.stderr
    said = "closing provider flaky failed: OSError: the socket was already gone"
    lines = [line for line in shown.stderr.splitlines() if said in line]
    assert bool(lines) == message, shown.stderr
    assert all(line.startswith("awf: info: ") for line in lines), lines
    assert ("Traceback (most recent call last)" in shown.stderr) == traceback, shown.stderr


def test_a_bad_awf_log_is_refused_clearly() -> None:
    assert level_from_env({"AWF_LOG": "DEBUG"}) == logging.DEBUG
    assert level_from_env({}) is None
    with pytest.raises(UserError, match="AWF_LOG=loud: not a log level; use one of debug"):
        level_from_env({"AWF_LOG": "loud"})


async def test_the_model_process_s_death_is_logged_with_its_last_output(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """llama.cpp's last words (an assertion it failed) are on the model process's stderr:
    the log keeps them when the process dies, while the turn's error stays one line."""
    import sys

    from awf_nb.engine.ports import TurnRequest
    from awf_nb.errors import ProviderError
    from awf_nb.providers.local import LocalProvider
    from awf_nb.providers.local_process import ModelProcess

    dies = (
        "import os, signal, sys; sys.stdin.readline(); "
        "sys.stderr.write('GGML_ASSERT: ggml.c:42: the tensor is broken\\n'); sys.stderr.flush(); "
        "os.kill(os.getpid(), signal.SIGSEGV)"
    )
    process = ModelProcess([sys.executable, "-c", dies])
    caplog.set_level(logging.WARNING, logger="awf_nb.providers.local_process")
    try:
        with pytest.raises(ProviderError) as caught:
            async for _ in LocalProvider(process=process).stream(TurnRequest(prompt="hi")):
                pass
    finally:
        process.close()
    assert "\n" not in str(caught.value)
    [record] = [r for r in caplog.records if r.name == "awf_nb.providers.local_process"]
    assert "signal 11 (segmentation fault)" in record.getMessage()
    assert "GGML_ASSERT: ggml.c:42: the tensor is broken" in record.getMessage()


def test_loading_the_notebook_extension_reads_awf_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """`%load_ext awf_nb` in a notebook started with AWF_LOG=debug shows debug messages;
    a bad value is said once and keeps nothing from loading."""
    from IPython.core.interactiveshell import InteractiveShell

    from awf_nb.frontends.notebook.magic import load_ipython_extension

    logger = logging.getLogger("awf_nb")
    level, handlers = logger.level, list(logger.handlers)
    shell = InteractiveShell.instance()
    try:
        monkeypatch.setenv("AWF_LOG", "debug")
        load_ipython_extension(shell)
        assert logger.level == logging.DEBUG
        load_ipython_extension(shell)  # loaded again: still one handler
        assert [type(h).__name__ for h in logger.handlers].count("_Stderr") == 1
    finally:
        logger.setLevel(level)
        logger.handlers[:] = handlers


def test_a_bad_awf_log_does_not_keep_the_magics_away(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from awf_nb.frontends.notebook.magic import load_ipython_extension

    monkeypatch.setenv("AWF_LOG", "loud")
    shell = InteractiveShell.instance()
    load_ipython_extension(shell)
    assert "awf" in shell.magics_manager.magics["cell"]
    assert "AWF_LOG=loud: not a log level" in capsys.readouterr().err


def test_every_logger_of_the_package_is_under_awf_nb() -> None:
    """`AWF_LOG` and `--verbose` set the level of the `awf_nb` logger: a logger named
    otherwise would be outside them. (The MCP SDK's own `mcp` logger is taken over, not
    written to: its records are masked and passed on to `awf_nb.tools.mcp`.)"""
    import re

    call = re.compile(r"getLogger\(([^)]*)\)")
    names = {
        (str(path.relative_to(ROOT)), argument)
        for path in (ROOT / "awf_nb").rglob("*.py")
        for argument in call.findall(path.read_text())
    }
    outside = {
        (where, name)
        for where, name in names
        if name not in ("__name__", "LOGGER") and not name.startswith('"awf_nb')
    }
    # (The OpenTelemetry SDK's exporter loggers are quieted by awf_nb/traces/live.py, never
    # written to: a dead collector is said once, by awf, not at every failed export.)
    assert outside == {("awf_nb/tools/mcp_client.py", '"mcp"'), ("awf_nb/traces/live.py", "name")}
    assert ("awf_nb/logs.py", "LOGGER") in names
    from awf_nb.logs import LOGGER

    assert LOGGER == "awf_nb"
