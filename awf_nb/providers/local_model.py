"""The bundled model's generation code: what runs inside the model process.

`local_worker.py` runs this module in a child process of awf (never in the caller's
process: llama.cpp is native code, and a crash in it must not take a Jupyter kernel, the
CLI or an eval down with it). `local.py` is the provider the engine talks to; it sends
each turn here as a `Job` and streams back the events `run_turn` emits.

Loaded models are cached per process (keyed by file and context size) and shared by every
turn the process serves. Each turn runs in a thread of the model process; a model's `lock`
lets one turn at a time tokenize and generate, and a cancelled turn stops within one token.

Why one module: the model cache, the generation loop and the `LoadedModel` share the same
locks (a freed model is loaded again under the turn's lock); what stands alone already
lives beside it (local_tools.py, history.py, the worker's protocol in local_worker.py).
"""

from __future__ import annotations

import atexit
import json
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from awf_nb.engine.ports import (
    Final,
    Message,
    ModelLoad,
    Notice,
    ProviderEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from awf_nb.errors import ProviderError
from awf_nb.providers import local_tools
from awf_nb.providers.history import fit_to_window

NAME = "local"
DEFAULT_CONTEXT_WINDOW = 2048
DEFAULT_SEED = 1234
# Without options.max_tokens a reply runs until the model stops or the window is full, but a
# small model that never stops should not fill a 2048-token window with noise.
MAX_TOKENS_CAP = 512
# The key of the JSON-object grammar in a model's grammar cache (the others are schemas).
JSON_OBJECT = "json-object"


@dataclass(frozen=True)
class TurnOptions:
    """What generation needs of a step's `options:`, checked already (by `LocalOptions` in
    local.py, awf's side): plain values, so the model process starts without pydantic."""

    context_window: int
    thread_count: int
    reply_reserve: int
    tool_choice: str
    json_schema: dict[str, Any] | None
    max_tokens: int | None
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    repeat_penalty: float
    frequency_penalty: float
    presence_penalty: float
    seed: int


if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar
    from llama_cpp.llama_chat_format import ChatFormatterResponse, Jinja2ChatFormatter
    from llama_cpp.llama_types import ChatCompletionRequestMessage, CreateCompletionStreamResponse


# --- the process-wide model cache ------------------------------------------------------------


@dataclass(eq=False)
class LoadedModel:
    """A llama.cpp model with its chat template; one generation at a time (`lock`)."""

    llama: Llama
    formatter: Jinja2ChatFormatter
    path: Path
    n_ctx: int
    threads: int
    load_seconds: float
    # llama.cpp contexts are not thread-safe: hold this for tokenizing and generating.
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False  # set (under `lock`) by clear_model_cache
    grammars: dict[str, LlamaGrammar] = field(default_factory=dict)  # forced tool calls

    @property
    def native_tools(self) -> bool:
        """Whether the model's chat template renders tools itself."""
        return local_tools.template_knows_tools(self.formatter.template)

    def render(
        self, messages: list[Message], tools: list[ToolSpec] | None = None
    ) -> ChatFormatterResponse:
        """The prompt text in the model's own chat template, with its stop strings; the
        tools (offered to the model this turn) in the template's form or described in
        the system prompt (`local_tools`)."""
        tools = tools or []
        native = self.native_tools
        extra: dict[str, Any] = {}
        if native and tools:
            extra["tools"] = [local_tools.wire_tool(t) for t in tools]
        if native or tools or any(m.tool_calls or m.role == "tool" for m in messages):
            rendered = local_tools.template_messages(messages, tools, native=native)
        else:  # the plain chat, as before tools existed
            rendered = [{"role": m.role, "content": m.content} for m in messages]
        try:
            # the OpenAI message shape llama.cpp's typed dicts describe
            messages_in = cast("list[ChatCompletionRequestMessage]", rendered)
            return self.formatter(messages=messages_in, **extra)
        except Exception as exc:  # a Jinja template error or the template's raise_exception
            raise ProviderError(
                NAME, f"the chat template of {self.path.name} rejected the conversation: {exc}"
            ) from None

    def prompt_tokens(self, rendered: ChatFormatterResponse, suffix: str = "") -> list[int]:
        # Tokenized exactly as llama-cpp-python's chat handlers do, so the count is the
        # number of tokens the model evaluates.
        return self.llama.tokenize(
            (rendered.prompt + suffix).encode("utf-8"),
            add_bos=not rendered.added_special,
            special=True,
        )

    def count_tokens(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> int:
        return len(self.prompt_tokens(self.render(messages, tools)))

    def fit(
        self, messages: list[Message], budget: int, tools: list[ToolSpec] | None = None
    ) -> tuple[list[Message], int]:
        """Drop the oldest exchanges until the rendered prompt fits `budget` tokens."""
        bare: dict[str, int] = {}

        def bare_tokens(message: Message) -> int:
            if message.content not in bare:
                encoded = message.content.encode("utf-8")
                tokens = self.llama.tokenize(encoded, add_bos=False, special=True)
                bare[message.content] = len(tokens)
            return bare[message.content]

        def count(candidate: list[Message]) -> int:
            # The template only adds markup around each message, so when the bare contents
            # already exceed the budget there is no need to render: this keeps trimming a
            # long chat linear instead of re-rendering it once per dropped exchange.
            lower_bound = sum(bare_tokens(m) for m in candidate)
            return lower_bound if lower_bound > budget else self.count_tokens(candidate, tools)

        return fit_to_window(messages, budget, count)

    def grammar(
        self,
        schema: dict[str, Any],
        *,
        prop_order: tuple[str, ...] = ("name", "arguments"),
        failure: str = "cannot force a tool call: a tool's parameters schema",
    ) -> LlamaGrammar:
        """The llama.cpp grammar of a JSON Schema, made once per schema per model.
        `failure` starts the error when the converter cannot handle the schema."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self.grammars:
            from llama_cpp import LlamaGrammar
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            try:
                rules = json_schema_to_gbnf(key, prop_order=list(prop_order))
            except Exception as exc:  # a schema feature the converter does not know
                raise ProviderError(
                    NAME,
                    f"{failure} is not supported by llama.cpp's grammar converter ({exc})",
                ) from None
            self.grammars[key] = LlamaGrammar.from_string(rules, verbose=False)
        return self.grammars[key]

    def json_grammar(self, schema: dict[str, Any] | None = None) -> LlamaGrammar:
        """The grammar of a reply that is JSON: an object matching `schema`
        (`options.json_schema`), or any JSON object (`output_format: json`)."""
        if schema is not None:
            return self.grammar(schema, prop_order=(), failure="options.json_schema")
        if JSON_OBJECT not in self.grammars:
            from llama_cpp import LlamaGrammar
            from llama_cpp.llama_grammar import JSON_GBNF

            self.grammars[JSON_OBJECT] = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
        return self.grammars[JSON_OBJECT]

    def use_threads(self, threads: int) -> None:
        if threads != self.threads:
            import llama_cpp

            llama_cpp.llama_set_n_threads(self.llama.ctx, threads, threads)
            self.threads = threads


@dataclass(eq=False)
class _CacheSlot:
    model: LoadedModel | None = None
    # Per-slot so loading one model does not hold up turns on another.
    loading: threading.Lock = field(default_factory=threading.Lock)


_CACHE: dict[tuple[Path, int], _CacheSlot] = {}
_CACHE_LOCK = threading.Lock()


def get_model(path: Path, n_ctx: int, threads: int) -> LoadedModel:
    """The cached model for (path, n_ctx), loading it on first use. Blocking: call it from a
    worker thread."""
    path = Path(path).resolve()
    with _CACHE_LOCK:
        slot = _CACHE.setdefault((path, n_ctx), _CacheSlot())
    with slot.loading:
        if slot.model is None:
            slot.model = _load_model(path, n_ctx, threads)
        return slot.model


def cached_model(path: Path, n_ctx: int = DEFAULT_CONTEXT_WINDOW) -> LoadedModel | None:
    """The already loaded model for (path, n_ctx), if any."""
    with _CACHE_LOCK:
        slot = _CACHE.get((Path(path).resolve(), n_ctx))
    return slot.model if slot else None


def clear_model_cache() -> int:
    """Free every cached model not in use right now; returns how many were freed."""
    freed = 0
    with _CACHE_LOCK:
        for key, slot in list(_CACHE.items()):
            model = slot.model
            if model is None or not model.lock.acquire(blocking=False):
                continue
            try:
                model.closed = True
                model.llama.close()
                del _CACHE[key]
                freed += 1
            finally:
                model.lock.release()
    return freed


@contextmanager
def _locked_model(path: Path, n_ctx: int, threads: int) -> Iterator[LoadedModel]:
    """The cached model, held for one generation. A model freed by clear_model_cache between
    the lookup and the lock is loaded again."""
    for _ in range(3):
        model = get_model(path, n_ctx, threads)
        with model.lock:
            if not model.closed:
                yield model
                return
    raise ProviderError(NAME, f"model {path} was unloaded while this turn waited for it")


def _load_model(path: Path, n_ctx: int, threads: int) -> LoadedModel:
    from llama_cpp import Llama

    # Freed before interpreter shutdown: Llama.__del__ running after llama_cpp's module
    # globals are gone prints "TypeError: 'NoneType' object is not callable" on exit.
    atexit.unregister(clear_model_cache)
    atexit.register(clear_model_cache)
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    started = time.perf_counter()
    try:
        llama = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            seed=DEFAULT_SEED,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise ProviderError(NAME, f"cannot load model {path}: {exc}") from None
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        llama.close()
        raise ProviderError(
            NAME,
            f"model {path} has no chat template (tokenizer.chat_template): "
            "use an instruct/chat GGUF",
        )
    # The same formatter llama-cpp-python builds for the GGUF's template; rendering it here
    # lets us count the prompt's tokens before generating and trim the history to fit.
    eos, bos = llama.token_eos(), llama.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=_token_text(llama, eos),
        bos_token=_token_text(llama, bos),
        stop_token_ids=[eos],
    )
    return LoadedModel(
        llama=llama,
        formatter=formatter,
        path=path,
        n_ctx=n_ctx,
        threads=threads,
        load_seconds=time.perf_counter() - started,
    )


def _token_text(llama: Llama, token: int) -> str:
    return llama.detokenize([token], special=True).decode("utf-8") if token != -1 else ""


# --- one turn, in the worker thread ----------------------------------------------------------


@dataclass
class Job:
    messages: list[Message]
    options: TurnOptions
    model_path: Path  # resolved and checked by the provider
    tools: list[ToolSpec] = field(default_factory=list)
    output_format: str = ""  # "json": the reply is held to a JSON object by a grammar
    # How far the turn got, for the provider's `status()`: the prompt's tokens and every
    # token the model evaluated (a cancelled turn stops within one token of the cancel).
    prompt_tokens: int = 0
    evaluated: int = 0

    @property
    def offered(self) -> list[ToolSpec]:
        """The tools the model is told about this turn."""
        return self.tools if self.options.tool_choice != "none" else []

    @property
    def forced(self) -> list[ToolSpec]:
        """The tools one of which the model must call (none unless tool_choice forces)."""
        choice = self.options.tool_choice
        if not self.tools or choice in ("auto", "none"):
            return []
        forced = local_tools.forced_tools(self.tools, choice)
        if not forced:
            names = ", ".join(t.name for t in self.tools)
            raise ProviderError(
                NAME,
                f"options.tool_choice names {choice!r}, which is not a tool of this "
                f"step (its tools: {names})",
            )
        return forced


class _TokenWatch:
    """A llama.cpp stopping criterion: called after every sampled token, it stops generation
    as soon as the turn is cancelled and remembers how far generation got."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.evaluated = 0

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        self.evaluated = len(input_ids)
        return self.cancel.is_set()

    def generated(self, prompt_length: int, finish_reason: str | None) -> int:
        # Every sampled token but the last is evaluated, so sampled = evaluated - prompt + 1;
        # a "stop" finish sampled the end-of-turn token, which is not part of the reply.
        sampled = max(0, self.evaluated - prompt_length + 1)
        return max(0, sampled - 1) if finish_reason == "stop" else sampled


class Generating:
    """Emitted when the model is loaded and the turn starts evaluating its prompt: a crash
    after it happened while generating, before it while loading."""


GENERATING = Generating()
Emit = Callable[[ProviderEvent | Generating], None]


def run_turn(job: Job, emit: Emit, cancel: threading.Event) -> None:
    """One turn: load the model if needed, generate, `emit` every event (from this thread)."""
    options = job.options
    path = job.model_path
    forced = job.forced
    # The first turn in the process imports llama.cpp and loads the model: seconds on a
    # cold start, which the frontends show instead of a blank screen.
    loading = cached_model(path, options.context_window) is None
    started = time.perf_counter()
    if loading:
        emit(ModelLoad(path.name))
    from llama_cpp import StoppingCriteriaList

    with _locked_model(path, options.context_window, options.thread_count) as model:
        if loading:
            emit(ModelLoad(path.name, done=True, seconds=time.perf_counter() - started))
        if cancel.is_set():
            return
        emit(GENERATING)
        model.use_threads(options.thread_count)
        budget = options.context_window - options.reply_reserve
        messages, dropped = model.fit(job.messages, budget, job.offered)
        rendered = model.render(messages, job.offered)
        # A forced call: the reply starts inside `<tool_call>` and the grammar lets the
        # model write only `{"name": …, "arguments": …}` for one of the forced tools.
        suffix = f"{local_tools.CALL_OPEN}\n" if forced else ""
        grammar = model.grammar(local_tools.call_schema(forced)) if forced else None
        if (job.output_format == "json" or options.json_schema is not None) and not job.offered:
            # The step wants JSON (`output_format: json`, `options.json_schema`): llama.cpp's
            # grammar lets the model write nothing else, which a small model otherwise wraps
            # in prose or code (benchmarks/local_quality.py, task code_review). A turn that
            # offers tools is left free, so the model can still call them.
            grammar = model.json_grammar(options.json_schema)
        prompt = model.prompt_tokens(rendered, suffix)
        room = options.context_window - len(prompt)
        if room <= 0:
            raise ProviderError(
                NAME,
                f"the prompt needs {len(prompt)} tokens but options.context_window is "
                f"{options.context_window}: shorten the system prompt or message, "
                "or raise context_window",
            )
        watch = _TokenWatch(cancel)
        # stream=True: a generator of chunks (llama.cpp annotates both modes' union)
        chunks = cast(
            "Generator[CreateCompletionStreamResponse]",
            model.llama.create_completion(
                prompt=prompt,
                stream=True,
                stop=rendered.stop,
                stopping_criteria=StoppingCriteriaList(
                    [watch, *(rendered.stopping_criteria or [])]
                ),
                max_tokens=options.max_tokens or min(MAX_TOKENS_CAP, room),
                temperature=options.temperature,
                top_p=options.top_p,
                top_k=options.top_k,
                min_p=options.min_p,
                repeat_penalty=options.repeat_penalty,
                frequency_penalty=options.frequency_penalty,
                presence_penalty=options.presence_penalty,
                seed=options.seed,
                grammar=grammar,
            ),
        )
        # Only a turn that offers tools reads calls out of the text; a forced call is not
        # text at all. Other turns stream every piece as it comes (the hot path).
        scanner = local_tools.CallScanner() if job.offered and not forced else None
        parts: list[str] = []
        shown: list[str] = []
        finish_reason: str | None = None
        try:
            for chunk in chunks:
                if cancel.is_set():
                    return
                choice = chunk["choices"][0]
                if text := choice["text"]:
                    parts.append(text)
                    if scanner is not None:
                        if visible := scanner.feed(text):
                            shown.append(visible)
                            emit(TextDelta(visible))
                    elif not forced:
                        emit(TextDelta(text))
                finish_reason = choice["finish_reason"] or finish_reason
        finally:
            chunks.close()
            job.prompt_tokens, job.evaluated = len(prompt), watch.evaluated
        if cancel.is_set():
            return
    calls: list[ToolCall] = []
    if forced:
        reply, calls = "", _forced_call("".join(parts), finish_reason)
    elif scanner is not None:
        rest, calls = scanner.finish()
        if rest:  # held back as a possible `<tool_call>`, or text around the calls
            emit(TextDelta(rest))
        reply = "".join(shown) + rest
    else:
        reply = "".join(parts)
    for call in calls:
        emit(call)
    emit(Usage(len(prompt), watch.generated(len(prompt), finish_reason), estimated=False))
    if dropped:
        emit(_truncation_notice(dropped, options.context_window))
    emit(Final(reply, cut=finish_reason == "length"))


def _forced_call(text: str, finish_reason: str | None) -> list[ToolCall]:
    """The one call a grammar-forced reply holds (the grammar makes it well-formed unless
    max_tokens cut it short)."""
    found = local_tools.parse_calls(f"{local_tools.CALL_OPEN}\n{text}")[1]
    if len(found) != 1:
        cut = " (cut short by max_tokens)" if finish_reason == "length" else ""
        raise ProviderError(NAME, f"the forced tool call is not a complete call{cut}: {text!r}")
    return found


def _truncation_notice(dropped: int, context_window: int) -> Notice:
    exchanges = "exchange" if dropped == 1 else "exchanges"
    return Notice(
        message=(
            f"context window full: dropped the {dropped} oldest {exchanges} of the conversation "
            f"to fit options.context_window={context_window} tokens"
        ),
        truncated_turns=dropped,
    )
