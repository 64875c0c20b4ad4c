"""A real run on the bundled SmolLM2 model, recorded, then replayed with no model at all
(marker `real_model`): the replay prints byte for byte what the model's run printed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from awf_nb.api import arun
from awf_nb.store import Store
from tests.support.cli import run_awf
from tests.support.events import Collect

pytestmark = pytest.mark.real_model

WORKFLOW = """
name: local-chat
states:
  initial: chat
  chat:
    type: agent
    provider: local
    mode: conversation
    system_prompt: You are a terse assistant.
    prompt: Name a colour.
    options: {max_tokens: 16, temperature: 0}
    on_success: done
  done: {type: terminal, message: "{{.states.chat.Output}}"}
"""

# Importing this instead of llama-cpp-python fails loudly: a replay must not load a model.
POISONED_LLAMA_CPP = 'raise RuntimeError("the replay imported llama_cpp")\n'


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'awf-nb[local]')")
    path = tmp_path / "local-chat.yaml"
    path.write_text(WORKFLOW)
    return path


def no_local_model(name: str) -> Any:
    raise AssertionError(f"the replay made a real provider: {name}")


@pytest.mark.asyncio
async def test_a_local_model_run_replays_identically_without_the_model(
    workflow: Path, tmp_path: Path
) -> None:
    store = Store(tmp_path / "storage")
    cassette = tmp_path / "local.cassette.jsonl"
    recorded_sink, replayed_sink = Collect(), Collect()
    recorded = await arun(
        workflow, replies=["Another one?", ""], record=cassette, storage=store, sink=recorded_sink
    )
    assert recorded.ok, recorded.error
    assert recorded.steps["chat"].conversation.total_turns == 2

    replayed = await arun(
        workflow, replay=cassette, providers=no_local_model, storage=store, sink=replayed_sink
    )

    assert replayed.ok, replayed.error
    assert replayed.outputs == recorded.outputs
    assert replayed.tokens == recorded.tokens
    assert replayed_sink.text() == recorded_sink.text() != ""
    assert not replayed.steps["chat"].tokens_estimated  # llama.cpp's own counts, replayed


def test_the_command_line_replays_a_local_model_run_byte_for_byte(
    workflow: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "local.cassette.jsonl"
    env = {"AWF_STORAGE": str(tmp_path / "storage"), "NO_COLOR": "1"}
    recorded = run_awf("run", str(workflow), "--reply", "Another one?", "--reply", "",
                       "--record", str(cassette), cwd=tmp_path, env=env, timeout=300)  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    poisoned = tmp_path / "poisoned"
    (poisoned / "llama_cpp").mkdir(parents=True)
    (poisoned / "llama_cpp" / "__init__.py").write_text(POISONED_LLAMA_CPP)

    replayed = run_awf("run", str(workflow), "--replay", str(cassette),
                       cwd=tmp_path, env=env, import_first=[poisoned], timeout=300)  # fmt: skip

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.encode() == recorded.stdout.encode()
    assert recorded.stdout.count("> ") == 2  # both messages shown, and the model's replies
