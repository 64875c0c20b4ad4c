"""The condition parser: precedence climbing over the lexer's tokens, building the AST
(`nodes.py`) or raising `ExprSyntaxError` with the column."""

from __future__ import annotations

import json
from dataclasses import dataclass

from awf_nb.workflow.expr.errors import ExprSyntaxError, _syntax_error
from awf_nb.workflow.expr.functions import FUNCTIONS, _regex_problem
from awf_nb.workflow.expr.lexer import TemplateBraces, Token, _Lexer
from awf_nb.workflow.expr.nodes import (
    Access,
    Call,
    Chain,
    FieldStep,
    IndexStep,
    ListLiteral,
    Literal,
    Logical,
    Name,
    Node,
    Operation,
    Unary,
)

# Deeper nesting than this is refused at parse time: no real condition comes close, and it
# keeps both the recursive parser and the recursive evaluator far from Python's stack limit.
MAX_NESTING = 100


# Binding powers, loosest first; `not` is looser than comparisons: `not a == b` is `not (a == b)`.
_OR, _AND, _NOT, _COMPARE, _ADD, _MULTIPLY, _UNARY = range(1, 8)

_SYMBOL_OPERATORS = {
    "||": ("or", _OR),
    "&&": ("and", _AND),
    "==": ("==", _COMPARE),
    "!=": ("!=", _COMPARE),
    "<": ("<", _COMPARE),
    "<=": ("<=", _COMPARE),
    ">": (">", _COMPARE),
    ">=": (">=", _COMPARE),
    "+": ("+", _ADD),
    "-": ("-", _ADD),
    "*": ("*", _MULTIPLY),
    "/": ("/", _MULTIPLY),
    "%": ("%", _MULTIPLY),
}
_WORD_OPERATORS = frozenset({"in", "contains", "startsWith", "endsWith", "matches"})
_LITERAL_WORDS = {"true": True, "false": False, "nil": None}
_RESERVED = frozenset({"and", "or", "not", *_WORD_OPERATORS, *_LITERAL_WORDS})


@dataclass(frozen=True)
class _Infix:
    op: str
    power: int
    width: int  # tokens it spans: 2 for `not in`
    column: int
    negated: bool = False


class _Parser:
    """Precedence climbing over the token list; builds the AST or raises ExprSyntaxError."""

    def __init__(self, source: str) -> None:
        self.source = source
        try:
            self.tokens = _Lexer(source).tokens()
        except TemplateBraces as braces:
            raise _syntax_error(
                "template braces {{ in a condition", braces.column, _template_hint(source)
            ) from None
        self.pos = 0
        self.nesting = 0

    def parse(self) -> Node:
        if self.tokens[0].kind == "end":
            raise _syntax_error(
                "empty condition", 1, "write an expression like `states.build.ExitCode == 0`"
            )
        node = self.expression(0)
        if self.peek().kind != "end":
            raise self.unexpected(self.peek())
        return node

    # -- token helpers

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.pos += 1
        return token

    def is_op(self, value: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.value == value

    def unexpected(self, token: Token, hint: str = "") -> ExprSyntaxError:
        if token.kind == "end":
            return _syntax_error("unexpected end of expression", token.column, hint)
        return _syntax_error(f"unexpected token {token.shown()}", token.column, hint)

    def expect_closing(self, closer: str, opener: Token) -> None:
        if self.is_op(closer):
            self.advance()
            return
        hint = f'expected "{closer}" to close "{opener.text}" at column {opener.column}'
        raise self.unexpected(self.peek(), hint)

    # -- expressions

    def expression(self, min_power: int) -> Node:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise _syntax_error(
                f"expression nested too deeply (more than {MAX_NESTING} levels)",
                self.peek().column,
            )
        try:
            return self._climb(self.prefix(), min_power)
        finally:
            self.nesting -= 1

    def _climb(self, left: Node, min_power: int) -> Node:
        while (infix := self.infix()) is not None and infix.power >= min_power:
            if infix.op in ("and", "or"):
                left = self._logical(left, infix)
            else:
                left = self._chain(left, infix)
        return left

    def _logical(self, first: Node, infix: _Infix) -> Node:
        operands = [first]
        while (more := self.infix()) is not None and more.op == infix.op:
            self.pos += more.width
            operands.append(self.expression(infix.power + 1))
        return Logical(infix.op, tuple(operands), first.column)

    def _chain(self, first: Node, infix: _Infix) -> Node:
        links: list[Operation] = []
        while (more := self.infix()) is not None and more.power == infix.power:
            self.pos += more.width
            right = self.expression(more.power + 1)
            if more.op == "matches":
                self._check_literal_regex(right)
            links.append(Operation(more.op, right, more.column, more.negated))
        return Chain(first, tuple(links), first.column)

    def _check_literal_regex(self, pattern: Node) -> None:
        if isinstance(pattern, Literal) and isinstance(pattern.value, str):
            problem = _regex_problem(pattern.value)
            if problem:
                raise _syntax_error(problem, pattern.column)

    def infix(self) -> _Infix | None:
        """The binary operator at the current token, without consuming it."""
        token = self.peek()
        if token.kind == "op" and token.value in _SYMBOL_OPERATORS:
            op, power = _SYMBOL_OPERATORS[token.value]
            return _Infix(op, power, 1, token.column)
        if token.kind != "name":
            return None
        if token.value in ("and", "or"):
            return _Infix(token.value, _OR if token.value == "or" else _AND, 1, token.column)
        if token.value in _WORD_OPERATORS:
            return _Infix(token.value, _COMPARE, 1, token.column)
        following = self.peek(1)
        if token.value == "not" and following.kind == "name" and following.value in _WORD_OPERATORS:
            return _Infix(following.value, _COMPARE, 2, token.column, negated=True)
        return None

    def prefix(self) -> Node:
        token = self.peek()
        if (token.kind == "name" and token.value == "not") or self.is_op("!"):
            self.advance()
            return Unary("not", self.expression(_NOT), token.column)
        if self.is_op("-"):
            self.advance()
            return Unary("-", self.expression(_UNARY), token.column)
        return self.postfix(self.primary())

    def primary(self) -> Node:
        token = self.advance()
        if token.kind in ("number", "string"):
            return Literal(token.value, token.column)
        if token.kind == "name":
            return self.named(token)
        if token.kind == "op" and token.value == "(":
            inner = self.expression(0)
            self.expect_closing(")", token)
            return inner
        if token.kind == "op" and token.value == "[":
            return ListLiteral(tuple(self.items("]", token)), token.column)
        if token.kind == "op" and token.value == ".":
            raise self.unexpected(token, "paths have no leading dot: `states.build.ExitCode`")
        raise self.unexpected(token)

    def named(self, token: Token) -> Node:
        word = token.value
        if self.is_op("("):
            return self.call(token)
        if word in _LITERAL_WORDS:
            return Literal(_LITERAL_WORDS[word], token.column)
        if word in _RESERVED:
            raise self.unexpected(token)
        return Name(word, token.column)

    def call(self, token: Token) -> Node:
        name = token.value
        function = FUNCTIONS.get(name)
        if function is None:
            raise _syntax_error(
                f"unknown function {json.dumps(name, ensure_ascii=False)}",
                token.column,
                _function_hint(name),
            )
        opener = self.advance()
        args = self.items(")", opener)
        if not function.min_args <= len(args) <= function.max_args:
            raise _syntax_error(
                f"{name}() takes {function.arity_text()}, got {len(args)}", token.column
            )
        return Call(function, tuple(args), token.column)

    def items(self, closer: str, opener: Token) -> list[Node]:
        """Comma-separated expressions up to `closer`; a trailing comma is allowed."""
        found: list[Node] = []
        while not self.is_op(closer):
            found.append(self.expression(0))
            if not self.is_op(","):
                break
            self.advance()
        self.expect_closing(closer, opener)
        return found

    def postfix(self, target: Node) -> Node:
        steps: list[FieldStep | IndexStep] = []
        while True:
            token = self.peek()
            if self.is_op("."):
                self.advance()
                steps.append(FieldStep(self.field_name(), token.column))
            elif self.is_op("["):
                self.advance()
                index = self.expression(0)
                self.expect_closing("]", token)
                steps.append(IndexStep(index, token.column))
            elif self.is_op("("):
                raise self.unexpected(
                    token, f"only functions can be called: {', '.join(sorted(FUNCTIONS))}"
                )
            else:
                break
        return Access(target, tuple(steps), target.column) if steps else target

    def field_name(self) -> str:
        token = self.peek()
        if token.kind != "name":  # any word is a field name after a dot, even `in` or `nil`
            raise self.unexpected(token, 'expected a field name after "."')
        self.advance()
        return token.text  # a name token's value is its text


def _function_hint(name: str) -> str:
    import difflib  # only a misspelt function pays for it

    close = difflib.get_close_matches(name, FUNCTIONS, n=1)
    known = ", ".join(sorted(FUNCTIONS))
    return f"did you mean {close[0]}? functions: {known}" if close else f"functions: {known}"


def _template_hint(source: str) -> str:
    """Explain that conditions are not templates, with the user's condition rewritten."""
    general = "conditions take plain expressions like `states.build.ExitCode == 0`, not templates"
    plain = source
    for marker, replacement in (
        ("{{-", "{{"),
        ("-}}", "}}"),
        ("{{ ", "{{"),
        (" }}", "}}"),
        ("{{.", "{{"),
    ):
        while marker in plain:
            plain = plain.replace(marker, replacement)
    plain = plain.replace("{{", "").replace("}}", "").strip()
    try:
        _Parser(plain).parse()
    except (ExprSyntaxError, RecursionError):
        return general
    return f"{general}: write `{plain}`"
