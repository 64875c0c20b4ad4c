"""The public entry points: `Template` (a parsed template), `parse` (cached) and `render`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.workflow.template.errors import (
    TemplateError,
    TemplateRenderError,
    TemplateSyntaxError,
    _line_col,
)
from awf_nb.workflow.template.execute import _Exec
from awf_nb.workflow.template.parser import _ParseError, _Parser
from awf_nb.workflow.template.references import FieldRef, _ReferenceCollector
from awf_nb.workflow.template.shell_safety import Finding, unsafe_actions

if TYPE_CHECKING:
    from awf_nb.workflow.template.nodes import _Statement

_PARSE_CACHE_SIZE = 1024


class Template:
    """A parsed template: render it as often as needed, with different data.

    Get one from `parse()`; instances are shared through its cache, so treat them as
    immutable.
    """

    __slots__ = ("_defines", "_nodes", "_references", "_static", "source")

    def __init__(
        self,
        source: str,
        nodes: list[_Statement],
        defines: dict[str, list[_Statement]],
    ) -> None:
        self.source = source
        self._nodes = nodes
        self._defines = defines
        self._static = "{{" not in source
        collector = _ReferenceCollector(source)
        collector.statements(nodes, dot_is_root=True, dollar_is_root=True)
        for body in defines.values():  # a named template's dot and $ are its argument
            collector.statements(body, dot_is_root=False, dollar_is_root=False)
        self._references = collector.references()

    def __repr__(self) -> str:
        shown = self.source if len(self.source) <= 40 else self.source[:37] + "..."
        return f"Template({shown!r})"

    @property
    def is_static(self) -> bool:
        """True when the source has no actions at all: rendering returns it unchanged."""
        return self._static

    def render(
        self, data: Mapping[str, Any], *, base_dir: Path | None = None, name: str = "template"
    ) -> str:
        """Render with `data` as `.` and `$`; `readFile` paths are relative to `base_dir`
        (default: the working directory). Raises TemplateRenderError."""
        if self._static:
            return self.source
        state = _Exec(self, data, Path(base_dir) if base_dir is not None else None, name)
        try:
            state.walk(self._nodes, data)
        except RecursionError:
            raise TemplateRenderError(
                "data or template nested too deeply to render", name=name
            ) from None
        return "".join(state.out)

    def unsafe_shell_actions(self) -> list[Finding]:
        """Actions that paste untrusted text into a shell command unprotected."""
        return unsafe_actions(self.source, self._nodes)

    def references(self) -> list[FieldRef]:
        """Every field chain read from the run data, in source order.

        `.x.y` counts where dot is the data root (outside range/with bodies), `$.x.y`
        everywhere in the main template, and the namespace functions (`inputs.x`) always.
        """
        return list(self._references)


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_cached(source: str) -> Template:
    parser = _Parser(source)
    try:
        nodes = parser.parse()
    except _ParseError as err:
        line, column = _line_col(source, err.pos)
        raise TemplateSyntaxError(err.message, line, column) from None
    except RecursionError:
        raise TemplateSyntaxError("template nested too deeply", 1, 1) from None
    return Template(source, nodes, parser.defines)


def parse(source: str, *, name: str = "template") -> Template:
    """Parse a template (cached on the source text). Raises TemplateSyntaxError, whose
    message names the template `name`."""
    if not isinstance(source, str):
        raise TemplateError(f"template {name!r}: expected text, got {type(source).__name__}")
    try:
        return _parse_cached(source)
    except TemplateSyntaxError as err:
        if err.name != name:
            raise err.with_name(name) from None
        raise


def render(
    source: str,
    data: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    name: str = "template",
) -> str:
    """Parse (cached) and render in one call: `parse(source).render(data, ...)`."""
    return parse(source, name=name).render(data, base_dir=base_dir, name=name)
