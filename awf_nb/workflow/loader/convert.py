"""Plain data -> the pydantic models of `model.py`, one step at a time, so that every
mistake in the file is reported (not just the first) at the YAML path where it is.

The conversation fields removed in AWF v0.7 are errors that say how to migrate. Names (of
the workflow, its steps and inputs, a conversation partner) are shown on terminals and in
notebooks, so a name with a control character or a bidirectional-text control (which can
erase or reorder what a person reviews) is an error (`_name_problems`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from awf_nb.workflow.checks import join_path
from awf_nb.workflow.loader.document import _plain, go_type
from awf_nb.workflow.loader.keys import _UnknownKeys
from awf_nb.workflow.loader.model_errors import validate_model
from awf_nb.workflow.model import STEP_CLASSES, Workflow, canonical_kind
from awf_nb.workflow.yaml_locations import YamlDocument, problem_at

# Removed in AWF v0.7 (F083): using one is an error that says what to do instead.
REMOVED_FIELDS: dict[str, str] = {
    "initial_prompt": "use `prompt`: it is the first user message",
    "conversation.max_turns": "the user drives the number of turns; `mode: single` is one turn",
    "conversation.max_context_tokens": (
        "context window management is done by the provider (`options`)"
    ),
    "conversation.strategy": "removed: no automatic truncation at step level",
    "conversation.stop_condition": "removed: the user types exit/quit or an empty line",
    "conversation.inject_context": "compose prompts with `{{.states.*}}` interpolation",
}


class _WorkflowBuilder:
    """Validates the plain data piece by piece so every mistake is reported where it is."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        # False once a part had to be left out (a step that is not a map, inputs that are
        # not a list): the cross-step checks would then only report echoes of that problem.
        self.complete = True
        # When the workflow is not complete: what could be read of it, for the checks that
        # need no whole workflow (roles, skills, providers); see `Workflow.unread_steps`.
        self.partial: Workflow | None = None
        self.unread_steps: dict[str, dict[str, Any]] = {}

    def build(self, root: Any) -> Workflow | None:
        doc = self.doc
        if root is None:  # `---` alone, or only `~`
            doc.problems.append(problem_at(doc, None, "the workflow file is empty"))
            return None
        if not isinstance(root, dict):
            doc.error(f"a workflow must be a map, got {go_type(root)}", "")
            return None
        data = {k: v for k, v in root.items() if k != "states"}
        if data.get("name") is None or data.get("name") == "":
            doc.error("name: required field missing", "name")
            data.pop("name", None)
        if "inputs" in data and data["inputs"] is not None and not isinstance(data["inputs"], list):
            doc.error("inputs must be a list", "inputs")
            del data["inputs"]
            self.complete = False
        _UnknownKeys(doc).check_top_level(data)
        _name_problems(doc, root)
        if "version" in doc.scalar_text:  # `version: 1.10` is "1.10", not the float 1.1
            data["version"] = doc.scalar_text["version"]
        states = self._states(root.get("states"))
        data["initial"] = self._initial(states)
        data["steps"] = self._steps(states)
        workflow = validate_model(Workflow, data, "", doc, renames={"initial": "states.initial"})
        if workflow is not None and self.complete:
            return workflow
        self.partial = workflow or _readable_part(data)
        if self.partial is not None:
            self.partial.unread_steps = self.unread_steps
        return None

    def _states(self, states: Any) -> dict[str, Any]:
        if states is None:
            return {}
        if not isinstance(states, dict):
            self.doc.error(f"states: expected map, got {go_type(states)}", "states")
            self.complete = False
            return {}
        return dict(states)

    def _initial(self, states: dict[str, Any]) -> str | None:
        initial = states.pop("initial", None)
        if initial is None or initial == "":
            self.doc.error("states.initial: required field missing", "states.initial")
            self.complete = False
            return None
        if isinstance(initial, str):
            return initial
        text = self.doc.scalar_text.get("states.initial")
        if text is None:
            self.doc.error(f"expected string, got {go_type(initial)}", "states.initial")
            self.complete = False
        return text

    def _steps(self, states: dict[str, Any]) -> dict[str, Any]:
        steps: dict[str, Any] = {}
        for name, raw in states.items():
            step = self._step(name, raw, join_path("states", name))
            if step is None:
                self.complete = False
            else:
                steps[name] = step
        return steps

    def _step(self, name: str, raw: Any, path: str) -> BaseModel | None:
        doc = self.doc
        if not isinstance(raw, dict):
            doc.error(f'state "{name}": expected map, got {go_type(raw)}', path)
            return None
        type_path = join_path(path, "type")
        type_name = raw.get("type")
        if type_name is None or type_name == "":
            doc.error(f"{type_path}: required field missing", type_path)
            return None
        kind = canonical_kind(doc.scalar_text.get(type_path, type_name))
        if kind is None:
            shown = doc.scalar_text.get(type_path, type_name)
            doc.error(f"{type_path}: unknown step type: {_plain(shown)}", type_path)
            return None
        data = dict(raw)
        if kind == "agent":
            _removed_fields(data, path, doc)
        step_class = STEP_CLASSES[kind]
        unknown = _UnknownKeys(doc)
        unknown.awf_only(data, path, "step")
        unknown.check(data, step_class, path, ignore=("name",))
        data["name"] = name
        step = validate_model(step_class, data, path, doc)
        if step is None and kind == "agent":
            self.unread_steps[name] = raw
        return step


def _readable_part(data: dict[str, Any]) -> Workflow | None:
    """The steps that could be read, in a workflow whose own fields could not all be: its
    problems are reported already, so nothing is said here."""
    name, initial = data.get("name"), data.get("initial")
    try:
        return Workflow.model_validate(
            {
                "name": name if isinstance(name, str) else "",
                "initial": initial if isinstance(initial, str) else "",
                "steps": data.get("steps", {}),
            }
        )
    except ValidationError:
        return None


def _name_problems(doc: YamlDocument, root: dict[str, Any]) -> None:
    """Report every name that holds a character a terminal or a browser would act on."""
    named: list[tuple[str, Any, str]] = [("workflow name", root.get("name"), "name")]
    inputs = root.get("inputs")
    if isinstance(inputs, list):
        named += [
            ("input name", item.get("name"), join_path(join_path("inputs", index), "name"))
            for index, item in enumerate(inputs)
            if isinstance(item, dict)
        ]
    states = root.get("states")
    for step, raw in states.items() if isinstance(states, dict) else ():
        path = join_path("states", step)
        named.append(("step name", step, path))
        conversation = raw.get("conversation") if isinstance(raw, dict) else None
        partner = conversation.get("with") if isinstance(conversation, dict) else None
        if isinstance(partner, dict):
            where = join_path(join_path(join_path(path, "conversation"), "with"), "name")
            named.append(("conversation partner name", partner.get("name"), where))
    for what, name, path in named:
        if isinstance(name, str) and (found := _unshowable(name)):
            doc.error(
                f"{what} {_escaped(name)} holds {found}: a name must be visible text, "
                "without control, bidirectional-text or other invisible characters (it is "
                "shown on terminals and in notebooks, where they can erase, hide or reorder "
                "text)",
                path,
            )


def _unshowable(name: str) -> str:
    """What the first character of `name` that must not be shown is ("" for none)."""
    for char in name:
        if not char.isprintable():
            code = f"U+{ord(char):04X}"
            if unicodedata.category(char) == "Cc":
                return f"a control character ({code})"
            label = unicodedata.name(char, "").lower() or "an invisible character"
            return f"{label} ({code})"
    return ""


def _escaped(name: str) -> str:
    """`name` quoted, its unprintable characters written as escapes (`\\x1b`, `\\u202e`)."""
    shown = "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode() for char in name
    )
    return '"' + shown + '"'


def _removed_fields(step: dict[str, Any], path: str, doc: YamlDocument) -> None:
    """Report (and drop) the conversation fields AWF v0.7 removed, anywhere in an agent step."""
    for key_path, container, key in _walk_keys(step, path):
        if key == "initial_prompt":
            doc.error(_removed_message("initial_prompt"), key_path)
            del container[key]
    conversation = step.get("conversation")
    if isinstance(conversation, dict):
        # With another agent or scripted replies answering, bounding the exchange is the
        # point: `max_turns` and `until` are fields again (spec: conversation.with).
        with_partner = isinstance(conversation.get("with"), dict)
        for key in list(conversation):
            removed = f"conversation.{key}"
            where = join_path(join_path(path, "conversation"), key)
            if with_partner and key == "max_turns":
                continue
            if removed in REMOVED_FIELDS:
                doc.error(_removed_message(removed), where)
                del conversation[key]
            elif key == "until" and not with_partner:
                doc.error(
                    "conversation.until needs conversation.with (another agent or scripted "
                    "replies); with the person, the person ends the conversation (exit, quit "
                    "or an empty line)",
                    where,
                )
                del conversation[key]


def _removed_message(removed: str) -> str:
    message = f"{removed} was removed in AWF v0.7: {REMOVED_FIELDS[removed]}"
    if removed == "conversation.max_turns":
        message += ", or use conversation.with for a conversation between agents"
    return message


def _walk_keys(data: Any, path: str) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every (path, map, key) under `data`, collected first so callers may delete keys."""
    found: list[tuple[str, dict[str, Any], str]] = []
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                found.append((join_path(where, key), value, key))
                stack.append((child, join_path(where, key)))
        elif isinstance(value, list):
            stack.extend((child, join_path(where, i)) for i, child in enumerate(value))
    return iter(found)
