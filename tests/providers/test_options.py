"""The one options validator: what each provider's `options:` accept, said in words."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field

from awf_nb.errors import EXIT_DEFINITION, ProviderError
from awf_nb.providers.cli.base import CliOptions
from awf_nb.providers.local import LocalOptions
from awf_nb.providers.openai_compatible import OpenAIOptions
from awf_nb.providers.options import OptionsModel, expects, parse_options, unknown_options
from awf_nb.providers.scripted import ScriptedOptions


class Sample(OptionsModel):
    name: str
    ratio: float = Field(0.5, ge=0, le=1)
    count: int = Field(1, gt=0)
    mode: Literal["fast", "slow"] = "fast"
    tags: list[str] = Field(default_factory=list)
    stop: str | list[str] | None = None


def problem(raw: object) -> str:
    with pytest.raises(ProviderError) as caught:
        parse_options("demo", Sample, raw)
    assert caught.value.exit_code == EXIT_DEFINITION  # a mistake in the workflow
    return str(caught.value).removeprefix("demo: ")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"name": "n", "ratio": 2}, "options.ratio must be a number from 0 to 1 (got 2)"),
        ({"name": "n", "ratio": True}, "options.ratio must be a number from 0 to 1 (got True)"),
        ({"name": "n", "count": 0}, "options.count must be a whole number > 0 (got 0)"),
        ({"name": "n", "count": "3"}, "options.count must be a whole number > 0 (got '3')"),
        ({"name": "n", "mode": "medium"}, "options.mode must be one of fast, slow (got 'medium')"),
        ({"name": "n", "tags": "a"}, "options.tags must be a list of strings (got 'a')"),
        ({"name": "n", "tags": ["a", 1]}, "options.tags[1] must be a string (got 1)"),
        ({"name": "n", "stop": 3}, "options.stop must be a string or a list of strings (got 3)"),
        ({}, "options.name is required"),
        ({"name": "n", "rato": 1}, 'unknown option "rato" (did you mean "ratio"?)'),
        ({"name": "n", "zzz": 1}, 'unknown option "zzz" (known: count, mode, name, ratio, stop,'),
        (["name"], "options must be a mapping (got list)"),
    ],
)
def test_each_mistake_is_worded_for_the_author(raw: object, message: str) -> None:
    assert problem(raw).startswith(message)


def test_every_mistake_is_reported_at_once_on_one_line() -> None:
    text = problem({"ratio": 5, "count": -1})
    assert text.count(";") == 2 and "\n" not in text
    assert "options.name is required" in text and "options.ratio" in text


def test_unknown_keys_can_be_left_to_the_provider() -> None:
    raw = {"name": "n", "temperature": 1}
    assert parse_options("demo", Sample, raw, ignore_unknown=True).name == "n"
    assert unknown_options(Sample, raw) == ["temperature"]


@pytest.mark.parametrize("model", [LocalOptions, OpenAIOptions, ScriptedOptions, CliOptions])
def test_every_provider_declares_its_options_as_one_model(model: type[OptionsModel]) -> None:
    assert issubclass(model, OptionsModel)
    for name, field in model.model_fields.items():
        assert expects(field.annotation, field), name  # each option can be described
