"""The `local` provider against the real SmolLM2-135M model (marker `real_model`).

Replies are kept short (max_tokens <= 24) and every test shares the process-wide model
cache, so the model is loaded once per context size for the whole session.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from awf_nb.engine.ports import Final, Message, ModelLoad, Notice, TextDelta, TurnRequest, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers import local
from awf_nb.providers.local import LocalProvider, cached_model, default_model_path

pytestmark = pytest.mark.real_model

SYSTEM = "You are a helpful assistant."
SHORT = {"max_tokens": 16}


async def run_turn(provider: LocalProvider, prompt: str, **kwargs: object) -> list[object]:
    turn = TurnRequest(prompt=prompt, **kwargs)  # type: ignore[arg-type]
    return [event async for event in provider.stream(turn)]


def only(events: list[object], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def final_text(events: list[object]) -> str:
    finals = only(events, Final)
    assert len(finals) == 1 and events[-1] is finals[0]
    return finals[0].text


async def test_single_turn_streams_deltas_and_final_is_their_concatenation() -> None:
    events = await run_turn(
        LocalProvider(), "Tell me a story about a cat.", system_prompt=SYSTEM, options=SHORT
    )
    deltas = only(events, TextDelta)
    assert len(deltas) >= 3
    assert final_text(events) == "".join(d.text for d in deltas)
    [usage] = only(events, Usage)
    assert not usage.estimated
    assert usage.input_tokens > 10
    assert 0 < usage.output_tokens <= 16
    assert events.index(usage) > events.index(deltas[-1])  # deltas, Usage, then Final


async def test_text_and_token_counts_match_llama_cpp_chat_completion() -> None:
    """The GGUF's chat template, sampling (but for the repeat penalty) and counts are
    llama-cpp-python's own."""
    events = await run_turn(LocalProvider(), "Say hi.", system_prompt=SYSTEM, options=SHORT)
    model = cached_model(default_model_path())
    assert model is not None
    with model.lock:
        direct = model.llama.create_chat_completion(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hi."}],
            max_tokens=16,
            seed=local.DEFAULT_SEED,
            repeat_penalty=local.DEFAULT_REPEAT_PENALTY,
        )
    [usage] = only(events, Usage)
    assert final_text(events) == direct["choices"][0]["message"]["content"]
    assert usage.input_tokens == direct["usage"]["prompt_tokens"]
    assert usage.output_tokens == direct["usage"]["completion_tokens"]


async def test_a_reply_that_ends_by_itself_is_counted_without_the_end_token() -> None:
    events = await run_turn(LocalProvider(), "Say hi.", options={"max_tokens": 200})
    model = cached_model(default_model_path())
    assert model is not None
    with model.lock:
        direct = model.llama.create_chat_completion(
            [{"role": "user", "content": "Say hi."}],
            max_tokens=200,
            seed=local.DEFAULT_SEED,
            repeat_penalty=local.DEFAULT_REPEAT_PENALTY,
        )
    assert direct["choices"][0]["finish_reason"] == "stop"
    [usage] = only(events, Usage)
    assert usage.output_tokens == direct["usage"]["completion_tokens"] < 200


async def test_same_seed_gives_the_same_reply() -> None:
    provider = LocalProvider()
    options = {"max_tokens": 12, "temperature": 1.0, "seed": 7}
    first = final_text(await run_turn(provider, "Name a colour.", options=options))
    second = final_text(await run_turn(provider, "Name a colour.", options=options))
    assert first == second


async def test_conversation_keeps_history() -> None:
    provider = LocalProvider()
    history: list[Message] = []
    inputs: list[int] = []
    for prompt in ["My name is Ada.", "What is my name?", "Spell it."]:
        events = await run_turn(
            provider, prompt, system_prompt=SYSTEM, history=list(history), options=SHORT
        )
        inputs.append(only(events, Usage)[0].input_tokens)
        history += [Message("user", prompt), Message("assistant", final_text(events))]
    assert inputs[0] < inputs[1] < inputs[2]


async def test_long_conversation_is_trimmed_to_the_context_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept: list[list[Message]] = []
    real_fit = local.fit_to_window

    def spy_fit(messages, budget, count_tokens):  # type: ignore[no-untyped-def]
        result = real_fit(messages, budget, count_tokens)
        kept.append(result[0])
        return result

    monkeypatch.setattr(local, "fit_to_window", spy_fit)
    filler = "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    history: list[Message] = []
    for n in range(12):  # ~45 tokens a message: well past a 512-token window
        history += [Message("user", f"Question {n}: {filler}"), Message("assistant", filler)]
    options = {"context_window": 512, "max_tokens": 16}
    events = await run_turn(
        LocalProvider(), "Summarise.", system_prompt=SYSTEM, history=history, options=options
    )

    [notice] = only(events, Notice)
    assert notice.truncated_turns > 0
    assert "512" in notice.message
    assert final_text(events)
    [usage] = only(events, Usage)
    assert usage.input_tokens <= 512 - 16
    sent = kept[-1]
    assert sent[0] == Message("system", SYSTEM)
    assert sent[-1] == Message("user", "Summarise.")
    body = sent[1:-1]
    assert len(body) == 2 * (12 - notice.truncated_turns)
    assert [m.role for m in body] == ["user", "assistant"] * (len(body) // 2)
    assert body[0].content.startswith(f"Question {notice.truncated_turns}:")


async def test_a_growing_conversation_keeps_working_past_the_window() -> None:
    # A small window keeps this quick: once trimming starts every turn re-reads the prompt.
    provider = LocalProvider()
    history: list[Message] = []
    options = {"context_window": 256, "max_tokens": 8}
    truncated: list[int] = []
    for n in range(4):  # ~90 tokens an exchange: the window is full from the third turn
        prompt = f"Turn {n}. " + "Tell me about the river and its old stone bridges. " * 7
        events = await run_turn(
            provider, prompt, system_prompt=SYSTEM, history=list(history), options=options
        )
        assert final_text(events)
        assert only(events, Usage)[0].input_tokens <= 256 - 8
        truncated.append(sum(notice.truncated_turns for notice in only(events, Notice)))
        history += [Message("user", prompt), Message("assistant", final_text(events))]
    assert truncated[0] == 0
    assert truncated[-1] > 0
    assert truncated == sorted(truncated)  # more is dropped as the conversation grows


async def test_short_conversation_is_not_trimmed() -> None:
    history = [Message("user", "Hello."), Message("assistant", "Hi!")]
    events = await run_turn(
        LocalProvider(), "How are you?", history=history, options={"context_window": 512, **SHORT}
    )
    assert only(events, Notice) == []


async def test_prompt_that_cannot_fit_is_a_clear_error() -> None:
    huge_system = "Always answer politely and with great care. " * 80
    with pytest.raises(ProviderError) as caught:
        await run_turn(
            LocalProvider(),
            "Hi.",
            system_prompt=huge_system,
            options={"context_window": 512, **SHORT},
        )
    message = str(caught.value)
    assert message.startswith("local: the prompt needs ")
    assert "options.context_window is 512" in message


async def test_cancel_stops_generation_quickly_and_the_model_stays_usable() -> None:
    provider = LocalProvider()
    deltas: list[str] = []
    third_delta = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(TurnRequest(prompt="Tell me a long story.")):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
                if len(deltas) == 3:
                    third_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(third_delta.wait(), timeout=30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    model = cached_model(default_model_path())
    assert model is not None and not model.lock.locked()  # the worker has stopped
    # Generation stopped within a token of the cancel: the model evaluated the prompt and
    # about as many tokens as were streamed (a default reply would run to 512 tokens).
    prompt_tokens = model.count_tokens([Message("user", "Tell me a long story.")])
    assert model.llama.n_tokens - prompt_tokens <= len(deltas) + 2

    events = await run_turn(provider, "Say hi.", options=SHORT)
    assert final_text(events)
    assert events == await run_turn(LocalProvider(), "Say hi.", options=SHORT)


async def test_closing_the_stream_stops_generation() -> None:
    stream = LocalProvider().stream(TurnRequest(prompt="Tell me a long story."))
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    await stream.aclose()
    model = cached_model(default_model_path())
    assert model is not None and not model.lock.locked()  # the worker has stopped
    # Generation stopped within a token or two of the close (a default reply would run on).
    prompt_tokens = model.count_tokens([Message("user", "Tell me a long story.")])
    assert model.llama.n_tokens - prompt_tokens <= 3


async def test_aclose_stops_a_running_turn_with_an_error() -> None:
    provider = LocalProvider()
    stream = provider.stream(TurnRequest(prompt="Tell me a long story."))
    assert isinstance(await anext(stream), TextDelta)
    await provider.aclose()
    with pytest.raises(ProviderError, match="turn stopped: the provider was closed"):
        async for _ in stream:
            pass


async def test_instances_share_one_loaded_model(monkeypatch: pytest.MonkeyPatch) -> None:
    await run_turn(LocalProvider(), "Say hi.", options=SHORT)
    loaded = cached_model(default_model_path())
    assert loaded is not None

    def no_second_load(*args: object) -> None:
        raise AssertionError("the model was loaded again")

    monkeypatch.setattr(local, "_load_model", no_second_load)
    await run_turn(LocalProvider(), "Say hello.", options=SHORT)
    assert cached_model(default_model_path()) is loaded


async def test_relative_model_path_is_resolved_against_the_working_dir(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smol.gguf").symlink_to(default_model_path())
    events = await run_turn(
        LocalProvider(),
        "Say hi.",
        options={"model": "models/smol.gguf", **SHORT},
        working_dir=tmp_path,
    )
    assert final_text(events)
    assert cached_model(tmp_path / "models" / "smol.gguf") is cached_model(default_model_path())


async def test_concurrent_turns_take_turns_on_the_model() -> None:
    prompts = ["Say hi.", "Name a fruit."]
    alone = [final_text(await run_turn(LocalProvider(), p, options=SHORT)) for p in prompts]
    together = await asyncio.gather(*(run_turn(LocalProvider(), p, options=SHORT) for p in prompts))
    assert [final_text(events) for events in together] == alone


async def test_event_loop_keeps_running_during_load_and_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Loading and generating must happen in worker threads, never on the loop's thread,
    # and the loop must run other tasks between the streamed pieces.
    loop_thread = threading.get_ident()
    load_threads: list[int] = []
    real_load = local._load_model

    def spy_load(*args: object, **kwargs: object) -> object:
        load_threads.append(threading.get_ident())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(local, "_load_model", spy_load)
    order: list[str] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.001)
            order.append("tick")

    tick_task = asyncio.create_task(ticker())
    provider = LocalProvider()
    # A context size no other test uses, so this turn loads the model as well.
    request = TurnRequest(
        prompt="Tell me a story.", options={"context_window": 1024, "max_tokens": 24}
    )
    async for event in provider.stream(request):
        if isinstance(event, TextDelta):
            order.append("delta")
    stop.set()
    await tick_task
    assert load_threads and loop_thread not in load_threads, "the model loaded on the loop"
    first, last = order.index("delta"), len(order) - 1 - order[::-1].index("delta")
    assert "tick" in order[:first], "the loop was blocked while the model loaded"
    assert "tick" in order[first:last], "the loop was blocked while the reply was generated"


async def test_a_broken_gguf_file_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), "Hi.", options={"model": str(broken)})
    assert str(caught.value).startswith(f"local: cannot load model {broken}")
    assert "\n" not in str(caught.value)


async def test_a_model_in_use_is_not_freed() -> None:
    await run_turn(LocalProvider(), "Say hi.", options=SHORT)
    model = cached_model(default_model_path())
    assert model is not None
    with model.lock:
        local.clear_model_cache()
        assert cached_model(default_model_path()) is model
        assert not model.closed


async def test_clearing_the_cache_frees_models_and_they_load_again() -> None:
    options = {"context_window": 256, "max_tokens": 8}
    before = final_text(await run_turn(LocalProvider(), "Say hi.", options=options))
    model = cached_model(default_model_path(), 256)
    assert model is not None
    assert local.clear_model_cache() >= 1
    assert model.closed
    assert cached_model(default_model_path(), 256) is None
    after = final_text(await run_turn(LocalProvider(), "Say hi.", options=options))
    assert after == before
    assert cached_model(default_model_path(), 256) is not model


async def test_threads_option_applies_to_the_shared_model() -> None:
    events = await run_turn(LocalProvider(), "Say hi.", options={"threads": 1, **SHORT})
    assert final_text(events)
    model = cached_model(default_model_path())
    assert model is not None and model.threads == 1
    await run_turn(LocalProvider(), "Say hi.", options=SHORT)
    assert model.threads == local.parse_options({}).thread_count


async def test_the_turn_that_loads_the_model_says_so_before_its_reply() -> None:
    options = {"max_tokens": 4, "context_window": 1152}  # a size no other test loads
    local.clear_model_cache()
    events = await run_turn(LocalProvider(), "Hi", options=options)
    loads = only(events, ModelLoad)
    assert [(e.model, e.done) for e in loads] == [
        (default_model_path().name, False),
        (default_model_path().name, True),
    ]
    assert loads[1].seconds > 0
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta | Final))
    assert events.index(loads[1]) < first_text
    again = await run_turn(LocalProvider(), "Hi", options=options)
    assert only(again, ModelLoad) == []


async def test_output_format_json_holds_the_reply_to_a_json_object() -> None:
    """A small model asked for JSON wraps it in prose or writes code instead; the step's
    `output_format: json` makes llama.cpp's grammar allow nothing but a JSON object."""
    prompt = "Write a Python function that adds two numbers."
    events = await run_turn(
        LocalProvider(), prompt, output_format="json", options={"max_tokens": 64}
    )
    text = final_text(events)
    assert text.lstrip().startswith("{"), text
    free = await run_turn(LocalProvider(), prompt, options={"max_tokens": 64})
    assert not final_text(free).lstrip().startswith("{")  # what the grammar prevents


async def test_json_schema_holds_the_reply_to_that_shape() -> None:
    import json

    schema = {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}, "summary": {"type": "string"}},
        "required": ["approved", "summary"],
    }
    events = await run_turn(
        LocalProvider(),
        "Linter report: All checks passed!\nIs the code approved? Answer in JSON.",
        options={"max_tokens": 80, "json_schema": schema},
    )
    verdict = json.loads(final_text(events))
    assert set(verdict) == {"approved", "summary"}
    assert isinstance(verdict["approved"], bool) and isinstance(verdict["summary"], str)


async def test_a_json_schema_llama_cpp_cannot_convert_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match=r"^local: options.json_schema is not supported"):
        await run_turn(
            LocalProvider(), "Hi", options={"max_tokens": 8, "json_schema": {"type": "nonsense"}}
        )
