"""The condition language of `when`, `while`, `break_when` and `until` (spec §7).

Conditions are expr-lang style expressions over the run's data, for example
`states.build.ExitCode == 0 and inputs.mode in ["fast", "full"]`. A condition is tokenized
and parsed once into a small AST (`parse` caches by source), then evaluated as often as a
loop needs. Nothing here calls Python's eval/compile: the evaluator knows only the operators
and functions below, so a workflow file cannot run Python.

Semantics that matter for workflows:

- a path to anything missing (`states.nope.Output`, `inputs.x.y[3]`) is nil, never an error;
- with nil, ordering and word operators are false (their `not` forms true) and arithmetic
  is nil, never an error; only `== nil` and `!= nil` look at nil itself;
- strings that look like numbers or booleans compare as such with numbers or booleans:
  inputs and command output are text, so `states.count.Output > 3` works with `"5\\n"`;
- parse errors are `ExprSyntaxError` with the 1-based column, run-time type errors are
  `ExprEvalError`; both are `ExprError`, a `ValueError`.

Operators, loosest first: `or ||`, `and &&`, `not !`, comparisons (`== != < <= > >=`,
`in`, `contains`, `startsWith`, `endsWith`, `matches`, each word operator also as
`not in`, `not contains`, ...), `+ -`, `* / %`, unary `-`, then `.field`, `[index]` and
function calls. Strings take `'…'`, `"…"` (escapes `\\n \\t \\r \\\\ \\" \\'`; any other
backslash is kept, so `'\\d+'` is the regex `\\d+`) or backticks (raw).

Modules: `lexer`, `parser`, `nodes` (the AST, which evaluates itself), `values` (coercions,
comparisons, arithmetic), `functions` (word operators and `FUNCTIONS`), `errors`, and `api`
(`Expression`, `parse`, `evaluate`).
"""

from __future__ import annotations

from awf_nb.workflow.expr.api import Expression, evaluate, parse
from awf_nb.workflow.expr.errors import ExprError, ExprEvalError, ExprSyntaxError
from awf_nb.workflow.expr.functions import FUNCTIONS

__all__ = [
    "FUNCTIONS",
    "ExprError",
    "ExprEvalError",
    "ExprSyntaxError",
    "Expression",
    "evaluate",
    "parse",
]
