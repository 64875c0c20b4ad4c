"""The provider registry: maps a step's `provider:` name to the class that runs its turns.

Providers are named by lazy "module:Class" strings so that nothing heavy (httpx,
llama_cpp, subprocess plumbing) is imported until a run actually uses that provider.
The engine gets a `ProviderFactory` from `provider_factory()`: it creates each provider
once per run (so a run's steps share its state, e.g. its hold on the event loop's HTTP
client). The factory does not close them: the run's `ProviderSet` (engine/run.py) owns
their lifetime and closes each once when the run ends.

    factory = provider_factory()
    provider = factory("openai")          # the same instance as factory("openai_compatible")
    ...
    await provider.aclose()               # what the run's ProviderSet does at its end
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from typing import TYPE_CHECKING

from awf_nb.errors import AwfSystemError, Problem, UserError

if TYPE_CHECKING:
    from awf_nb.engine.ports import Provider
    from awf_nb.workflow.model import Workflow

__all__ = [
    "RunProviders",
    "available_providers",
    "canonical_provider_name",
    "create_provider",
    "provider_factory",
    "register_provider",
]

_PROVIDERS: dict[str, str | type] = {
    "scripted": "awf_nb.providers.scripted:ScriptedProvider",
    "openai_compatible": "awf_nb.providers.openai_compatible:OpenAICompatibleProvider",
    "local": "awf_nb.providers.local:LocalProvider",
    "claude": "awf_nb.providers.cli.claude:ClaudeProvider",
    "gemini": "awf_nb.providers.cli.gemini:GeminiProvider",
    "codex": "awf_nb.providers.cli.codex:CodexProvider",
    "opencode": "awf_nb.providers.cli.opencode:OpencodeProvider",
    "github_copilot": "awf_nb.providers.cli.copilot:CopilotProvider",
    "mistral_vibe": "awf_nb.providers.cli.mistral_vibe:MistralVibeProvider",
    "acp": "awf_nb.providers.acp:AcpProvider",
}

_ALIASES: dict[str, str] = {
    "openai": "openai_compatible",
    "copilot": "github_copilot",
}

# What to install when a provider's module cannot be imported for lack of a dependency.
_INSTALL_HINTS: dict[str, str] = {
    "local": "install the local extra: pip install 'awf-nb[local]'",
    "acp": "install the acp extra: pip install 'awf-nb[acp]'",
}


def available_providers() -> list[str]:
    """The canonical provider names, sorted (aliases such as `openai` are not listed)."""
    return sorted(_PROVIDERS)


def canonical_provider_name(name: str) -> str:
    """The registry name behind `name` (`openai` -> `openai_compatible`).

    Raises `UserError` for an unknown name, with the available names and a did-you-mean.
    """
    if name in _PROVIDERS:
        return name
    if name in _ALIASES:
        return _ALIASES[name]
    raise _unknown_provider(name)


def register_provider(name: str, target: str | type) -> None:
    """Add (or replace) a provider: `target` is a class or a lazy "module:Class" string."""
    if not name or not name.strip():
        raise UserError("provider name must not be empty")
    if isinstance(target, str) and ":" not in target:
        raise UserError(f'provider "{name}": target must look like "module:Class" (got {target!r})')
    _ALIASES.pop(name, None)
    _PROVIDERS[name] = target


def create_provider(name: str) -> Provider:
    """A new provider instance for `name` (one per run: it may hold connections).

    The class is called with the canonical name (`Provider(name)`), or without arguments
    when its constructor takes none.
    """
    canonical = canonical_provider_name(name)
    provider_class = _load_class(canonical, _PROVIDERS[canonical])
    return _instantiate(provider_class, canonical)


class RunProviders:
    """A `ProviderFactory` for one run: one instance per provider (the engine's per-run
    `ProviderSet` owns their lifetime and closes them).

    Aliases share their canonical provider's instance, so `openai` and
    `openai_compatible` steps in one run are one provider.
    """

    def __init__(self) -> None:
        self._instances: dict[str, Provider] = {}

    def __call__(self, name: str) -> Provider:
        canonical = canonical_provider_name(name)
        if canonical not in self._instances:
            self._instances[canonical] = create_provider(canonical)
        return self._instances[canonical]


def provider_factory() -> RunProviders:
    """A fresh per-run factory (a `ProviderFactory` that caches one instance per name)."""
    return RunProviders()


def _load_class(name: str, target: str | type) -> type:
    if isinstance(target, type):
        return target
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise AwfSystemError(
                f'provider "{name}" is not installed (module {module_name} is missing)'
            ) from exc
        raise AwfSystemError(
            f'provider "{name}" cannot be loaded: missing Python package "{exc.name}"',
            hint=_INSTALL_HINTS.get(name),
        ) from exc
    try:
        return getattr(module, class_name)
    except AttributeError as exc:
        raise AwfSystemError(
            f'provider "{name}" cannot be loaded: {module_name} has no {class_name}'
        ) from exc


def _instantiate(provider_class: type, name: str) -> Provider:
    """`provider_class(name)`; a class that serves one fixed name may take no argument."""
    try:
        parameters = inspect.signature(provider_class).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature: use the documented form
        return provider_class(name)
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    takes_name = any(
        p.kind in positional or p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters
    )
    return provider_class(name) if takes_name else provider_class()


def _unknown_provider(name: str) -> UserError:
    known = available_providers()
    candidates = {n.lower(): n for n in [*known, *_ALIASES]}
    close = difflib.get_close_matches(name.strip().lower(), list(candidates), n=1, cutoff=0.6)
    hint = f'did you mean "{candidates[close[0]]}"?' if close else None
    return UserError(f'unknown provider "{name}" (available: {", ".join(known)})', hint=hint)


def provider_problems(workflow: Workflow) -> list[Problem]:
    """Agent steps naming a provider that does not exist (checked before anything runs).

    A provider given as a template (`{{.inputs.provider}}`) is checked when the step runs.
    """
    from awf_nb.workflow.checks import locate
    from awf_nb.workflow.model import AgentStep

    problems: list[Problem] = []
    for name, step in workflow.steps.items():
        if not isinstance(step, AgentStep):
            continue
        named = [(step.provider, f"states.{name}.provider")]
        partner = step.conversation.partner if step.conversation else None
        if partner is not None and partner.provider:
            named.append((partner.provider, f"states.{name}.conversation.with.provider"))
        for provider, path in named:
            if "{{" in provider:
                continue
            try:
                canonical_provider_name(provider.strip())
            except UserError as exc:
                line, column = locate(workflow.locations, path)
                file = str(workflow.source_path or "")
                problems.append(
                    Problem(
                        exc.message, path=path, file=file, line=line, column=column, hint=exc.hint
                    )
                )
    return problems
