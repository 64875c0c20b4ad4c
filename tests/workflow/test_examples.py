"""The example workflows, the JSON Schema and the syntax reference agree with the loader.

Every file in workflows/ must pass `awf validate --strict` (no warnings either) and validate
against `awf schema`; every complete workflow shown in docs/workflow-syntax.md must load.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from awf_nb.errors import DefinitionError
from awf_nb.workflow.loader import json_schema, load_text, load_workflow
from awf_nb.workflow.model import AgentStep, ForEachStep, ParallelStep, TerminalStep

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "workflows").glob("*.yaml"))
SYNTAX_DOC = ROOT / "docs" / "workflow-syntax.md"


def test_the_examples_exist() -> None:
    names = {path.stem for path in EXAMPLES}
    assert {"chat", "session-demo", "code-review", "parallel-foreach"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_valid_without_warnings(path: Path) -> None:
    wf = load_workflow(path)
    assert wf.warnings == [], "\n".join(map(str, wf.warnings))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_explains_itself(path: Path) -> None:
    header = path.read_text().split("\nname:", 1)[0]
    comment_lines = [line for line in header.splitlines() if line.startswith("#")]
    assert len(comment_lines) >= 8, "a comment header explaining the workflow"
    assert "awf run" in header, "say how to run it"


def test_chat_example_is_an_interactive_local_conversation() -> None:
    wf = load_workflow(ROOT / "workflows" / "chat.yaml")
    chat = wf.steps[wf.initial]
    assert isinstance(chat, AgentStep)
    assert (chat.provider, chat.mode) == ("local", "conversation")
    # the instruction is in the first message: the bundled model follows it there, and
    # not in a system prompt (benchmarks/local_quality.py)
    assert chat.system_prompt is None and "one short question" in (chat.prompt or "")
    assert wf.input("topic") is not None and wf.input("topic").default  # type: ignore[union-attr]
    assert isinstance(wf.steps[chat.on_success or ""], TerminalStep)


def test_session_demo_seeds_and_recalls_deterministically() -> None:
    wf = load_workflow(ROOT / "workflows" / "session-demo.yaml")
    seed, recall = wf.steps["seed"], wf.steps["recall"]
    assert isinstance(seed, AgentStep) and isinstance(recall, AgentStep)
    assert seed.mode == "single" and seed.conversation is not None
    assert recall.conversation is not None and recall.conversation.continue_from == "seed"
    assert seed.provider == recall.provider == "scripted"
    assert seed.options["replies"] and recall.options["replies"]


def test_code_review_loops_back_until_approved() -> None:
    wf = load_workflow(ROOT / "workflows" / "code-review.yaml")
    review = wf.steps["review"]
    assert isinstance(review, AgentStep) and review.output_format == "json"
    assert [t.goto for t in review.transitions] == ["approved", "needs_human", "fix"]
    assert wf.steps["fix"].on_success == "lint"
    assert not isinstance(wf.steps["lint"].on_failure, str | None)  # inline failure


def test_parallel_foreach_uses_a_strategy_and_loop_data() -> None:
    wf = load_workflow(ROOT / "workflows" / "parallel-foreach.yaml")
    checks = wf.steps["checks"]
    assert isinstance(checks, ParallelStep) and checks.strategy != "all_succeed"
    loop = wf.steps["greet"]
    assert isinstance(loop, ForEachStep)
    body = wf.steps[loop.body[0]]
    assert ".loop." in getattr(body, "command", "")


# --- JSON Schema ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator: jsonschema.Draft202012Validator, data: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates_against_the_schema(
    path: Path, validator: jsonschema.Draft202012Validator
) -> None:
    assert _errors(validator, yaml.safe_load(path.read_text())) == []


def _example_data() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "workflows" / "code-review.yaml").read_text())


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["states"]["lint"].update(type="shell"),
        lambda d: d["states"]["lint"].update(on_sucess="review"),
        lambda d: d["states"]["review"].update(mode=["x"]),
        lambda d: d["states"]["lint"].update(timeout="soon"),
        lambda d: d["states"].pop("initial"),
        lambda d: d.pop("name"),
        lambda d: d.update(inputs={"target": {}}),
        lambda d: d["states"]["review"].update(initial_prompt="hi"),
    ],
)
def test_schema_rejects_what_the_loader_rejects_or_warns_about(
    damage: Any, validator: jsonschema.Draft202012Validator
) -> None:
    data = _example_data()
    damage(data)
    assert _errors(validator, data)


def test_schema_accepts_every_spelling_of_a_step_type(
    validator: jsonschema.Draft202012Validator,
) -> None:
    data = _example_data()
    data["states"]["lint"]["type"] = "command"
    assert _errors(validator, data) == []


def test_schema_describes_the_yaml_not_the_model() -> None:
    schema = json_schema()
    assert schema["required"] == ["name", "states"]
    assert "initial" not in schema["properties"] and "steps" not in schema["properties"]
    assert schema["properties"]["states"]["required"] == ["initial"]
    assert "name" not in schema["$defs"]["CommandStep"]["properties"]
    assert schema["$defs"]["WhileStep"]["properties"]["while"]["type"] == "string"


# --- the syntax reference ------------------------------------------------------------------


def _doc_workflows() -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", SYNTAX_DOC.read_text(), flags=re.DOTALL)
    return [block for block in blocks if block.startswith("name:") and "\nstates:" in block]


def test_the_reference_shows_complete_workflows() -> None:
    assert len(_doc_workflows()) >= 1


@pytest.mark.parametrize("block", _doc_workflows(), ids=lambda b: b.split("\n", 1)[0])
def test_complete_workflows_in_the_reference_load(block: str) -> None:
    try:
        wf = load_text(block, file="workflow-syntax.md")
    except DefinitionError as err:
        pytest.fail(str(err))
    assert wf.warnings == []


def test_reference_mentions_every_removed_field_and_message() -> None:
    text = SYNTAX_DOC.read_text()
    from awf_nb.workflow.loader import REMOVED_FIELDS

    for field, migration in REMOVED_FIELDS.items():
        assert f"`{field}`" in text
        assert migration in text
