"""Input resolution (types, defaults, validation, every error at once) and the Python API."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import awf_nb
from awf_nb.engine.events import AgentText
from awf_nb.engine.inputs import parse_input_args, resolve_inputs
from awf_nb.errors import AwfError, InputError, UserError
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect

WF = load_text(
    """
name: inputs
inputs:
  - {name: count, type: integer, default: 3, validation: {min: 1, max: 10}}
  - {name: flag, type: boolean}
  - {name: mode, validation: {enum: [fast, slow]}, default: fast}
  - {name: slug, validation: {pattern: "^[a-z-]+$"}}
  - {name: path, validation: {file_exists: true, file_extension: [.md]}}
  - {name: needed, required: true}
states:
  initial: done
  done: {type: terminal}
"""
)


def test_defaults_and_coercion(tmp_path: Path):
    (tmp_path / "notes.md").write_text("x")
    values = resolve_inputs(
        WF,
        {"flag": "yes", "needed": "x", "count": "7", "path": "notes.md", "slug": "a-b"},
        cwd=tmp_path,
    )
    assert values["count"] == 7
    assert values["flag"] is True
    assert values["mode"] == "fast"


def test_every_problem_is_reported(tmp_path: Path):
    with pytest.raises(InputError) as info:
        resolve_inputs(
            WF,
            {"count": "0", "flag": "maybe", "mode": "medium", "slug": "No Caps", "path": "x.txt"},
            cwd=tmp_path,
        )
    assert info.value.problems == [
        "inputs.count: value 0 is below minimum 1",
        'inputs.flag: value "maybe" is not a boolean (true/false)',
        'inputs.mode: value "medium" not in allowed values [fast, slow]',
        'inputs.slug: value "No Caps" does not match pattern "^[a-z-]+$"',
        "inputs.path: file does not exist: x.txt",
        'inputs.path: file "x.txt" must have extension .md',
        "inputs.needed: required but not provided",
    ]
    assert info.value.exit_code == 1


def test_integer_errors_and_maximum():
    with pytest.raises(InputError) as info:
        resolve_inputs(WF, {"count": "many", "needed": "x"})
    assert info.value.problems == ['inputs.count: value "many" is not an integer']
    with pytest.raises(InputError) as info:
        resolve_inputs(WF, {"count": 11, "needed": "x"})
    assert info.value.problems == ["inputs.count: value 11 exceeds maximum 10"]


def test_misspelled_input_name_is_caught():
    with pytest.raises(InputError) as info:
        resolve_inputs(WF, {"neede": "x"})
    assert 'inputs.neede: unknown input (did you mean "needed"?)' in info.value.problems


def test_asking_for_missing_required_input():
    asked = []

    def ask(spec):
        asked.append(spec.name)
        return "typed"

    assert resolve_inputs(WF, {}, ask=ask)["needed"] == "typed"
    assert asked == ["needed"]


def test_parse_input_args(tmp_path: Path):
    (tmp_path / "f.txt").write_text("from file")
    assert parse_input_args(["a=1", "b=x=y", "c=@f.txt", "d="], cwd=tmp_path) == {
        "a": "1",
        "b": "x=y",
        "c": "from file",
        "d": "",
    }
    with pytest.raises(UserError, match='invalid input "novalue"'):
        parse_input_args(["novalue"])
    with pytest.raises(UserError, match="cannot read"):
        parse_input_args(["x=@missing.txt"], cwd=tmp_path)


def test_sync_run_and_result(tmp_path: Path):
    result = awf_nb.run(
        "name: t\nstates:\n  initial: a\n  a: {type: step, command: echo hi, on_success: d}\n"
        "  d: {type: terminal, message: done}\n",
        storage=tmp_path,
    )
    assert result.ok and result.outputs["a"] == "hi" and result.message == "done"
    assert "completed" in result.summary()
    assert result.as_dict()["status"] == "completed"


def test_sync_run_refuses_inside_an_event_loop(tmp_path: Path):
    async def inside() -> None:
        with pytest.raises(AwfError, match="cannot be used inside a running event loop") as info:
            awf_nb.run("name: t\nstates:\n  initial: d\n  d: {type: terminal}\n")
        assert "await awf_nb.arun" in str(info.value)

    asyncio.run(inside())


def test_raise_for_status(tmp_path: Path):
    result = awf_nb.run(
        "name: t\nstates:\n  initial: a\n  a: {type: step, command: 'exit 1', on_success: d}\n"
        "  d: {type: terminal}\n",
        storage=False,
    )
    assert result.status == "failed"
    with pytest.raises(AwfError, match="step a: exit code 1"):
        result.raise_for_status()


def test_streamed_secret_split_across_chunks_is_masked(tmp_path: Path):
    secret = "sk-live-ABCDEFGHIJKLMNOP"
    sink = Collect()
    result = awf_nb.run(
        """
name: t
inputs: [{name: API_KEY}]
states:
  initial: a
  a:
    type: agent
    provider: scripted
    prompt: hi
    options: {replies: ["the key is sk-live-ABCDEFGHIJKLMNOP, keep it safe"]}
    on_success: d
  d: {type: terminal}
""",
        {"API_KEY": secret},
        sink=sink,
        storage=tmp_path,
    )
    chunks = [e.text for e in sink.of(AgentText)]
    assert len(chunks) > 3  # the reply really was streamed in pieces
    assert secret not in "".join(chunks)
    assert "".join(chunks) == "the key is ***, keep it safe"
    assert result.outputs["a"] == "the key is ***, keep it safe"
    stored = (tmp_path / "runs" / result.run_id / "transcript.jsonl").read_text()
    assert secret not in stored
    assert secret not in (tmp_path / "runs" / result.run_id / "state.json").read_text()
