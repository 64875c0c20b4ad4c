"""Recorded runs (cassettes): record every provider turn and person message of a run to a
JSON Lines file, and replay a run from it without any model.

This is a wrapper around the provider seam, not engine code: recording wraps the providers
a run's factory makes (and its input reader); replay replaces the factory with one that
serves the file. The pieces: `tape.py` (the file format, fingerprints, reading, writing),
`record.py` (`Recorder`), `replay.py` (`Replayer`).

    recorder = Recorder("run.cassette.jsonl", workflow="chat", masker=masker)
    providers = recorder.providers(provider_factory())
    ...
    replayer = Replayer("run.cassette.jsonl", workflow="chat", masker=masker, speed=0)
    providers = replayer.providers()            # no real provider is ever made

`open_cassette` builds the one a run asked for; `cassette_of(factory)` finds it again
(through the factory it wrapped) once a frontend has chosen the run's input reader. A
replayed run's result says what of the cassette the replay did not use and which turns did
not match (`RunResult.replay`, made by `PreparedRun.replay_report`).
"""

from __future__ import annotations

import os

from awf_nb.engine.ports import ProviderFactory
from awf_nb.errors import UserError
from awf_nb.providers.cassette.record import Recorder, RecordingProviders
from awf_nb.providers.cassette.replay import Replayer, ReplayProviders, Unused, check_speed
from awf_nb.providers.cassette.tape import (
    FORMAT,
    VERSION,
    CassetteError,
    CassetteMismatch,
    read_cassette,
)
from awf_nb.secrets import Masker

__all__ = [
    "FORMAT",
    "VERSION",
    "CassetteError",
    "CassetteMismatch",
    "Recorder",
    "Replayer",
    "Unused",
    "cassette_of",
    "check_speed",
    "open_cassette",
    "read_cassette",
]


def open_cassette(
    *,
    record: str | os.PathLike[str] | None,
    replay: str | os.PathLike[str] | None,
    speed: float,
    workflow: str,
    masker: Masker,
) -> Recorder | Replayer | None:
    """The recorder or replayer a run asked for (None for neither). Errors before the run
    starts: both asked, a bad speed, a cassette that cannot be written or read."""
    check_speed(speed)
    if record is not None and replay is not None:
        raise UserError("record and replay cannot be used together: choose one")
    if record is not None:
        return Recorder(record, workflow=workflow, masker=masker)
    if replay is not None:
        return Replayer(replay, workflow=workflow, masker=masker, speed=speed)
    return None


def cassette_of(factory: ProviderFactory) -> Recorder | Replayer | None:
    """The cassette a run's provider factory records to or replays from, if any."""
    if isinstance(factory, RecordingProviders | ReplayProviders):
        return factory.cassette
    return None
