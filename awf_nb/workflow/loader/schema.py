"""The JSON Schema of workflow files as written, for editors (`awf schema`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from awf_nb.workflow.durations import parse_duration
from awf_nb.workflow.loader.keys import _yaml_fields
from awf_nb.workflow.model import (
    STEP_CLASSES,
    STEP_KINDS,
    Input,
    Limits,
    Workflow,
    WorkflowHooks,
)

_DURATION_PATTERN = r"^\s*(\d+(\.\d+)?|((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+)\s*$"


def json_schema() -> dict[str, Any]:
    """A JSON Schema (2020-12) of workflow files as written, for editors (`awf schema`).

    Generated from the models, then reshaped to the YAML: `states` holds `initial` and the
    steps (a step's schema is chosen by its `type`), durations accept `"1m30s"`, and the
    loader's bookkeeping fields are left out. Unknown keys are refused here (the loader
    only warns) so an editor underlines typos.
    """
    ref = "#/$defs/{model}"
    top = Workflow.model_json_schema(ref_template=ref)
    defs: dict[str, Any] = top.pop("$defs", {})
    spellings: dict[str, list[str]] = {}
    for spelling, kind in STEP_KINDS.items():
        spellings.setdefault(kind, []).append(spelling)
    branches = []
    for kind, step_class in STEP_CLASSES.items():
        schema = step_class.model_json_schema(ref_template=ref)
        defs.update(schema.pop("$defs", {}))
        schema["properties"].pop("name", None)
        schema["properties"]["type"] = {"type": "string", "enum": spellings[kind]}
        schema["required"] = sorted({*schema.get("required", ()), "type"} - {"name"})
        defs[step_class.__name__] = schema
        condition = {"properties": {"type": {"enum": spellings[kind]}}, "required": ["type"]}
        branches.append({"if": condition, "then": {"$ref": ref.format(model=step_class.__name__)}})
    defs["Step"] = {
        "type": "object",
        "description": "A step; its `type` decides which fields apply.",
        "properties": {"type": {"type": "string", "enum": list(STEP_KINDS)}},
        "required": ["type"],
        "allOf": branches,
    }
    for model in _models():
        _reshape_model_schema(defs[model.__name__], model)
    # `conversation.with` is `person` or a partner map; the partner's kind is derived.
    defs["Partner"]["properties"].pop("kind", None)
    defs["ConversationConfig"]["properties"]["with"] = {
        "anyOf": [
            {"type": "string", "enum": ["person"]},
            {"$ref": ref.format(model="Partner")},
        ],
        "description": "who answers the agent: person (default), another agent "
        "({name, provider, system_prompt, options, prompt}) or {replies: [...]}",
    }
    properties = top["properties"]
    internal_fields = ("source_path", "source_dir", "source_text", "warnings", "locations")
    for internal in ("initial", "steps", *internal_fields):
        properties.pop(internal, None)
    properties["version"] = {"type": ["string", "number"]}
    properties["states"] = {
        "type": "object",
        "description": "`initial` names the first step; every other key is a step.",
        "properties": {"initial": {"type": "string"}},
        "required": ["initial"],
        "additionalProperties": {"$ref": ref.format(model="Step")},
    }
    top["required"] = ["name", "states"]
    top["additionalProperties"] = False
    top.update(
        title="AWF workflow",
        description="A workflow file for awf-nb and AWF: a state machine of shell and LLM steps.",
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **top,
        "$defs": dict(sorted(defs.items())),
    }


def _models() -> list[type[BaseModel]]:
    """Every model class reachable from `Workflow` and the step classes."""
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [*STEP_CLASSES.values(), Input, WorkflowHooks, Limits]
    while pending:
        model = pending.pop()
        if model in found:
            continue
        found.append(model)
        for nested, _ in _yaml_fields(model).values():
            if nested is not None:
                pending.append(nested)
    return found


def _reshape_model_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    schema["additionalProperties"] = False
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in schema.get("properties", {}):
            continue
        if any(getattr(m, "func", None) is parse_duration for m in info.metadata):
            schema["properties"][key] = {
                "anyOf": [
                    {"type": "number", "minimum": 0},
                    {"type": "string", "pattern": _DURATION_PATTERN},
                    {"type": "null"},
                ],
                "description": "seconds, or a Go duration such as '30s' or '1m30s'",
            }
