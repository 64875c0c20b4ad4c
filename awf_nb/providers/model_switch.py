"""One switch from the bundled model to a real one: `--model SPEC`, `AWF_MODEL=SPEC` or
`model="SPEC"` runs every `provider: local` step — with its conversation partners and a
simulated user on `local` — on another model, without editing the workflow.

The example workflows say `provider: local`, which runs the small model bundled with
awf-nb: enough to try the tool offline, not for answers that have to be good. A person
with Ollama, an OpenAI-compatible server (llama.cpp, vLLM, LM Studio), an API key or an
agent CLI names it once:

    ollama:NAME[@URL]          Ollama's OpenAI-compatible API, http://localhost:11434/v1 by
                               default (`ollama:qwen2.5:7b`)
    openai:NAME[@URL]          OpenAI (key from $OPENAI_API_KEY), or any OpenAI-compatible
                               server at URL or $OPENAI_BASE_URL
    NAME@URL                   the same as openai:NAME@URL: a llama.cpp / vLLM / LM Studio
                               server (`qwen2.5-7b@http://127.0.0.1:8080/v1`)
    PATH.gguf, local:PATH      another GGUF file for the `local` provider
    claude[:MODEL], gemini[:MODEL], codex[:MODEL], opencode[:MODEL], copilot[:MODEL]
                               an agent CLI (its own default model without :MODEL)
    local                      the bundled model (undoes an AWF_MODEL set elsewhere)

A switched step keeps the options that mean the same thing to the model it now runs on
(`temperature`, `top_p`, `seed`, `tool_choice` for a server; all but `model` for another
GGUF; none for an agent CLI, which takes no sampling options). The bundled model's limits
and llama.cpp settings (`max_tokens`, `context_window`, `repeat_penalty`, `json_schema`,
…) stay behind: they are sized for a 135M model, and a reply-length limit written for it
would cut a reasoning model off before it answers. Steps that name another provider are
not touched.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from awf_nb.engine.ports import Provider, ProviderEvent, ProviderFactory, TurnRequest
from awf_nb.errors import UserError

__all__ = [
    "MODEL_VARIABLE",
    "ModelChoice",
    "SwitchedProviders",
    "parse_model",
    "switch_model",
]

MODEL_VARIABLE = "AWF_MODEL"  # the environment variable that sets the switch
SWITCHED = "local"  # the provider the switch replaces
OLLAMA_URL = "http://localhost:11434/v1"
OPENAI_URL = "https://api.openai.com/v1"
# What a step's options for the bundled model mean to the provider it is switched to.
_SERVER_OPTIONS = frozenset({"temperature", "top_p", "seed", "tool_choice"})
_CLI_PROVIDERS = {
    "claude": "claude",
    "gemini": "gemini",
    "codex": "codex",
    "opencode": "opencode",
    "copilot": "github_copilot",
    "github_copilot": "github_copilot",
}
_SERVER_PREFIXES = ("ollama", "openai", "openai_compatible")
_PREFIXES = (*_SERVER_PREFIXES, "local", *_CLI_PROVIDERS)


@dataclass(frozen=True)
class ModelChoice:
    """What `local` steps run on instead of the bundled model."""

    spec: str  # as the person wrote it, for display
    provider: str  # the registry name that answers: openai_compatible, local, claude, …
    options: dict[str, Any] = field(default_factory=dict)  # set on every switched turn
    kind: Literal["server", "gguf", "cli"] = "server"

    def step_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """A switched step's options: what it set that still applies, then the choice's."""
        if self.kind == "gguf":
            kept = {k: v for k, v in given.items() if k != "model"}
        elif self.kind == "server":
            kept = {k: v for k, v in given.items() if k in _SERVER_OPTIONS}
        else:
            kept = {}
        return {**kept, **self.options}

    def describe(self, provider: str) -> str:
        """How a step's provider reads in a step header: `local → ollama:llama3.2`."""
        return f"{provider} → {self.spec}" if provider == SWITCHED else provider


def parse_model(spec: str, env: Mapping[str, str] | None = None) -> ModelChoice | None:
    """The choice `spec` names (None for `local`, the bundled model), or a `UserError`.

    `env` supplies $OPENAI_BASE_URL for `openai:NAME` without a URL."""
    text = spec.strip()
    if not text:
        raise _bad(spec, "it is empty")
    if text == SWITCHED:
        return None
    prefix, sep, rest = text.partition(":")
    if sep and prefix in _PREFIXES:
        if prefix == "local":
            if not rest.strip():
                raise _bad(spec, "local:PATH needs the path of a .gguf file")
            return ModelChoice(text, "local", {"model": rest.strip()}, "gguf")
        if prefix in _CLI_PROVIDERS:
            options = {"model": rest.strip()} if rest.strip() else {}
            return ModelChoice(text, _CLI_PROVIDERS[prefix], options, "cli")
        return _server(text, prefix, rest, env)
    if text in _CLI_PROVIDERS:
        return ModelChoice(text, _CLI_PROVIDERS[text], {}, "cli")
    if text.endswith(".gguf"):
        return ModelChoice(text, "local", {"model": text}, "gguf")
    if "@" in text:  # NAME@URL; NAME may hold colons itself (qwen2.5:7b@http://…)
        return _server(text, "openai", text, env)
    if "://" in text:
        raise _bad(spec, "a server needs a model name too: NAME@URL")
    close = difflib.get_close_matches(prefix.lower(), _PREFIXES, n=1, cutoff=0.75)
    if sep and close:
        raise _bad(spec, f'unknown kind "{prefix}": did you mean "{close[0]}:{rest}"?')
    raise _bad(
        spec,
        "say what runs it: ollama:NAME, openai:NAME, NAME@URL (an OpenAI-compatible "
        "server), a .gguf file, local:PATH, or an agent CLI (" + ", ".join(_CLI_PROVIDERS) + ")",
    )


def _server(spec: str, prefix: str, rest: str, env: Mapping[str, str] | None) -> ModelChoice:
    name, at, url = rest.rpartition("@") if "@" in rest else (rest, "", "")
    name, url = name.strip(), url.strip()
    if not name:
        raise _bad(spec, "the model name is missing (e.g. ollama:llama3.2)")
    if at and not url.startswith(("http://", "https://")):
        raise _bad(spec, f"the server address must start with http:// or https:// (got {url!r})")
    options: dict[str, Any] = {"model": name}
    if url:
        options["base_url"] = url
    elif prefix == "ollama":
        options["base_url"] = OLLAMA_URL
    elif not (env or {}).get("OPENAI_BASE_URL", "").strip():
        options["base_url"] = OPENAI_URL  # else the provider reads $OPENAI_BASE_URL itself
    return ModelChoice(spec, "openai_compatible", options, "server")


def _bad(spec: str, why: str) -> UserError:
    return UserError(
        f"model {spec!r}: {why}",
        hint="e.g. --model ollama:llama3.2, openai:gpt-4o-mini, "
        "NAME@http://127.0.0.1:8080/v1, path/to/model.gguf or claude (docs/providers.md)",
    )


class SwitchedProvider:
    """Runs the turns of `local` steps on the chosen model's provider."""

    name = SWITCHED

    def __init__(self, inner: Provider, choice: ModelChoice) -> None:
        self.inner = inner
        self.choice = choice
        self.session_kind = inner.session_kind

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        options = self.choice.step_options(turn.options)
        async for event in self.inner.stream(dataclasses.replace(turn, options=options)):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


class SwitchedProviders:
    """A `ProviderFactory` that answers `local` with the chosen model and every other
    name as `factory` does (one instance per name, like the factory it wraps)."""

    def __init__(
        self,
        factory: ProviderFactory,
        choice: ModelChoice,
        canonical: Callable[[str], str] | None = None,
    ) -> None:
        self._factory = factory
        self.choice = choice
        self._canonical = canonical or (lambda name: name)
        self._switched: SwitchedProvider | None = None

    def __call__(self, name: str) -> Provider:
        if self._canonical(name) != SWITCHED:
            return self._factory(name)
        if self._switched is None:
            self._switched = SwitchedProvider(self._factory(self.choice.provider), self.choice)
        return self._switched

    def describe(self, provider: str) -> str:
        return self.choice.describe(provider)


def switch_model(factory: ProviderFactory, choice: ModelChoice | None) -> ProviderFactory:
    """`factory`, with `local` steps on `choice` (unchanged when there is none)."""
    if choice is None:
        return factory
    from awf_nb.providers import canonical_provider_name

    return SwitchedProviders(factory, choice, canonical_provider_name)
