"""The YAML keys each model accepts, and what is said about the others.

A key no model knows is a warning with a did-you-mean (AWF ignores unknown keys), and it is
dropped. A key that AWF defines but awf-nb does not implement is an error naming it: the
same file must never quietly mean something else here (`AWF_UNSUPPORTED`). A key AWF reads
but never acts on is a warning that says so (`AWF_INERT`)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from awf_nb.workflow.checks import did_you_mean, join_path
from awf_nb.workflow.model import Input, Limits, WorkflowHooks
from awf_nb.workflow.yaml_locations import YamlDocument

# AWF features awf-nb does not implement, by where the key sits: what the feature is.
AWF_UNSUPPORTED: dict[str, dict[str, str]] = {
    "top": {"plugins": "workflow plugins"},
    "step": {
        "use_template": "step templates",
        "parameters": "step templates",
        "config": "the parameters of step types that plugins provide",
    },
    "mcp_proxy": {"plugin_tools": "plugin operations served as tools"},
}
# Keys AWF parses and then never uses: accepted here too, with a warning that says so.
AWF_INERT: dict[str, str] = {
    "capture": "AWF reads `capture` but does not use it (only its dry run shows it)",
    "depends_on": "AWF reads `depends_on` but does not use it (branches run as listed)",
}

_TOP_LEVEL_KEYS = (
    "name",
    "version",
    "description",
    "author",
    "tags",
    "inputs",
    "env",
    "states",
    "hooks",
    "limits",
)


class _UnknownKeys:
    """Warn about (and drop) keys the models do not know, with a did-you-mean suggestion."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc

    def check_top_level(self, data: dict[str, Any]) -> None:
        self.awf_only(data, "", "top")
        for key in [k for k in data if k not in _TOP_LEVEL_KEYS]:
            self._unknown(key, key, _TOP_LEVEL_KEYS)
            del data[key]
        if isinstance(data.get("inputs"), list):
            for i, item in enumerate(data["inputs"]):
                if isinstance(item, dict):
                    self.check(item, Input, join_path("inputs", i))
        if isinstance(data.get("hooks"), dict):
            self.check(data["hooks"], WorkflowHooks, "hooks")
        if isinstance(data.get("limits"), dict):
            self.check(data["limits"], Limits, "limits")

    def check(
        self, data: dict[str, Any], model: type[BaseModel], path: str, ignore: tuple[str, ...] = ()
    ) -> None:
        fields = _yaml_fields(model)
        known = [k for k in fields if k not in ignore]
        for key in list(data):
            if key not in known:
                self._unknown(key, join_path(path, key), known)
                del data[key]
                continue
            nested, many = fields[key]
            value = data[key]
            if nested is None:
                continue
            if many and isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, dict):
                        self.check(item, nested, join_path(join_path(path, key), i))
            elif not many and isinstance(value, dict):
                self.check(value, nested, join_path(path, key))

    def awf_only(self, data: dict[str, Any], path: str, where: str) -> None:
        """Report (and drop) the keys of `data` that only AWF implements (`where`: top,
        step); a step's `mcp_proxy.plugin_tools` too."""
        for key, feature in AWF_UNSUPPORTED.get(where, {}).items():
            if key in data:
                self.doc.error(awf_unsupported_message(key, feature), join_path(path, key))
                del data[key]
        if where != "step":
            return
        for key, why in AWF_INERT.items():
            if key in data:
                self.doc.warn(f'"{key}" has no effect: {why}', join_path(path, key))
                del data[key]
        proxy = data.get("mcp_proxy")
        if isinstance(proxy, dict):
            proxy_path = join_path(path, "mcp_proxy")
            for key, feature in AWF_UNSUPPORTED["mcp_proxy"].items():
                if proxy.get(key):
                    where_key = join_path(proxy_path, key)
                    self.doc.error(awf_unsupported_message(f"mcp_proxy.{key}", feature), where_key)
                    del proxy[key]

    def _unknown(self, key: str, path: str, known: typing.Iterable[str]) -> None:
        hint = did_you_mean(key, known)
        if key == "initial" and "states" in known:
            hint = "did you mean states.initial?"
        self.doc.warn(f'unknown key "{key}"', path, hint=hint)


def awf_unsupported_message(key: str, feature: str) -> str:
    return (
        f'"{key}" is an AWF feature that awf-nb does not support ({feature}); '
        "remove it, or run this workflow with AWF"
    )


_FIELD_CACHE: dict[type[BaseModel], dict[str, tuple[type[BaseModel] | None, bool]]] = {}


def _yaml_fields(model: type[BaseModel]) -> dict[str, tuple[type[BaseModel] | None, bool]]:
    """YAML key -> (nested model or None, whether it is a list of them), per model class."""
    cached = _FIELD_CACHE.get(model)
    if cached is None:
        cached = {}
        for name, info in model.model_fields.items():
            cached[info.alias or name] = _nested_model(info.annotation)
        _FIELD_CACHE[model] = cached
    return cached


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    origin = typing.get_origin(annotation)
    if origin is list:
        inner, _ = _nested_model(typing.get_args(annotation)[0])
        return inner, inner is not None
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            inner, many = _nested_model(arg)
            if inner is not None:
                return inner, many
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False
