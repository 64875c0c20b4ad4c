"""How an eval starts one run: the single adapter between the harness and the run set-up.

Every (case, epoch) is an ordinary awf run, started through the project's run set-up
(`awf_nb.runs.prepare_run`) and nothing else; this module is the one place in `awf_nb.evals`
that calls it, and the one place that reaches the provider registry and the cassette
package. When the set-up changes, this file changes, not the harness.

What it adds for an eval:
- the person's side: the case's simulated user, or the case's scripted `replies` (a reader
  that never answers a tool-call confirmation: `confirm` tools need `yes: true`);
- a cassette per run (record or replay), and for judges the same cassette, so a replayed
  eval needs no model at all;
- `--seed`: a sampling seed on every `local` / `openai_compatible` turn that does not set
  its own (the seed is given below the cassette, so it is not part of a turn's
  fingerprint);
- the eval's `limits` on top of the workflow's own (the smaller of each).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.engine.ports import Provider, ProviderEvent, ProviderFactory, TurnRequest
from awf_nb.errors import Problem, UserError
from awf_nb.workflow.model import Limits, Workflow

if TYPE_CHECKING:
    from awf_nb.engine.limits import CostLimit
    from awf_nb.engine.partner import SimulatedUser
    from awf_nb.engine.ports import EventSink
    from awf_nb.runs.setup import PreparedRun
    from awf_nb.store import Store
    from awf_nb.traces import TraceCost

# Providers whose options take a `seed` (`--seed` is best-effort for servers: a server may
# ignore it).
SEEDED_PROVIDERS = frozenset({"local", "openai_compatible"})

CassetteMode = Literal["record", "replay"]


@dataclasses.dataclass(frozen=True)
class CassetteUse:
    """The cassette of one run: recorded to `path`, or replayed from it."""

    mode: CassetteMode
    path: Path


class CaseReplies:
    """The person's side of a case with `replies`: each read takes the next message, then
    end of input. Not a `Confirmer`: a tool call that needs confirmation is refused (unless
    the eval says `yes: true`), never allowed by a scripted message."""

    def __init__(self, replies: Sequence[str]) -> None:
        self._replies = list(replies)

    async def read(self, prompt: str) -> str | None:
        await asyncio.sleep(0)  # a suspension point: cancellation can land here
        return self._replies.pop(0) if self._replies else None


class _SeededProvider:
    """A provider whose turns carry `seed` unless the step's options set one."""

    def __init__(self, inner: Provider, seed: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.seed = seed

    @property
    def session_kind(self) -> Literal["history", "session_id"]:
        return self.inner.session_kind

    def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        if "seed" not in turn.options:
            turn = dataclasses.replace(turn, options={**turn.options, "seed": self.seed})
        return self.inner.stream(turn)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _SeededFactory:
    """A run's provider factory (the registry's) that seeds the providers that take one."""

    def __init__(self, seed: int | None) -> None:
        from awf_nb.providers import provider_factory

        self._inner = provider_factory()
        self._seed = seed

    def __call__(self, name: str) -> Provider:
        from awf_nb.providers import canonical_provider_name

        provider = self._inner(name)
        if self._seed is not None and canonical_provider_name(name) in SEEDED_PROVIDERS:
            return _SeededProvider(provider, self._seed)
        return provider


def provider_problem(name: str) -> UserError | None:
    """The error for a provider name the registry does not know (with a did-you-mean)."""
    from awf_nb.providers import canonical_provider_name

    try:
        canonical_provider_name(name)
    except UserError as exc:
        return exc
    return None


def canonical_provider(name: str) -> str:
    """The registry's own name of provider `name` (an alias resolved)."""
    from awf_nb.providers import canonical_provider_name

    return canonical_provider_name(name)


def workflow_provider_problems(workflow: Workflow) -> list[Problem]:
    """The workflow's steps naming unknown providers (as `awf run` checks them)."""
    from awf_nb.providers import provider_problems

    return provider_problems(workflow)


def with_limits(workflow: Workflow, limits: Limits) -> Workflow:
    """`workflow` with the eval's `limits` on top of its own: the smaller of each (see
    `engine.limits.stricter`)."""
    from awf_nb.engine.limits import stricter

    merged = stricter(workflow.limits, limits)
    if merged is workflow.limits:
        return workflow
    return workflow.model_copy(update={"limits": merged})


def prepare_case_run(
    workflow: Workflow,
    inputs: Mapping[str, Any],
    *,
    store: Store | None,
    sink: EventSink | None = None,
    user: SimulatedUser | None = None,
    replies: Sequence[str] | None = None,
    cassette: CassetteUse | None = None,
    seed: int | None = None,
    yes: bool = False,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    otlp: str | None = None,
    trace_content: bool = False,
    trace_tags: Mapping[str, Any] | None = None,
    trace_cost: TraceCost | None = None,
    cost_limit: CostLimit | None = None,
) -> PreparedRun:
    """One (case, epoch), prepared on the headless session: ready to `await prepared.run()`.

    `replies` (the case's scripted messages) wins over `user`; with neither, a
    conversation with the person ends after its first reply (a headless run).
    """
    from awf_nb.runs import RunOptions, prepare_run

    options = RunOptions(
        inputs=inputs,
        reader=CaseReplies(replies) if replies is not None else None,
        sink=sink,
        storage=store if store is not None else False,
        providers=_SeededFactory(seed),
        cwd=cwd,
        env=env,
        user=None if replies is not None else user,
        record=cassette.path if cassette is not None and cassette.mode == "record" else None,
        replay=cassette.path if cassette is not None and cassette.mode == "replay" else None,
        yes=yes,
        otlp=otlp,
        trace_content=trace_content,
        trace_tags=dict(trace_tags or {}),
        trace_cost=trace_cost,
        cost_limit=cost_limit,
    )
    return prepare_run(workflow, options)


class ScoringProviders:
    """The providers the judges of one run use (one instance per name), closed together."""

    def __init__(self, factory: ProviderFactory) -> None:
        self._factory = factory
        self._instances: dict[str, Provider] = {}

    def __call__(self, name: str) -> Provider:
        if name not in self._instances:
            self._instances[name] = self._factory(name)
        return self._instances[name]

    async def aclose(self) -> None:
        instances, self._instances = self._instances, {}
        for provider in {id(p): p for p in instances.values()}.values():
            with contextlib.suppress(Exception):
                await provider.aclose()


def scoring_providers(prepared: PreparedRun, seed: int | None) -> ScoringProviders:
    """The providers a judge of this run uses: recorded into the run's cassette, served
    from it on replay (no model made), else new ones from the registry."""
    from awf_nb.providers.cassette import Recorder, Replayer, cassette_of

    cassette = cassette_of(prepared.runner.config.providers)
    if isinstance(cassette, Replayer):
        return ScoringProviders(cassette.providers())
    fresh = _SeededFactory(seed)
    if isinstance(cassette, Recorder):
        return ScoringProviders(cassette.providers(fresh))
    return ScoringProviders(fresh)


def cassette_providers(
    mode: str, path: Path, seed: int | None, *, env: Mapping[str, str], workflow: str
) -> ScoringProviders:
    """Judge providers outside a run (the pairwise judge): recorded to the cassette at
    `path` (made, with its folder), or served from it (`mode` "replay": no model made)."""
    from awf_nb.providers.cassette import Recorder, Replayer
    from awf_nb.secrets import Masker

    masker = Masker.from_sources({}, env)
    if mode == "replay":
        return ScoringProviders(Replayer(path, workflow=workflow, masker=masker).providers())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the cassette folder {path.parent}: {exc}") from None
    recorder = Recorder(path, workflow=workflow, masker=masker)
    return ScoringProviders(recorder.providers(_SeededFactory(seed)))


def unused_recording(prepared: PreparedRun) -> str:
    """What of a replayed run's cassette the replay (judges included) did not use, in
    words ("" when it used every turn and message, or was not replayed): a replay that
    went another way than the recording, which an eval counts as a mismatch."""
    from awf_nb.providers.cassette import Replayer, cassette_of

    cassette = cassette_of(prepared.runner.config.providers)
    if not isinstance(cassette, Replayer):
        return ""
    unused = cassette.unused
    return unused.describe() if unused else ""


def environment(env: Mapping[str, str] | None) -> dict[str, str]:
    return dict(os.environ if env is None else env)
