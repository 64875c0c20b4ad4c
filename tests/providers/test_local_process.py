"""The bundled model runs in a child process awf supervises: a crash, a hang or a kill of
that process fails the turn with a clear message, never the caller, and the next turn
starts a new process; the process never outlives its owner (markers `real_model`; the
edges of the protocol also against a stand-in process, which needs no model).

A native crash is made real: the model process gets SIGSEGV (what llama.cpp compiled for
the wrong CPU receives), once its reply has started.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from awf_nb.engine.ports import Final, ModelLoad, TextDelta, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers.local import LocalProvider
from awf_nb.providers.local_process import ModelProcess, how_it_ended, worker_environment
from tests.support.processes import model_processes, process_alive
from tests.support.waiting import until, wait_until

LONG = {"max_tokens": 400, "temperature": 0.8}
SHORT = {"max_tokens": 8, "temperature": 0}
CRASHED = (
    "the local model's process died: signal 11 (segmentation fault) while generating; "
    "see `awf doctor`"
)


@pytest.fixture
def own_process() -> ModelProcess:
    """A model process of the test's own, so killing it touches no other test's model."""
    process = ModelProcess()
    yield process
    process.close()


async def reply(provider: LocalProvider, prompt: str, options: dict[str, object]) -> str:
    events = [e async for e in provider.stream(TurnRequest(prompt=prompt, options=options))]
    return next(e.text for e in events if isinstance(e, Final))


# --- against the real model --------------------------------------------------------------


@pytest.mark.real_model
async def test_the_model_runs_in_a_child_process_not_in_the_caller() -> None:
    code = textwrap.dedent(
        """
        import asyncio, os, sys
        from awf_nb.engine.ports import Final, TurnRequest
        from awf_nb.providers.local import LocalProvider
        from awf_nb.providers.local_process import shared_process

        async def main():
            turn = TurnRequest(prompt="Say hi.", options={"max_tokens": 8})
            events = [e async for e in LocalProvider().stream(turn)]
            assert any(isinstance(e, Final) and e.text for e in events)
            print("llama_cpp" in sys.modules, shared_process().pid != os.getpid())

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


@pytest.mark.real_model
async def test_a_segfault_mid_reply_fails_the_turn_and_the_next_turn_works(
    own_process: ModelProcess,
) -> None:
    provider = LocalProvider(process=own_process)
    first_pid = None
    streamed: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(
            TurnRequest(prompt="Tell me a long story.", options=LONG)
        ):
            if isinstance(event, TextDelta):
                streamed.append(event.text)
                if first_pid is None:
                    first_pid = own_process.pid
                    assert first_pid is not None and first_pid != os.getpid()
                    os.kill(first_pid, signal.SIGSEGV)
    assert str(caught.value) == CRASHED
    assert streamed  # the reply had started
    assert not process_alive(first_pid)

    again = await reply(provider, "Say hi.", SHORT)
    assert again
    assert own_process.pid not in (None, first_pid)


@pytest.mark.real_model
async def test_a_crash_fails_every_turn_in_flight_and_each_says_so(own_process) -> None:
    provider = LocalProvider(process=own_process)
    await reply(provider, "Say hi.", SHORT)  # loaded

    async def one(prompt: str) -> BaseException | str:
        try:
            return await reply(provider, prompt, LONG)
        except ProviderError as error:
            return error

    tasks = [asyncio.create_task(one(p)) for p in ("Tell me a story.", "Tell me a tale.")]
    pid = own_process.pid
    await until(lambda: own_process.request("status")["running"] == 2, "both turns in the process")
    os.kill(pid, signal.SIGSEGV)
    results = await asyncio.gather(*tasks)
    messages = [str(r) for r in results]
    assert all(m.startswith("the local model's process died: signal 11") for m in messages)


@pytest.mark.real_model
async def test_a_hung_model_process_is_killed_after_a_cancel_and_replaced() -> None:
    process = ModelProcess(cancel_grace=0.5)
    try:
        provider = LocalProvider(process=process)
        stream = provider.stream(TurnRequest(prompt="Tell me a long story.", options=LONG))
        first = await anext(stream)
        while not isinstance(first, TextDelta):
            first = await anext(stream)
        hung = process.pid
        os.kill(hung, signal.SIGSTOP)  # stuck in native code: it never reads the cancel
        await stream.aclose()  # the turn is cancelled (Ctrl-C, a step timeout)
        await until(lambda: not process_alive(hung), "the hung process to be killed")
        assert await reply(provider, "Say hi.", SHORT)
        assert process.pid != hung
    finally:
        process.close()


@pytest.mark.real_model
def test_the_model_process_does_not_outlive_a_killed_owner(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys
        from awf_nb.engine.ports import TurnRequest
        from awf_nb.providers.local import LocalProvider
        from awf_nb.providers.local_process import shared_process

        async def main():
            turn = TurnRequest(prompt="Say hi.", options={"max_tokens": 4})
            [e async for e in LocalProvider().stream(turn)]
            print(shared_process().pid, flush=True)
            sys.stdin.read()  # wait to be killed

        asyncio.run(main())
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        model_pid = int(owner.stdout.readline())
        assert model_processes(owner.pid) == [model_pid]
        owner.kill()  # kill -9: no atexit, no cleanup of its own
        owner.wait()
        wait_until(lambda: not process_alive(model_pid), "the model process to exit by itself")
    finally:
        owner.kill()


@pytest.mark.real_model
async def test_the_model_process_gets_no_secret_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, own_process: ModelProcess
) -> None:
    monkeypatch.setenv("SHOP_API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("PLAIN_SETTING", "kept")
    await reply(LocalProvider(process=own_process), "Say hi.", SHORT)
    environ = Path(f"/proc/{own_process.pid}/environ").read_bytes().split(b"\0")
    assert b"PLAIN_SETTING=kept" in environ
    assert not any(b"sk-very-secret-value" in item for item in environ)


@pytest.mark.real_model
async def test_the_process_loads_the_model_once_for_every_provider(own_process) -> None:
    provider = LocalProvider(process=own_process)
    first = [e async for e in provider.stream(TurnRequest(prompt="Hi", options=SHORT))]
    pid = own_process.pid
    provider = LocalProvider(process=own_process)
    second = [e async for e in provider.stream(TurnRequest(prompt="Hi", options=SHORT))]
    assert [e.done for e in first if isinstance(e, ModelLoad)] == [False, True]
    assert not any(isinstance(e, ModelLoad) for e in second)
    assert own_process.pid == pid


# --- the protocol's edges, against a stand-in process -------------------------------------

STAND_IN = """
import json, os, signal, sys
for raw in sys.stdin:
    request = json.loads(raw)
    if request["op"] != "turn":
        continue
    out = sys.stdout
    if {phase!r}:
        out.write(json.dumps({{"id": request["id"], "phase": {phase!r}}}) + "\\n")
    out.write(json.dumps({{"id": request["id"], "event": "TextDelta", "data": {{"text": "Hel"}}}}) + "\\n")
    out.flush()
    {ending}
"""


def stand_in(phase: str, ending: str) -> ModelProcess:
    return ModelProcess([sys.executable, "-c", STAND_IN.format(phase=phase, ending=ending)])


async def test_a_death_before_generation_says_it_happened_while_loading() -> None:
    process = stand_in("", "os.kill(os.getpid(), signal.SIGSEGV)")
    try:
        with pytest.raises(ProviderError) as caught:
            await reply(LocalProvider(process=process), "Hi", {})
    finally:
        process.close()
    assert str(caught.value) == (
        "the local model's process died: signal 11 (segmentation fault) while loading the "
        "model; see `awf doctor`"
    )


async def test_an_exit_while_generating_says_its_status() -> None:
    process = stand_in("generating", "sys.exit(3)")
    try:
        with pytest.raises(ProviderError) as caught:
            await reply(LocalProvider(process=process), "Hi", {})
    finally:
        process.close()
    assert str(caught.value) == (
        "the local model's process died: exit status 3 while generating; see `awf doctor`"
    )


def test_how_a_process_ended_is_said_in_words() -> None:
    assert how_it_ended(-11) == "signal 11 (segmentation fault)"
    assert how_it_ended(-4) == "signal 4 (illegal instruction)"
    assert how_it_ended(-9) == "signal 9 (killed: out of memory, or stopped by hand)"
    assert how_it_ended(1) == "exit status 1"


def test_the_model_process_environment_drops_secret_names(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-2")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = worker_environment()
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert env["LANG"] == "C.UTF-8"
    import awf_nb

    assert str(Path(awf_nb.__file__).resolve().parents[1]) in env["PYTHONPATH"].split(os.pathsep)


def test_a_request_to_a_process_that_died_as_it_started_fails_at_once() -> None:
    """The race `awf doctor` met: the process looked alive when picked, then died (and its
    reader failed every request it had) before the request was added: it must fail at once
    with the crash, not wait for an answer nobody will send."""
    import sys

    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    process = ModelProcess([sys.executable, "-c", crash])
    try:
        child = process._current()
        wait_until(lambda: child.dead, "the reader to see the death")
        process._current = lambda: child  # type: ignore[method-assign]
        with pytest.raises(ProviderError, match=r"died: signal 11 .*while starting"):
            process.request("info", timeout=60)
    finally:
        process.close()
