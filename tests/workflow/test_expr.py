"""Tests for the condition language (awf_nb/workflow/expr/, spec §7)."""

from __future__ import annotations

import ast
import contextlib
import json
import operator
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awf_nb.workflow import expr
from awf_nb.workflow.expr import (
    FUNCTIONS,
    ExprError,
    Expression,
    ExprEvalError,
    ExprSyntaxError,
    evaluate,
    parse,
)

ENV: dict[str, Any] = {
    "inputs": {
        "mode": "fast",
        "count": "5",
        "ratio": "2.5",
        "flag": "true",
        "off": "false",
        "name": "Ünïcødé ✓",
        "padded": " 42\n",
        "text": "hello world",
        "empty": "",
        "nothing": None,
        "tags": ["a", "b", 3],
    },
    "states": {
        "build": {"ExitCode": 0, "Output": "ok: 3 passed\n", "Status": "completed"},
        "run-tests": {"ExitCode": 1, "Output": "", "Status": "failed"},
        "review": {"Response": {"verdict": "approve", "scores": [7, 9]}, "TokensUsed": 120},
    },
    "env": {"HOME": "/home/me"},
    "loop": {"Index": 2, "Index1": 3, "First": False, "Item": {"file": "a.py"}},
    "workflow": {"Name": "demo"},
    "response": "LGTM, ship it",
    "turn_count": 4,
    "zero": 0,
    "matrix": [[1, 2], [3, 4]],
}


def ev(source: str, env: dict[str, Any] | None = None) -> Any:
    return evaluate(source, ENV if env is None else env)


def syntax_error(source: str) -> ExprSyntaxError:
    with pytest.raises(ExprSyntaxError) as info:
        parse(source)
    return info.value


def eval_error(source: str, env: dict[str, Any] | None = None) -> ExprEvalError:
    with pytest.raises(ExprEvalError) as info:
        ev(source, env)
    return info.value


# --- literals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("42", 42),
        ("1_000", 1000),
        ("3.25", 3.25),
        ("1e3", 1000.0),
        ("2.5E-1", 0.25),
        ("'single'", "single"),
        ('"double"', "double"),
        ("`raw \\d+`", "raw \\d+"),
        (r"'a\nb\tc'", "a\nb\tc"),
        (r"'back\\slash'", "back\\slash"),
        (r'"say \"hi\""', 'say "hi"'),
        (r"'it\'s'", "it's"),
        (r"'\d+\.\w'", r"\d+\.\w"),  # unknown escapes keep their backslash (regexes)
        ("'日本語 ✓'", "日本語 ✓"),
        ("true", True),
        ("false", False),
        ("nil", None),
        ("[]", []),
        ("[1, 'a', true, nil]", [1, "a", True, None]),
        ("[1, [2, 3],]", [1, [2, 3]]),
    ],
)
def test_literals(source: str, expected: Any) -> None:
    assert ev(source) == expected
    assert type(ev(source)) is type(expected)


# --- paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("inputs.mode", "fast"),
        ("states.build.ExitCode", 0),
        ("states.review.Response.verdict", "approve"),
        ("states.review.Response.scores[1]", 9),
        ("states.review.Response.scores[-1]", 9),
        ('states["run-tests"].ExitCode', 1),
        ("states['build']['Status']", "completed"),
        ("matrix[1][0]", 3),
        ("matrix[0.0][1]", 2),
        ("inputs.tags[inputs.tags[2] - 2]", "b"),
        ("loop.Item.file", "a.py"),
        ("response", "LGTM, ship it"),
        ("turn_count", 4),
        ("inputs.text[0]", "h"),
        ("inputs.in", None),  # a keyword is still a field name after a dot
        ("(inputs).mode", "fast"),
    ],
)
def test_paths(source: str, expected: Any) -> None:
    assert ev(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "missing",
        "inputs.missing",
        "states.nope",
        "states.nope.Output",
        "states.build.Nope",
        "states.build.Output.deeper.still",
        "states.review.Response.scores[5]",
        "states.review.Response.scores[-3]",
        "states.review.Response.scores['x']",
        "states.review.Response.scores[nil]",
        "states.review.Response.scores[1.5]",
        "inputs[['a']]",
        "loop.Index.field",
        "turn_count[0]",
        "inputs.nothing.x[0].y",
        "missing[0]['a'].b",
    ],
)
def test_missing_paths_are_nil_at_every_depth(source: str) -> None:
    assert ev(source) is None
    # and comparisons with them are false, not errors
    for comparison in ("> 3", "< 3", ">= 'a'", "<= 0", "== 1", "contains 'a'", "matches 'x'"):
        assert ev(f"{source} {comparison}") is False
    assert ev(f"{source} == nil") is True
    assert ev(f"{source} != nil") is False
    assert ev(f"{source} != 1") is True


def test_missing_top_level_names_evaluate_with_an_empty_env() -> None:
    assert evaluate("states.build.ExitCode == 0", {}) is False
    assert evaluate("inputs.x == nil", {}) is True


def test_arithmetic_on_nil_is_nil_so_the_comparison_is_false() -> None:
    assert ev("states.nope.ExitCode + 1") is None
    assert ev("-inputs.missing") is None
    assert ev("states.nope.ExitCode * 2 > 1") is False


# --- operators and precedence ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # arithmetic
        ("1 + 2", 3),
        ("7 - 10", -3),
        ("6 * 7", 42),
        ("7 / 2", 3.5),
        ("7 % 3", 1),
        ("-7 % 3", 2),
        ("1.5 + 1", 2.5),
        ("'ab' + 'cd'", "abcd"),
        ("[1] + [2, 3]", [1, 2, 3]),
        ("-(2 + 3)", -5),
        ("- -2", 2),
        # precedence: * / % over + -, unary minus tightest, left associativity
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("100 / 10 / 5", 2.0),
        ("2 * 3 % 4", 2),
        ("-2 * 3", -6),
        ("1 + -2", -1),
        ("2 - -2", 4),
        # comparisons
        ("1 == 1", True),
        ("1 == 1.0", True),
        ("1 != 2", True),
        ("1 < 2", True),
        ("2 <= 2", True),
        ("3 > 2", True),
        ("2 >= 3", False),
        ("'abc' < 'abd'", True),
        ("'b' >= 'a'", True),
        ("[1, 'a'] == [1, 'a']", True),
        ("[1] == [1, 2]", False),
        ("nil == nil", True),
        ("nil != nil", False),
        ("true == 1", False),
        ("'1' == 1", True),
        ("'x' == 1", False),
        ("[1] == 1", False),
        ("1 + 1 == 2", True),
        ("2 * 3 > 5", True),
        # logic
        ("true and false", False),
        ("true && true", True),
        ("false or true", True),
        ("false || false", False),
        ("not true", False),
        ("!false", True),
        ("not not 1", True),
        ("!!''", False),
        # precedence: not below comparisons, and over or
        ("not 1 == 2", True),
        ("!1 == 2", True),
        ("not false and false", False),
        ("true or false and false", True),
        ("(true or false) and false", False),
        ("false and true or true", True),
        ("1 < 2 and 2 < 3", True),
        ("1 + 1 == 2 and not 'a' == 'b'", True),
        ("1 == 1 == true", True),
        # word operators
        ("'hello' contains 'ell'", True),
        ("'hello' contains 'xyz'", False),
        ("'v1.2' contains 1", True),
        ("[1, 2] contains 2", True),
        ("'hello' startsWith 'he'", True),
        ("'hello' endsWith 'lo'", True),
        ("'hello' endsWith 'he'", False),
        ("'hello' matches '^h.l+o$'", True),
        ("'a1b22' matches '\\d{2}'", True),
        ("'abc' matches 'B'", False),
        ("'hello' not contains 'z'", True),
        ("'hello' not startsWith 'he'", False),
        ("'hello' not endsWith 'x'", True),
        ("'hello' not matches '^x'", True),
        ("'x' + 'y' contains 'xy'", True),
        ("not 'abc' contains 'z'", True),
    ],
)
def test_operators(source: str, expected: Any) -> None:
    result = ev(source)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("2 in [1, 2, 3]", True),
        ("4 in [1, 2, 3]", False),
        ("'b' in ['a', 'b']", True),
        ("'2' in [1, 2]", True),  # numeric strings match numbers, as in ==
        ("nil in [1, nil]", True),
        ("'mode' in inputs", True),
        ("'nope' in inputs", False),
        ("'ell' in 'hello'", True),
        ("'z' in 'hello'", False),
        ("3 in 'a3b'", True),
        ("inputs.mode in ['fast', 'full']", True),
        ("inputs.mode not in ['fast', 'full']", False),
        ("'z' not in 'hello'", True),
        ("'build' not in states", False),
        ("'a' in inputs.missing", False),
        ("inputs.missing in ['a']", False),
        ("'a' not in inputs.missing", True),
        ("1 in [[1]]", False),
        ("[1] in [[1]]", True),
    ],
)
def test_in_and_not_in(source: str, expected: bool) -> None:
    assert ev(source) is expected


def test_and_or_short_circuit() -> None:
    # the right side would fail with a division by zero if it were evaluated
    assert ev("false and 1 / 0 == 1") is False
    assert ev("true or 1 / 0 == 1") is True
    assert ev("false && 1 % 0") is False
    assert ev("inputs.missing != nil and inputs.missing.x / 0 > 1") is False
    with pytest.raises(ExprEvalError):
        ev("true and 1 / 0 == 1")


def test_and_or_return_booleans() -> None:
    assert ev("'a' and 3") is True
    assert ev("'' or 0") is False
    assert ev("'a' or x") is True


# --- coercion of strings that look like numbers or booleans ---------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("inputs.count > 3", True),
        ("inputs.count == 5", True),
        ("inputs.count == 5.0", True),
        ("inputs.count < 5", False),
        ("3 < inputs.count", True),
        ("inputs.ratio >= 2.5", True),
        ("inputs.padded == 42", True),  # command output carries a trailing newline
        ("inputs.count + 1", 6),
        ("inputs.count * inputs.ratio", 12.5),  # two numeric strings: * has no text meaning
        ("inputs.count - '1'", 4),
        ("inputs.count / '2'", 2.5),
        ("inputs.count + '1'", "51"),  # two strings: concatenation
        ("inputs.count > '10'", True),  # two strings: compared as text
        ("-inputs.count", -5),
        ("inputs.flag == true", True),
        ("inputs.off == false", True),
        ("inputs.flag == false", False),
        ("'TRUE' == true", True),
        ("'yes' == true", False),
        ("'1' == true", False),
        ("'abc' == 3", False),
        ("'' == 0", False),
        ("'nan' == 0", False),
        ("'1e3' == 1000", True),
        ("'0x10' == 16", False),
    ],
)
def test_numeric_and_boolean_strings(source: str, expected: Any) -> None:
    result = ev(source)
    assert result == expected
    assert type(result) is type(expected)


# --- functions ------------------------------------------------------------------------------


FUNCTION_CASES: list[tuple[str, Any]] = [
    ("len('héllo')", 5),
    ("len([1, 2, 3])", 3),
    ("len(states)", 3),
    ("len(inputs.missing)", 0),
    ("lower('ÀBC')", "àbc"),
    ("upper('straße')", "STRASSE"),
    ("lower(inputs.missing)", None),
    ("trim('  x \\n')", "x"),
    ("trim('--x--', '-')", "x"),
    ("trim(nil)", None),
    ("int('42')", 42),
    ("int(' 7\\n')", 7),
    ("int(3.9)", 3),
    ("int('2.5')", 2),
    ("int(true)", 1),
    ("int(nil)", None),
    ("float('2.5')", 2.5),
    ("float(2)", 2.0),
    ("string(42)", "42"),
    ("string(2.0)", "2"),
    ("string(2.5)", "2.5"),
    ("string(true)", "true"),
    ("string(nil)", ""),
    ("string('x')", "x"),
    ("string([1, 'a', nil])", '[1, "a", null]'),
    ("string(loop.Item)", '{"file": "a.py"}'),
    ("contains('hello', 'ell')", True),
    ("contains(['a'], 'a')", True),
    ("contains(inputs.missing, 'a')", False),
    ("has_prefix('hello', 'he')", True),
    ("has_prefix('hello', 'lo')", False),
    ("has_suffix('hello', 'lo')", True),
    ("hasPrefix('hello', 'he')", True),
    ("hasSuffix('hello', 'x')", False),
    ("has_prefix(inputs.missing, 'x')", False),
    ("len(lower(inputs.name)) == 9", True),
    ("string(turn_count) + '/' + string(10)", "4/10"),
    ("int(inputs.count) % 2 == 1", True),
    ("int(" + "9" * 400 + ") > 0", True),
    ("string(float('1e300'))", "1e+300"),
]


@pytest.mark.parametrize(("source", "expected"), FUNCTION_CASES)
def test_functions(source: str, expected: Any) -> None:
    result = ev(source)
    assert result == expected
    assert type(result) is type(expected)


def test_every_function_is_tested() -> None:
    tested = {name for name in FUNCTIONS for source, _ in FUNCTION_CASES if f"{name}(" in source}
    assert tested == set(FUNCTIONS)


# --- unicode --------------------------------------------------------------------------------


def test_unicode_strings_and_names() -> None:
    env = {"données": {"clé": "café ☕"}}
    assert evaluate("données.clé == 'café ☕'", env) is True
    assert evaluate("données.clé contains '☕'", env) is True
    assert evaluate("upper(données.clé)", env) == "CAFÉ ☕"
    assert ev("inputs.name startsWith 'Ünï'") is True
    assert ev("inputs.name matches '✓$'") is True
    assert ev("len(inputs.name)") == 9
    # the column counts characters, not bytes
    assert syntax_error("'é' == ☕").column == 8


# --- regex ------------------------------------------------------------------------------------


def test_invalid_literal_regex_is_a_syntax_error_at_the_pattern() -> None:
    error = syntax_error("response matches '(unclosed'")
    assert error.column == 18
    assert "invalid regular expression" in error.message
    assert "(unclosed" in error.message


def test_invalid_regex_from_data_is_an_evaluation_error() -> None:
    error = eval_error(
        "response matches inputs.pattern", {"response": "x", "inputs": {"pattern": "[a-"}}
    )
    assert "invalid regular expression" in error.message
    assert "matches at column 10" in error.message


def test_regex_searches_anywhere_and_supports_flags() -> None:
    assert ev("response matches 'ship'") is True
    assert ev("response matches '(?i)lgtm'") is True
    assert ev("response matches `^LGTM,\\s`") is True


# --- syntax errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message", "column"),
    [
        ("inputs.x == 1)", 'unexpected token ")" at column 14', 14),
        ("(a == b) and (c))", 'unexpected token ")" at column 17', 17),
        ("a == 'abc", "unterminated string starting at column 6", 6),
        ('x == "abc\\"', "unterminated string starting at column 6", 6),
        ("x == `raw", "unterminated string starting at column 6", 6),
        ("", "empty condition at column 1", 1),
        ("   ", "empty condition at column 1", 1),
        ("a ==", "unexpected end of expression at column 5", 5),
        ("(a == b", 'unexpected end of expression at column 8 (expected ")" to close "("', 8),
        ("[1, 2", 'unexpected end of expression at column 6 (expected "]" to close "["', 6),
        ("a[1", 'unexpected end of expression at column 4 (expected "]" to close "["', 4),
        ("len(a", 'unexpected end of expression at column 6 (expected ")" to close "("', 6),
        ("a b", 'unexpected token "b" at column 3', 3),
        ("a = 1", 'unexpected character "=" at column 3 (use == to compare)', 3),
        ("a & b", 'unexpected character "&" at column 3 (use && or and)', 3),
        ("a | b", 'unexpected character "|" at column 3', 3),
        ("a == @", 'unexpected character "@" at column 6', 6),
        ("a ? b : c", 'unexpected character "?" at column 3', 3),
        ("a.", 'unexpected end of expression at column 3 (expected a field name after ".")', 3),
        ("a.1", 'unexpected token "1" at column 3', 3),
        ("and b", 'unexpected token "and" at column 1', 1),
        ("a in", "unexpected end of expression at column 5", 5),
        ("a not b", 'unexpected token "not" at column 3', 3),
        ("not in x", 'unexpected token "in" at column 5', 5),
        ("x == 12abc", 'invalid number "12abc" at column 6', 6),
        ("1__0", 'invalid number "1__0" at column 1', 1),
        ("1e999 > 1", 'number too large "1e999" at column 1', 1),
        ("foo(1)", 'unknown function "foo" at column 1', 1),
        ("x and lenn(y)", 'unknown function "lenn" at column 7 (did you mean len?', 7),
        ("len()", "len() takes 1 argument, got 0 at column 1", 1),
        ("has_prefix('a')", "has_prefix() takes 2 arguments, got 1 at column 1", 1),
        ("trim(1, 2, 3)", "trim() takes 1 or 2 arguments, got 3 at column 1", 1),
        ("inputs.x(1)", 'unexpected token "(" at column 9 (only functions can be called', 9),
        (".states.x == 1", 'unexpected token "." at column 1 (paths have no leading dot', 1),
        ("x == 1 +", "unexpected end of expression at column 9", 9),
        ("[,]", 'unexpected token "," at column 2', 2),
        ("()", 'unexpected token ")" at column 2', 2),
        ("a == {", 'unexpected character "{" at column 6', 6),
    ],
)
def test_syntax_errors_name_the_column(source: str, message: str, column: int) -> None:
    error = syntax_error(source)
    assert error.message.startswith(message), error.message
    assert error.column == column
    assert str(error) == error.message
    assert isinstance(error, ExprError)
    assert isinstance(error, ValueError)


def test_templates_are_refused_with_the_plain_expression_to_write() -> None:
    error = syntax_error("{{.states.build.ExitCode}} == 0")
    assert error.column == 1
    assert "conditions take plain expressions like `states.build.ExitCode == 0`" in error.message
    assert "not templates" in error.message
    assert "write `states.build.ExitCode == 0`" in error.message
    error = syntax_error("inputs.x == '' or {{- .inputs.y -}} == 'yes'")
    assert error.column == 19
    assert "write `inputs.x == '' or inputs.y == 'yes'`" in error.message
    assert "not templates" in syntax_error("{{ if .x }}y{{ end }}").message
    # braces inside a string literal are just text
    assert ev("'{{x}}' contains '{{'") is True


def test_nesting_is_bounded() -> None:
    deep = "(" * 300 + "1" + ")" * 300
    error = syntax_error(deep)
    assert "nested too deeply" in error.message
    assert "nested too deeply" in syntax_error("not " * 300 + "true").message
    # nesting up to the limit is fine
    assert ev("(" * 40 + "1" + ")" * 40) == 1


def test_long_flat_chains_do_not_recurse() -> None:
    assert ev(" + ".join(["1"] * 5000)) == 5000
    assert ev(" or ".join(["false"] * 5000 + ["true"])) is True
    assert ev("matrix" + "[0]" * 2 + ".x" * 3000) is None


def test_syntax_error_pickles_with_its_column() -> None:
    error = syntax_error("a ==")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.column) == (error.message, error.column)


# --- evaluation errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "fragments"),
    [
        ("'a' < [1]", ['cannot compare string "a" with list using < at column 5']),
        ("inputs.mode > 3", ['cannot compare string "fast" with int 3', "looks like one"]),
        ("true < false", ["cannot compare bool true with bool false using <"]),
        ("loop.Item >= 1", ["cannot compare map with int 1 using >="]),
        ("1 / 0", ["division by zero at column 3"]),
        ("5 % zero", ["modulo by zero at column 3"]),
        ("1.5 / 0.0", ["division by zero"]),
        ("'a' + 1", ['cannot apply + to string "a" and int 1', "string(x)"]),
        ("[1] - [1]", ["cannot apply - to list and list"]),
        ("true * 2", ["cannot apply * to bool true and int 2"]),
        ("-'abc'", ['cannot negate string "abc" at column 1']),
        ("-[1]", ["cannot negate list"]),
        ("1 contains 1", ["contains at column 3 needs a string, list or map, got int 1"]),
        ("1 in 5", ["in at column 3 needs a string, list or map, got int 5"]),
        ("[1] in 'abc'", ["cannot look for list in a string"]),
        ("1 startsWith 'a'", ["startsWith at column 3 needs two strings, got int 1 and string"]),
        ("'a' endsWith 1", ["needs two strings"]),
        ("1 matches 'a'", ["matches at column 3 needs two strings"]),
        ("len(5)", ["len() at column 1 needs a string, list or map, got int 5"]),
        ("lower(1)", ["lower() at column 1 needs a string, got int 1"]),
        ("upper([1])", ["upper() at column 1 needs a string, got list"]),
        ("trim(1)", ["trim() at column 1 needs strings, got int 1"]),
        ("trim('x', 1)", ['trim() at column 1 needs strings, got string "x" and int 1']),
        ("float(" + "9" * 400 + ")", ["number too large for a float"]),
        ("int('abc')", ['int() at column 1 cannot convert string "abc" to a number']),
        ("float([1])", ["float() at column 1 cannot convert list to a number"]),
        ("has_prefix(1, 'a')", ["has_prefix() at column 1 needs two strings"]),
        ("contains(1, 'a')", ["contains() at column 1 needs a string, list or map"]),
        ("9" * 400 + " / 0.5", ["number too large in /"]),
    ],
)
def test_evaluation_errors_say_what_the_types_were(source: str, fragments: list[str]) -> None:
    error = eval_error(source)
    for fragment in fragments:
        assert fragment in error.message
    assert isinstance(error, ExprError)
    assert isinstance(error, ValueError)


def test_long_values_are_shortened_in_messages() -> None:
    error = eval_error("inputs.big < [1]", {"inputs": {"big": "x" * 500}})
    assert len(error.message) < 150


def test_self_nested_data_is_an_evaluation_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    other: list[Any] = []
    other.append(other)
    with pytest.raises(ExprEvalError, match="nested too deeply"):
        evaluate("a == b", {"a": cyclic, "b": other})


def test_non_mapping_environment_and_non_string_source_are_type_errors() -> None:
    with pytest.raises(TypeError, match="mapping"):
        parse("a").evaluate(["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a string"):
        parse(1)  # type: ignore[arg-type]


# --- the Expression object ------------------------------------------------------------------


def test_parse_is_cached_and_expressions_evaluate_many_times() -> None:
    source = "loop.Index < 3"
    expression = parse(source)
    assert parse(source) is expression
    assert isinstance(expression, Expression)
    assert expression.source == source
    results = [expression.is_true({"loop": {"Index": i}}) for i in range(5)]
    assert results == [True, True, True, False, False]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'x'", True),
        ("''", False),
        ("0", False),
        ("0.0", False),
        ("2", True),
        ("[]", False),
        ("[0]", True),
        ("inputs", True),
        ("inputs.missing", False),
        ("nil", False),
        ("states.build.ExitCode", False),
    ],
)
def test_is_true_uses_python_truthiness(source: str, expected: bool) -> None:
    assert parse(source).is_true(ENV) is expected


def test_evaluate_returns_the_value_not_just_truth() -> None:
    assert parse("turn_count * 2").evaluate(ENV) == 8
    assert parse("states.review.Response").evaluate(ENV) == {
        "verdict": "approve",
        "scores": [7, 9],
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("states.build.ExitCode == 0", [("states", "build", "ExitCode")]),
        (
            "inputs.mode == 'x' and states.build.Output contains inputs.needle",
            [("inputs", "mode"), ("states", "build", "Output"), ("inputs", "needle")],
        ),
        ("response", [("response",)]),
        ("turn_count >= 3 or turn_count < 0", [("turn_count",)]),
        ('states["run-tests"].ExitCode', [("states", "run-tests", "ExitCode")]),
        ("loop.Item[0].name", [("loop", "Item")]),
        ("a[b.c].d", [("a",), ("b", "c")]),
        ("len(inputs.list) > 0", [("inputs", "list")]),
        ("[inputs.a, -inputs.b]", [("inputs", "a"), ("inputs", "b")]),
        ("not env.CI", [("env", "CI")]),
        ("1 + 2 == 3 and 'x' in ['x']", []),
        ("true and nil == false", []),
        ("lower(x).y", [("x",)]),
    ],
)
def test_references_list_every_path_in_order(source: str, expected: list[tuple[str, ...]]) -> None:
    assert parse(source).references() == expected


def test_references_returns_a_fresh_list() -> None:
    expression = parse("a.b")
    expression.references().clear()
    assert expression.references() == [("a", "b")]


def test_the_package_does_not_use_python_eval() -> None:
    sources = sorted(Path(expr.__file__).parent.glob("*.py"))
    assert len(sources) > 3  # every module of the package, not just __init__
    called = {
        node.func.id
        for source in sources
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not called & {"eval", "exec", "compile", "__import__", "getattr"}
    assert ev("__import__") is None  # just an unknown name
    assert ev("inputs.__class__") is None  # no attribute access, only keys


# --- property tests -------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_parse_of_arbitrary_text_only_raises_syntax_errors(text: str) -> None:
    try:
        expression = parse(text)
    except ExprSyntaxError as error:
        assert 1 <= error.column <= len(text) + 1
        return
    with contextlib.suppress(ExprEvalError):
        expression.evaluate(ENV)


_TOKENS = [
    "a", "b", ".", "(", ")", "[", "]", ",", "1", "2.5", "'s'", '"t"', "==", "!=", "<", ">=",
    "and", "or", "not", "!", "&&", "||", "+", "-", "*", "/", "%", "in", "contains", "matches",
    "startsWith", "len", "nil", "true", " ", "{{", "`", "'", "\\",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=25))
def test_token_soup_only_raises_expr_errors(tokens: list[str]) -> None:
    # random text rarely gets past the lexer; token soup reaches every parser branch
    text = " ".join(tokens)
    try:
        parse(text).evaluate({"a": {"b": [1, "x"]}, "b": "2"})
    except ExprSyntaxError as error:
        assert 1 <= error.column <= len(text) + 1
    except ExprEvalError:
        pass


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["5", " 7\n", "2.5", "true", "false", "1e400", "-0", 10**400]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "0"]), children, max_size=3)
    ),
    max_leaves=8,
)

_NAMES = ["x", "y", "inputs", "states", "missing"]
_BINARY = ["==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "and", "or", "&&", "||"]
_BINARY += ["in", "not in", "contains", "startsWith", "endsWith", "matches", "not matches"]


def _literal_source(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(abs(value)) if value == value and abs(value) != float("inf") else "1"
    if isinstance(value, int):
        return str(abs(value))
    return "nil"


def _call_source(draw_args: tuple[str, list[str]]) -> str:
    name, args = draw_args
    function = FUNCTIONS[name]
    return f"{name}({', '.join(args[: function.max_args] or ['nil'])})"


_leaf_sources = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 10**6),
    st.floats(0, allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
).map(_literal_source) | st.builds(
    lambda root, fields: root + "".join(fields),
    st.sampled_from(_NAMES),
    st.lists(st.sampled_from([".x", ".y", "[0]", "['x']", "[-1]", ".Output"]), max_size=3),
)


def _compose(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.builds(
        lambda a, op, b: f"({a}) {op} ({b})", children, st.sampled_from(_BINARY), children
    )
    unary = st.builds(lambda op, a: f"{op}({a})", st.sampled_from(["not ", "!", "-"]), children)
    lists = st.lists(children, max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
    calls = st.tuples(
        st.sampled_from(sorted(FUNCTIONS)), st.lists(children, min_size=2, max_size=2)
    ).map(_call_source)
    index = st.builds(lambda a, b: f"({a})[{b}]", children, children)
    return binary | unary | lists | calls | index


_EXPRESSIONS = st.recursive(_leaf_sources, _compose, max_leaves=12)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_EXPRESSIONS, _JSON_VALUES, _JSON_VALUES)
def test_well_formed_expressions_evaluate_without_non_expr_errors(
    source: str, x: Any, y: Any
) -> None:
    env = {"x": x, "y": y, "inputs": {"x": x}, "states": {"y": {"Output": y}}}
    try:
        expression = parse(source)
    except ExprSyntaxError as error:
        # a generated string literal can still be an invalid regular expression
        assert "invalid regular expression" in error.message, (source, error.message)
        return
    try:
        value = expression.evaluate(env)
    except ExprEvalError:
        return
    assert expression.is_true(env) is bool(value)
    assert all(isinstance(path, tuple) and path for path in expression.references())


# A typed expression tree rendered with the fewest parentheses the precedence table allows:
# if the parser got a precedence or an associativity wrong, the value would differ.
_PRECEDENCE = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "neg": 7, "atom": 8}
_PY_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le}
_PY_CMP |= {">": operator.gt, ">=": operator.ge}


def _render_child(child: tuple[str, int, Any], parent: int, right_of_left_assoc: bool) -> str:
    text, level, _ = child
    if level < parent or (right_of_left_assoc and level == parent):
        return f"({text})"
    return text


def _int_binary(args: tuple[tuple[str, int, Any], str, tuple[str, int, Any]]):
    left, op, right = args
    level = _PRECEDENCE[op]
    text = f"{_render_child(left, level, False)} {op} {_render_child(right, level, True)}"
    value = {"+": operator.add, "-": operator.sub, "*": operator.mul}[op](left[2], right[2])
    return text, level, value


def _int_negate(child: tuple[str, int, Any]):
    return f"-{_render_child(child, _PRECEDENCE['neg'], False)}", _PRECEDENCE["neg"], -child[2]


_INT_TREES = st.recursive(
    st.integers(0, 50).map(lambda n: (str(n), _PRECEDENCE["atom"], n)),
    lambda kids: (
        st.tuples(kids, st.sampled_from(["+", "-", "*"]), kids).map(_int_binary)
        | kids.map(_int_negate)
    ),
    max_leaves=10,
)


def _compare(args: tuple[tuple[str, int, Any], str, tuple[str, int, Any]]):
    left, op, right = args
    level = _PRECEDENCE["cmp"]
    text = f"{_render_child(left, level, False)} {op} {_render_child(right, level, True)}"
    return text, level, _PY_CMP[op](left[2], right[2])


def _logic(args: tuple[tuple[str, int, Any], str, tuple[str, int, Any]]):
    left, spelling, right = args
    op = {"and": "and", "&&": "and", "or": "or", "||": "or"}[spelling]
    level = _PRECEDENCE[op]
    text = f"{_render_child(left, level, False)} {spelling} {_render_child(right, level, True)}"
    value = (left[2] and right[2]) if op == "and" else (left[2] or right[2])
    return text, level, value


def _negation(args: tuple[str, tuple[str, int, Any]]):
    spelling, child = args
    level = _PRECEDENCE["not"]
    return f"{spelling}{_render_child(child, level, False)}", level, not child[2]


_BOOL_TREES = st.recursive(
    st.booleans().map(lambda b: ("true" if b else "false", _PRECEDENCE["atom"], b))
    | st.tuples(_INT_TREES, st.sampled_from(sorted(_PY_CMP)), _INT_TREES).map(_compare),
    lambda kids: (
        st.tuples(kids, st.sampled_from(["and", "&&", "or", "||"]), kids).map(_logic)
        | st.tuples(st.sampled_from(["not ", "!"]), kids).map(_negation)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_INT_TREES)
def test_arithmetic_precedence_and_associativity(tree: tuple[str, int, Any]) -> None:
    text, _, expected = tree
    assert evaluate(text, {}) == expected, text


@settings(max_examples=300, deadline=None)
@given(_BOOL_TREES)
def test_logic_and_comparison_precedence(tree: tuple[str, int, Any]) -> None:
    text, _, expected = tree
    assert evaluate(text, {}) is expected, text
