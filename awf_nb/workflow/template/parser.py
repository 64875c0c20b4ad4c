"""The template parser: builds the syntax tree (`nodes.py`) from the lexer's tokens.

Follows Go's `text/template/parse`: same grammar, same error wording; `{{define}}` and
`{{block}}` bodies are collected as named templates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from awf_nb.workflow.template.functions import _FUNCTIONS
from awf_nb.workflow.template.lexer import (
    _ASSIGN,
    _BOOL,
    _CHAR,
    _CHAR_CONSTANT,
    _DECLARE,
    _DOT,
    _EOF,
    _ERROR,
    _FIELD,
    _IDENT,
    _LEFT,
    _LPAREN,
    _NIL,
    _NUMBER,
    _OPERAND_START,
    _PIPE,
    _RAW_STRING,
    _RIGHT,
    _RPAREN,
    _SPACE,
    _STRING,
    _TEXT,
    _VARIABLE,
    _Lexer,
    _Token,
)
from awf_nb.workflow.template.literals import _char_value, _number_value, _unquote
from awf_nb.workflow.template.nodes import (
    _Action,
    _Break,
    _Chain,
    _Command,
    _Continue,
    _Dot,
    _Else,
    _End,
    _Field,
    _Identifier,
    _If,
    _Literal,
    _Nil,
    _Operand,
    _Pipe,
    _Range,
    _Statement,
    _SubPipe,
    _TemplateCall,
    _Text,
    _Variable,
    _With,
)
from awf_nb.workflow.template.values import _go_quote


class _ParseError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _is_empty_tree(nodes: list[_Statement]) -> bool:
    return all(isinstance(n, _Text) and not n.text.strip() for n in nodes)


class _Parser:
    """Builds the syntax tree from tokens, following Go's `text/template/parse`."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.tokens = _Lexer(source).run()
        self.i = 0
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        self.defines: dict[str, list[_Statement]] = {}
        self.keyword_parsers: dict[str, Callable[[_Token], _Statement | _End | _Else]] = {
            "block": self.block_clause,
            "break": self.break_clause,
            "continue": self.break_clause,
            "else": self.else_clause,
            "end": self.end_clause,
            "if": self.if_clause,
            "range": self.range_clause,
            "template": self.template_clause,
            "with": self.with_clause,
        }

    # token access ------------------------------------------------------------------------
    def next(self) -> _Token:
        token = self.peek()
        if token.kind != _EOF:
            self.i += 1
        return token

    def peek(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind == _ERROR:
            raise _ParseError(token.text, token.pos)
        return token

    def backup(self) -> None:
        self.i -= 1

    def peek_non_space(self) -> _Token:
        while self.peek().kind == _SPACE:
            self.i += 1
        return self.peek()

    def next_non_space(self) -> _Token:
        self.peek_non_space()
        return self.next()

    def expect(self, kind: str, context: str) -> _Token:
        token = self.next_non_space()
        if token.kind != kind:
            self.unexpected(token, context)
        return token

    def unexpected(self, token: _Token, context: str) -> NoReturn:
        raise _ParseError(f"unexpected {token.describe()} in {context}", token.pos)

    # structure -----------------------------------------------------------------------------
    def parse(self) -> list[_Statement]:
        root: list[_Statement] = []
        while self.peek().kind != _EOF:
            if self.peek().kind == _LEFT:
                saved = self.i
                self.next()
                if self.next_non_space().kind == "define":
                    self.define_clause()
                    continue
                self.i = saved
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                raise _ParseError(f"unexpected {node}", node.pos)
            root.append(node)
        return root

    def text_or_action(self) -> _Statement | _End | _Else:
        token = self.next_non_space()
        if token.kind == _TEXT:
            return _Text(token.text)
        if token.kind == _LEFT:
            return self.action()
        self.unexpected(token, "input")

    def item_list(self) -> tuple[list[_Statement], _End | _Else]:
        nodes: list[_Statement] = []
        while self.peek_non_space().kind != _EOF:
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                return nodes, node
            nodes.append(node)
        raise _ParseError("unexpected EOF", len(self.src))

    def action(self) -> _Statement | _End | _Else:
        token = self.next_non_space()
        parser = self.keyword_parsers.get(token.kind)
        if parser is not None:
            return parser(token)
        self.backup()
        return _Action(self.pipeline("command", _RIGHT))

    def control(self, context: str) -> tuple[_Pipe, list[_Statement], list[_Statement] | None]:
        saved_vars = len(self.vars)
        pipe = self.pipeline(context, _RIGHT)
        if context == "range":
            self.range_depth += 1
        body, ending = self.item_list()
        if context == "range":
            self.range_depth -= 1
        else_body = None
        if isinstance(ending, _Else):
            # "{{else if x}}" / "{{else with x}}" mean "{{else}}{{if x}}...{{end}}{{end}}"
            # with the inner end shared.
            if context in ("if", "with") and self.peek().kind == context:
                token = self.next()
                nested = self.if_clause(token) if context == "if" else self.with_clause(token)
                else_body = [nested]
            else:
                else_body, ending = self.item_list()
                if not isinstance(ending, _End):
                    raise _ParseError(f"expected end; found {ending}", ending.pos)
        del self.vars[saved_vars:]
        return pipe, body, else_body

    def if_clause(self, token: _Token) -> _Statement:
        return _If(*self.control("if"))

    def with_clause(self, token: _Token) -> _Statement:
        return _With(*self.control("with"))

    def range_clause(self, token: _Token) -> _Statement:
        return _Range(*self.control("range"))

    def else_clause(self, token: _Token) -> _Else:
        following = self.peek_non_space()
        if following.kind not in ("if", "with"):  # else if/with: left pending for control()
            self.expect(_RIGHT, "else")
        return _Else(token.pos)

    def end_clause(self, token: _Token) -> _End:
        self.expect(_RIGHT, "end")
        return _End(token.pos)

    def break_clause(self, token: _Token) -> _Statement:
        following = self.next_non_space()
        if following.kind != _RIGHT:
            self.unexpected(following, "{{" + token.text + "}}")
        if self.range_depth == 0:
            raise _ParseError(f"{{{{{token.text}}}}} outside {{{{range}}}}", token.pos)
        return _Break() if token.text == "break" else _Continue()

    def template_name(self, token: _Token, context: str) -> str:
        if token.kind not in (_STRING, _RAW_STRING):
            self.unexpected(token, context)
        try:
            return _unquote(token.text)
        except ValueError as err:
            raise _ParseError(str(err), token.pos) from None

    def template_clause(self, token: _Token) -> _Statement:
        context = "template clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        pipe = None
        if self.next_non_space().kind != _RIGHT:
            self.backup()
            pipe = self.pipeline(context, _RIGHT)
        return _TemplateCall(name, pipe, token.pos, self.tokens[self.i - 1].end)

    def block_clause(self, token: _Token) -> _Statement:
        context = "block clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        pipe = self.pipeline(context, _RIGHT)
        end = self.tokens[self.i - 1].end
        self.add_define(name, self.template_body(context), name_token.pos)
        return _TemplateCall(name, pipe, token.pos, end)

    def define_clause(self) -> None:
        context = "define clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        self.expect(_RIGHT, context)
        self.add_define(name, self.template_body(context), name_token.pos)

    def template_body(self, context: str) -> list[_Statement]:
        # A named template has its own `$` and variables, and is outside any range.
        outer_vars, outer_depth = self.vars, self.range_depth
        self.vars, self.range_depth = ["$"], 0
        body, ending = self.item_list()
        if not isinstance(ending, _End):
            raise _ParseError(f"unexpected {ending} in {context}", ending.pos)
        self.vars, self.range_depth = outer_vars, outer_depth
        return body

    def add_define(self, name: str, body: list[_Statement], pos: int) -> None:
        existing = self.defines.get(name)
        if existing is not None and not _is_empty_tree(existing):
            if not _is_empty_tree(body):
                raise _ParseError(f"multiple definition of template {_go_quote(name)}", pos)
            return
        self.defines[name] = body

    # pipelines -----------------------------------------------------------------------------
    def pipeline(self, context: str, end_kind: str) -> _Pipe:
        decl: list[_Variable] = []
        is_assign = self.declarations(context, decl)
        cmds: list[_Command] = []
        while True:
            token = self.next_non_space()
            if token.kind == end_kind:
                self.check_pipeline(cmds, context, token)
                return _Pipe(decl, is_assign, cmds)
            if token.kind not in _OPERAND_START:
                self.unexpected(token, context)
            self.backup()
            cmds.append(self.command())

    def declarations(self, context: str, decl: list[_Variable]) -> bool:
        """Parse `$x :=`, `$x =` or (in range) `$i, $v :=`; True for an assignment."""
        while self.peek_non_space().kind == _VARIABLE:
            var_index = self.i
            var = self.next()
            following = self.peek_non_space()
            if following.kind in (_ASSIGN, _DECLARE):
                self.next()
                decl.append(_Variable(var.pos, var.end, var.text))
                is_assign = following.kind == _ASSIGN
                for variable in decl:
                    if is_assign and variable.name not in self.vars:
                        raise _ParseError(
                            f"undefined variable {_go_quote(variable.name)}", variable.start
                        )
                if not is_assign:
                    self.vars.extend(v.name for v in decl)
                return is_assign
            if following.kind == _CHAR and following.text == ",":
                self.next()
                decl.append(_Variable(var.pos, var.end, var.text))
                if context == "range" and len(decl) < 2:
                    if self.peek_non_space().kind in (_VARIABLE, _RIGHT, _RPAREN):
                        continue
                    raise _ParseError("range can only initialize variables", following.pos)
                raise _ParseError(f"too many declarations in {context}", following.pos)
            self.i = var_index  # `$x` is an operand, not a declaration
            break
        return False

    def check_pipeline(self, cmds: list[_Command], context: str, end: _Token) -> None:
        if not cmds:
            raise _ParseError(f"missing value for {context}", end.pos)
        for stage, cmd in enumerate(cmds[1:], start=2):
            if isinstance(cmd.args[0], _Literal | _Dot | _Nil):
                raise _ParseError(
                    f"non executable command in pipeline stage {stage}", cmd.args[0].start
                )

    def command(self) -> _Command:
        args: list[_Operand] = []
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand is not None:
                args.append(operand)
            token = self.next()
            if token.kind == _SPACE:
                continue
            if token.kind in (_RIGHT, _RPAREN):
                self.backup()
            elif token.kind != _PIPE:
                self.unexpected(token, "operand")
            break
        if not args:
            raise _ParseError("empty command", self.peek().pos)
        return _Command(args)

    def operand(self) -> _Operand | None:
        node = self.term()
        if node is None or self.peek().kind != _FIELD:
            return node
        fields: list[str] = []
        end = node.end
        while self.peek().kind == _FIELD:
            token = self.next()
            fields.append(token.text[1:])
            end = token.end
        if isinstance(node, _Field):
            return _Field(node.start, end, node.path + tuple(fields))
        if isinstance(node, _Variable):
            return _Variable(node.start, end, node.name, tuple(fields))
        if isinstance(node, _Literal | _Nil | _Dot):
            term = self.src[node.start : node.end]
            raise _ParseError(f"unexpected . after term {_go_quote(term)}", end - 1)
        return _Chain(node.start, end, node, tuple(fields))

    def term(self) -> _Operand | None:
        token = self.next_non_space()
        kind, start, end = token.kind, token.pos, token.end
        if kind == _IDENT:
            if token.text not in _FUNCTIONS:
                raise _ParseError(f"function {_go_quote(token.text)} not defined", start)
            return _Identifier(start, end, token.text)
        if kind == _DOT:
            return _Dot(start, end)
        if kind == _NIL:
            return _Nil(start, end)
        if kind == _VARIABLE:
            if token.text not in self.vars:
                raise _ParseError(f"undefined variable {_go_quote(token.text)}", start)
            return _Variable(start, end, token.text)
        if kind == _FIELD:
            return _Field(start, end, (token.text[1:],))
        if kind == _BOOL:
            return _Literal(start, end, token.text == "true")
        if kind in (_NUMBER, _CHAR_CONSTANT, _STRING, _RAW_STRING):
            return _Literal(start, end, self.literal(token))
        if kind == _LPAREN:
            pipe = self.pipeline("parenthesized pipeline", _RPAREN)
            return _SubPipe(start, self.tokens[self.i - 1].end, pipe)
        self.backup()
        return None

    def literal(self, token: _Token) -> Any:
        try:
            if token.kind == _NUMBER:
                return _number_value(token.text)
            if token.kind == _CHAR_CONSTANT:
                return _char_value(token.text)
            return _unquote(token.text)
        except ValueError as err:
            raise _ParseError(str(err), token.pos) from None
