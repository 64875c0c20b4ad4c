"""Go `text/template` for AWF workflows: parse once, render many.

AWF (the Go tool whose workflow files we run) renders every command, prompt, message and
loop field with Go's `text/template` and `missingkey=error`. This module interprets the part
of that language workflows use, the way Go does:

- a lexer and a parser modelled on Go's `text/template/parse` (same tokens, same trim-marker
  rules, same error wording, plus the column);
- a tree-walking renderer with Go's value semantics: truthiness, `%v` printing (`[a b]`,
  `map[k:v]`, `3` for a float64 3), comparisons, `and`/`or` short-circuiting, `printf`;
- AWF's functions (`escape`, `json`, `split`, `join`, `trimSpace`, `readFile`) and its
  dot-less namespace functions (`{{inputs.x}}`, `{{states.s.Output}}`, `{{loop.index1}}`).

`parse(source)` is cached on the source text, so a template used in a loop body or in every
turn of a conversation is tokenised once. `Template.references()` lists the field chains a
template reads from the run data, so `awf validate` can check them without rendering.

Deliberate differences, each a clearer error or a friendlier result: assigning to an
undeclared variable is a parse error (Go fails when rendering); ints and floats compare by
value (Go refuses); printf's float verbs accept ints; `nil` may be passed to any function;
`join` accepts any list (AWF: only strings); `escape` always quotes (AWF leaves plain words
bare); complex number constants are refused.

Modules: `lexer` (tokens), `literals` (string/number constants), `nodes` (the syntax tree,
which renders itself), `parser`, `references` (fields read, for validation), `values` (Go
value semantics and printing), `printf`, `functions` and `namespaces` (what templates can
call), `execute` (the state of one render), `errors`, and `api` (`Template`, `parse`,
`render`).
"""

from __future__ import annotations

from awf_nb.workflow.template.api import Template, parse, render
from awf_nb.workflow.template.api import _parse_cached as _parse_cached  # cache_info(): tests
from awf_nb.workflow.template.errors import (
    TemplateError,
    TemplateRenderError,
    TemplateSyntaxError,
)
from awf_nb.workflow.template.functions import MAX_READ_FILE_BYTES
from awf_nb.workflow.template.references import FieldRef

__all__ = [
    "MAX_READ_FILE_BYTES",
    "FieldRef",
    "Template",
    "TemplateError",
    "TemplateRenderError",
    "TemplateSyntaxError",
    "parse",
    "render",
]
