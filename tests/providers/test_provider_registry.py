"""The provider registry: names, aliases, lazy loading, one instance per run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

import awf_nb.providers as registry
from awf_nb.engine.ports import Final, Provider, ProviderEvent, TurnRequest
from awf_nb.errors import EXIT_USER, AwfSystemError, UserError
from awf_nb.providers import (
    available_providers,
    canonical_provider_name,
    create_provider,
    provider_factory,
    register_provider,
)

BUILT_IN = [
    "acp",
    "claude",
    "codex",
    "gemini",
    "github_copilot",
    "local",
    "mistral_vibe",
    "openai_compatible",
    "opencode",
    "scripted",
]


class _Recorder:
    """A provider that records being closed (and can fail to close)."""

    session_kind = "history"
    closed: ClassVar[list[str]] = []

    def __init__(self, name: str) -> None:
        self.name = name

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        yield Final(turn.prompt)

    async def aclose(self) -> None:
        _Recorder.closed.append(self.name)
        if self.name == "broken":
            raise RuntimeError("cannot close")


@pytest.fixture(autouse=True)
def _restore_registry() -> Iterator[None]:
    providers, aliases = dict(registry._PROVIDERS), dict(registry._ALIASES)
    _Recorder.closed = []
    yield
    registry._PROVIDERS.clear()
    registry._PROVIDERS.update(providers)
    registry._ALIASES.clear()
    registry._ALIASES.update(aliases)


def test_available_providers_are_the_canonical_names() -> None:
    assert available_providers() == BUILT_IN


@pytest.mark.parametrize(
    ("name", "canonical"),
    [("openai", "openai_compatible"), ("copilot", "github_copilot"), ("claude", "claude")],
)
def test_aliases_resolve_to_their_provider(name: str, canonical: str) -> None:
    assert canonical_provider_name(name) == canonical


def test_unknown_provider_lists_the_available_ones_and_suggests_one() -> None:
    with pytest.raises(UserError) as caught:
        create_provider("claud")
    err = caught.value
    assert err.message == f'unknown provider "claud" (available: {", ".join(BUILT_IN)})'
    assert err.hint == 'did you mean "claude"?'
    assert err.exit_code == EXIT_USER


def test_did_you_mean_also_knows_aliases() -> None:
    with pytest.raises(UserError) as caught:
        canonical_provider_name("copilt")
    assert caught.value.hint == 'did you mean "copilot"?'


def test_unknown_provider_without_a_close_match_has_no_hint() -> None:
    with pytest.raises(UserError) as caught:
        canonical_provider_name("zzzzzz")
    assert caught.value.hint is None


def test_create_provider_passes_the_canonical_name() -> None:
    provider = create_provider("openai")
    assert type(provider).__name__ == "OpenAICompatibleProvider"
    assert provider.name == "openai_compatible"
    assert isinstance(provider, Provider)


def test_importing_the_registry_imports_no_provider_module() -> None:
    code = textwrap.dedent(
        """
        import sys
        import awf_nb.providers
        heavy = ["httpx", "httpx2", "httpx_sse", "llama_cpp", "awf_nb.providers.scripted",
                 "awf_nb.providers.openai_compatible", "awf_nb.providers.local"]
        print([name for name in heavy if name in sys.modules])
        awf_nb.providers.create_provider("scripted")
        print("awf_nb.providers.scripted" in sys.modules, "httpx2" in sys.modules)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
        check=True,
    )
    assert result.stdout.splitlines() == ["[]", "True False"]


async def test_factory_keeps_one_instance_per_provider_for_the_run() -> None:
    factory = provider_factory()
    first = factory("openai")
    assert factory("openai_compatible") is first
    assert factory("scripted") is not first
    assert provider_factory()("openai") is not first  # another run, another instance


async def test_the_run_set_closes_every_provider_once_even_when_one_fails() -> None:
    from awf_nb.engine.config import ProviderSet

    register_provider("broken", _Recorder)
    register_provider("fine", _Recorder)
    providers = ProviderSet(provider_factory())
    providers.get("broken")
    providers.get("fine")
    await providers.aclose()  # a provider failing to close does not stop the others
    assert _Recorder.closed == ["broken", "fine"]


def test_unknown_name_fails_in_the_factory_too() -> None:
    with pytest.raises(UserError, match='unknown provider "nope"'):
        provider_factory()("nope")


def test_a_missing_provider_module_is_a_clear_error() -> None:
    register_provider("ghost", "awf_nb.providers.ghost:GhostProvider")
    with pytest.raises(AwfSystemError) as caught:
        create_provider("ghost")
    assert str(caught.value) == (
        'provider "ghost" is not installed (module awf_nb.providers.ghost is missing)'
    )


def test_a_missing_dependency_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_dependency.py").write_text("import not_a_real_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    register_provider("needy", "needs_dependency:Needy")
    with pytest.raises(AwfSystemError, match='missing Python package "not_a_real_package_xyz"'):
        create_provider("needy")


def test_a_missing_class_is_a_clear_error() -> None:
    register_provider("classless", "awf_nb.providers.history:NoSuchProvider")
    with pytest.raises(AwfSystemError, match=r"awf_nb\.providers\.history has no NoSuchProvider"):
        create_provider("classless")


def test_register_provider_checks_its_target() -> None:
    with pytest.raises(UserError, match='must look like "module:Class"'):
        register_provider("odd", "just_a_module")
    with pytest.raises(UserError, match="must not be empty"):
        register_provider(" ", _Recorder)


def test_registering_over_an_alias_replaces_it() -> None:
    register_provider("openai", _Recorder)
    assert canonical_provider_name("openai") == "openai"
    assert isinstance(create_provider("openai"), _Recorder)


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_provider_loads_and_fits_the_protocol(name: str) -> None:
    provider = create_provider(name)
    assert isinstance(provider, Provider)
    assert provider.name == name
    assert provider.session_kind in ("history", "session_id")
