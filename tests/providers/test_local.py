"""The `local` provider against the real SmolLM2-135M model (marker `real_model`).

Replies are kept short (max_tokens <= 24) and every test shares the model process (and
its model cache), so the model is loaded once per context size for the whole session.
The crashes, hangs and kills of that process are in test_local_process.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, ModelLoad, Notice, TextDelta, TurnRequest, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers import local
from awf_nb.providers.local import LocalProvider, default_model_path
from awf_nb.providers.local_process import shared_process
from tests.support.waiting import until

pytestmark = pytest.mark.real_model

SYSTEM = "You are a helpful assistant."
SHORT = {"max_tokens": 16}


@pytest.fixture(scope="module")
def direct() -> Iterator[Any]:
    """llama-cpp-python called by hand, in this process, on the same model and threads as
    the model process: what the provider's replies are compared with."""
    import os

    from llama_cpp import Llama

    llama = Llama(
        model_path=str(default_model_path()),
        n_ctx=local.DEFAULT_CONTEXT_WINDOW,
        n_threads=os.cpu_count() or 1,
        n_threads_batch=os.cpu_count() or 1,
        seed=local.DEFAULT_SEED,
        verbose=False,
    )
    yield llama
    llama.close()


async def model_status() -> dict[str, Any]:
    """The model process's own account, once no turn runs there any more."""
    process = shared_process()
    await until(lambda: process.request("status")["running"] == 0, "the turn to stop")
    return process.request("status")


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


async def test_text_and_token_counts_match_llama_cpp_chat_completion(direct: Any) -> None:
    """The GGUF's chat template, sampling (but for the repeat penalty) and counts are
    llama-cpp-python's own."""
    events = await run_turn(LocalProvider(), "Say hi.", system_prompt=SYSTEM, options=SHORT)
    expected = direct.create_chat_completion(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hi."}],
        max_tokens=16,
        seed=local.DEFAULT_SEED,
        repeat_penalty=local.DEFAULT_REPEAT_PENALTY,
    )
    [usage] = only(events, Usage)
    assert final_text(events) == expected["choices"][0]["message"]["content"]
    assert usage.input_tokens == expected["usage"]["prompt_tokens"]
    assert usage.output_tokens == expected["usage"]["completion_tokens"]


async def test_a_reply_that_ends_by_itself_is_counted_without_the_end_token(direct: Any) -> None:
    events = await run_turn(LocalProvider(), "Say hi.", options={"max_tokens": 200})
    expected = direct.create_chat_completion(
        [{"role": "user", "content": "Say hi."}],
        max_tokens=200,
        seed=local.DEFAULT_SEED,
        repeat_penalty=local.DEFAULT_REPEAT_PENALTY,
    )
    assert expected["choices"][0]["finish_reason"] == "stop"
    [usage] = only(events, Usage)
    assert usage.output_tokens == expected["usage"]["completion_tokens"] < 200


async def test_a_reply_cut_at_max_tokens_says_so_and_one_that_ends_does_not() -> None:
    cut = await run_turn(LocalProvider(), "Tell me a long story.", options={"max_tokens": 4})
    assert only(cut, Final)[0].cut is True
    ended = await run_turn(LocalProvider(), "Say hi.", options={"max_tokens": 200})
    assert only(ended, Final)[0].cut is False


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


async def test_long_conversation_is_trimmed_to_the_context_window() -> None:
    filler = "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    history: list[Message] = []
    for n in range(12):  # ~45 tokens a message: well past a 512-token window
        history += [Message("user", f"Question {n}: {filler}"), Message("assistant", filler)]
    options = {"context_window": 512, "max_tokens": 16}
    events = await run_turn(
        LocalProvider(), "Summarise.", system_prompt=SYSTEM, history=history, options=options
    )

    [notice] = only(events, Notice)
    assert 0 < notice.truncated_turns < 12
    assert "512" in notice.message
    assert final_text(events)
    [usage] = only(events, Usage)
    assert usage.input_tokens <= 512 - 16
    # What was kept is the newest exchanges (which ones: providers/history.py's own tests).


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
    await asyncio.wait_for(third_delta.wait(), timeout=60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Generation stopped within a token or two of the cancel: the model evaluated the
    # prompt and about as many tokens as were streamed (a default reply would run to 512).
    last = (await model_status())["last"]
    assert last["evaluated"] - last["prompt_tokens"] <= len(deltas) + 3

    events = await run_turn(provider, "Say hi.", options=SHORT)
    assert final_text(events)
    assert events == await run_turn(LocalProvider(), "Say hi.", options=SHORT)


async def test_closing_the_stream_stops_generation() -> None:
    stream = LocalProvider().stream(TurnRequest(prompt="Tell me a long story."))
    first = await anext(stream)
    while not isinstance(first, TextDelta):
        first = await anext(stream)
    await stream.aclose()
    # Generation stopped within a few tokens of the close (a default reply would run on).
    last = (await model_status())["last"]
    assert last["evaluated"] - last["prompt_tokens"] <= 4


async def test_aclose_stops_a_running_turn_with_an_error() -> None:
    provider = LocalProvider()
    stream = provider.stream(TurnRequest(prompt="Tell me a long story."))
    while not isinstance(await anext(stream), TextDelta):
        pass
    await provider.aclose()
    with pytest.raises(ProviderError, match="turn stopped: the provider was closed"):
        async for _ in stream:
            pass


async def test_instances_share_one_loaded_model() -> None:
    await run_turn(LocalProvider(), "Say hi.", options=SHORT)
    pid = shared_process().pid
    again = await run_turn(LocalProvider(), "Say hello.", options=SHORT)
    assert only(again, ModelLoad) == []  # not loaded again
    assert shared_process().pid == pid


async def test_relative_model_path_is_resolved_against_the_working_dir(tmp_path: Path) -> None:
    await run_turn(LocalProvider(), "Say hi.", options=SHORT)  # the bundled model, loaded
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smol.gguf").symlink_to(default_model_path())
    events = await run_turn(
        LocalProvider(),
        "Say hi.",
        options={"model": "models/smol.gguf", **SHORT},
        working_dir=tmp_path,
    )
    assert final_text(events)
    assert only(events, ModelLoad) == []  # the same file: the model already loaded


async def test_concurrent_turns_take_turns_on_the_model() -> None:
    prompts = ["Say hi.", "Name a fruit."]
    alone = [final_text(await run_turn(LocalProvider(), p, options=SHORT)) for p in prompts]
    together = await asyncio.gather(*(run_turn(LocalProvider(), p, options=SHORT) for p in prompts))
    assert [final_text(events) for events in together] == alone


async def test_event_loop_keeps_running_during_load_and_generation() -> None:
    # Loading and generating happen in the model process: the loop runs other tasks
    # between the streamed pieces and while the model loads.
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
        elif isinstance(event, ModelLoad):
            order.append("loaded" if event.done else "loading")
    stop.set()
    await tick_task
    first, last = order.index("delta"), len(order) - 1 - order[::-1].index("delta")
    if "loading" in order:
        load = order[order.index("loading") : order.index("loaded")]
        assert "tick" in load, "the loop was blocked while the model loaded"
    assert "tick" in order[first:last], "the loop was blocked while the reply was generated"


async def test_a_broken_gguf_file_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ProviderError) as caught:
        await run_turn(LocalProvider(), "Hi.", options={"model": str(broken)})
    assert str(caught.value).startswith(f"local: cannot load model {broken}")
    assert "\n" not in str(caught.value)


async def test_a_model_in_use_is_not_freed() -> None:
    provider = LocalProvider()
    options = {"max_tokens": 64, "context_window": 640}  # a size no other test loads
    stream = provider.stream(TurnRequest(prompt="Tell me a long story.", options=options))
    while not isinstance(await anext(stream), TextDelta):
        pass
    shared_process().request("clear")  # while it generates
    rest = [event async for event in stream]
    assert isinstance(rest[-1], Final)
    again = await run_turn(provider, "Say hi.", options={**options, "max_tokens": 4})
    assert only(again, ModelLoad) == []  # it was kept


async def test_clearing_the_cache_frees_models_and_they_load_again() -> None:
    options = {"context_window": 256, "max_tokens": 8}
    before = final_text(await run_turn(LocalProvider(), "Say hi.", options=options))
    assert shared_process().request("clear")["freed"] >= 1
    events = await run_turn(LocalProvider(), "Say hi.", options=options)
    assert [e.done for e in only(events, ModelLoad)] == [False, True]  # loaded again
    assert final_text(events) == before


async def test_threads_option_applies_to_the_shared_model() -> None:
    events = await run_turn(LocalProvider(), "Say hi.", options={"threads": 1, **SHORT})
    assert final_text(events)
    assert final_text(await run_turn(LocalProvider(), "Say hi.", options=SHORT))


async def test_the_turn_that_loads_the_model_says_so_before_its_reply() -> None:
    options = {"max_tokens": 4, "context_window": 1152}  # a size no other test loads
    shared_process().request("clear")
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
