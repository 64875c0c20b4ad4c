"""The package's public face, pinned (as httpx pins its `__all__`): what `dir(awf_nb)`
shows, that every name there resolves, that the error family is exported, and that the
typed keywords of `run` / `arun` / `evaluate` say exactly what the functions take."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import typing

import pytest

import awf_nb

PUBLIC = [
    "AwfError",
    "AwfSystemError",
    "DefinitionError",
    "EvalResult",
    "ExecutionError",
    "InputError",
    "Pause",
    "PauseAnswer",
    "PauseStream",
    "ProviderError",
    "RunResult",
    "SimulatedUser",
    "UserError",
    "__version__",
    "aevaluate",
    "afork",
    "arun",
    "evaluate",
    "fork",
    "load",
    "load_ipython_extension",
    "run",
]


def test_dir_shows_the_public_names_and_only_them() -> None:
    assert dir(awf_nb) == PUBLIC
    assert sorted(awf_nb.__all__) == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(awf_nb, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'runn'"):
        awf_nb.runn  # noqa: B018


def test_the_error_family_is_exported_and_catchable_as_one() -> None:
    from awf_nb import errors

    for name in ("UserError", "InputError", "DefinitionError", "ExecutionError",
                 "ProviderError", "AwfSystemError"):  # fmt: skip
        exported = getattr(awf_nb, name)
        assert exported is getattr(errors, name)
        assert issubclass(exported, awf_nb.AwfError)
    with pytest.raises(awf_nb.AwfError):
        awf_nb.run("no-such-workflow.yaml", storage=False, show=False)


def test_import_awf_nb_loads_neither_the_errors_nor_the_engine() -> None:
    code = "import sys, awf_nb; print(sorted(m for m in sys.modules if m.startswith('awf_nb')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['awf_nb', 'awf_nb._version']"


def test_the_run_keywords_are_the_run_options() -> None:
    from awf_nb.runs.options import RunKeywords, RunOptions

    fields = {f.name for f in dataclasses.fields(RunOptions)} - {"inputs"}
    assert set(RunKeywords.__annotations__) == fields
    for function in (awf_nb.run, awf_nb.arun):
        keywords = inspect.signature(function).parameters
        assert list(keywords) == ["workflow", "inputs", "show", "options"]
        assert "Unpack[RunKeywords]" in str(keywords["options"].annotation)


def test_the_eval_keywords_are_aevaluates() -> None:
    from awf_nb.api import EvalKeywords

    parameters = inspect.signature(awf_nb.aevaluate).parameters
    assert set(EvalKeywords.__annotations__) == set(parameters) - {"source"}
    hints = typing.get_type_hints(awf_nb.aevaluate, localns={"EvalResult": awf_nb.EvalResult})
    assert hints["return"] is awf_nb.EvalResult
