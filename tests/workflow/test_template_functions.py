"""Tests for template functions and Go value formatting (awf_nb/workflow/template/).

Every builtin (`and or not len index slice print printf println eq ne lt le gt ge html
urlquery js`) and AWF function (`escape json split join trimSpace readFile`), with their
error paths, plus how values print (`%v`) and printf's verbs.
"""

from __future__ import annotations

import math
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from awf_nb.workflow.template import (
    MAX_READ_FILE_BYTES,
    TemplateRenderError,
    TemplateSyntaxError,
    parse,
    render,
)

DATA: dict[str, Any] = {
    "list": ["a", "b", "c"],
    "nums": [1, 2],
    "map": {"b": [1], "a": 1},
    "nil": None,
    "float": 3.0,
    "int": 42,
    "quote": "it's",
    "text": "  padded \n",
    "nested": {"k": ["x", {"y": None}]},
}


def r(source: str, data: Any = DATA, **kw: Any) -> str:
    return render(source, data, **kw)


def reason(source: str, data: Any = DATA, **kw: Any) -> str:
    with pytest.raises(TemplateRenderError) as info:
        render(source, data, **kw)
    return info.value.reason


# --- printing values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", "text"),
        (True, "true"),
        (False, "false"),
        (42, "42"),
        (-7, "-7"),
        (3.0, "3"),
        (2.5, "2.5"),
        (-0.0, "-0"),
        (0.0, "0"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),  # the well-known Go template float gotcha
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-300, "1.5e-300"),
        (0.1 + 0.2, "0.30000000000000004"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (None, "<no value>"),
        ([], "[]"),
        (["a", ["b", "c"], {"k": "v"}, None, True, 1.5], "[a [b c] map[k:v] <nil> true 1.5]"),
        (("x", 1), "[x 1]"),
        ({"b": [1], "a": 1}, "map[a:1 b:[1]]"),
        ({}, "map[]"),
        ({2: "two", 1: "one"}, "map[1:one 2:two]"),
        ({1: "int", "s": "str"}, "map[1:int s:str]"),
        (Path("/tmp/x"), "/tmp/x"),
    ],
)
def test_values_print_like_go(value: Any, expected: str) -> None:
    assert r("{{.v}}", {"v": value}) == expected


# --- and / or / not ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{and 1 0 2}}", "0"),
        ("{{and 1 2}}", "2"),
        ('{{and "x"}}', "x"),
        ('{{or 0 "" "x"}}', "x"),
        ('{{or 0 ""}}', ""),
        ("{{or .nil 0}}", "0"),
        ("{{0 | and 1}}", "0"),
        ("{{2 | and 1}}", "2"),
        ("{{1 | or 0}}", "1"),
        ("{{and false (index .list 99)}}", "false"),  # short-circuit: index never runs
        ("{{or true (len 3)}}", "true"),
        ('{{not 0}} {{not 1}} {{not ""}} {{not .list}} {{not .nil}}', "true false true false true"),
    ],
)
def test_and_or_not(source: str, expected: str) -> None:
    assert r(source) == expected


def test_and_or_not_argument_counts() -> None:
    assert reason("{{and}}") == "wrong number of args for and: want at least 1 got 0"
    assert reason("{{or}}") == "wrong number of args for or: want at least 1 got 0"
    assert reason("{{not 1 2}}") == "wrong number of args for not: want 1 got 2"
    assert reason("{{and 1 (len 3)}}") == "error calling len: len of type int"


# --- len / index / slice -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{len "hello"}}', "5"),
        ('{{len "héllo"}}', "6"),  # Go counts bytes
        ("{{len .list}} {{len .map}} {{len .nested.k}}", "3 2 2"),
        ("{{index .list 1}}", "b"),
        ('{{index .map "b" 0}}', "1"),
        ('{{index .nested "k" 1 "y"}}', "<no value>"),
        ('{{index .map "zz"}}', "<no value>"),  # a missing key gives the zero value
        ("{{index .list}}", "[a b c]"),
        ('{{index "abc" 1}}', "98"),
        ('{{slice "hello" 1 3}}', "el"),
        ('{{slice "hello" 2}}', "llo"),
        ('{{slice "hello"}}', "hello"),
        ("{{slice .list 1}}", "[b c]"),
        ("{{slice .list 1 2 3}}", "[b]"),
        ("{{slice .list 3}}", "[]"),
        ("{{slice .list 0 3}}", "[a b c]"),
    ],
)
def test_len_index_slice(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{len .nil}}", "error calling len: len of nil pointer"),
        ("{{len 3}}", "error calling len: len of type int"),
        ("{{len}}", "wrong number of args for len: want 1 got 0"),
        ("{{index .list 3}}", "error calling index: index out of range: 3"),
        ("{{index .list -1}}", "error calling index: index out of range: -1"),
        ('{{index .list "0"}}', "error calling index: cannot index slice/array with type string"),
        ("{{index .list .nil}}", "error calling index: cannot index slice/array with nil"),
        ("{{index .nil 0}}", "error calling index: index of untyped nil"),
        ("{{index 3 0}}", "error calling index: can't index item of type int"),
        ("{{index .map .list}}", "error calling index: cannot use a list as a map key"),
        ('{{index .nested "k" 1 "y" 0}}', "error calling index: index of nil pointer"),
        ('{{slice "hello" 1 2 3}}', "error calling slice: cannot 3-index slice a string"),
        ("{{slice .list 0 1 2 3}}", "error calling slice: too many slice indexes: 4"),
        ("{{slice .list 2 1}}", "error calling slice: invalid slice index: 2 > 1"),
        ("{{slice .list 0 2 1}}", "error calling slice: invalid slice index: 2 > 1"),
        ("{{slice .list 4}}", "error calling slice: index out of range: 4"),
        ("{{slice .nil 1}}", "error calling slice: slice of untyped nil"),
        ("{{slice .map 1}}", "error calling slice: can't slice item of type map"),
    ],
)
def test_len_index_slice_errors(source: str, expected: str) -> None:
    assert reason(source) == expected


# --- print / println / printf ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{print 1 2}}", "1 2"),
        ('{{print "a" "b"}}', "ab"),
        ('{{print "a" 1 2 "b"}}', "a1 2b"),
        ("{{print nil .list}}", "<nil> [a b c]"),
        ("{{print}}", ""),
        ('{{println 1 "a"}}', "1 a\n"),
        ("{{println}}", "\n"),
    ],
)
def test_print_and_println(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("fmt", "args", "expected"),
    [
        ("%s|%d|%v|%t|%%", '"a" 42 .list true', "a|42|[a b c]|true|%"),
        ("%q %q %#q", '"q\\n" 97 "a"', "\"q\\n\" 'a' `a`"),
        (
            "%f %.2f %6.2f| %e %E %g %G",
            "1.5 3.14159 3.14159 1234.5678 0.5 0.000012 1e-7",
            "1.500000 3.14   3.14| 1.234568e+03 5.000000E-01 1.2e-05 1E-07",
        ),
        (
            "%x %X %#x %o %O %b %c %U %#U",
            "255 255 255 8 8 5 65 65 9731",
            "ff FF 0xff 10 0o10 101 A U+0041 U+2603 '☃'",
        ),
        ("%x|%X|% x|%#x", '"hi" "hi" "hi" "hi"', "6869|6869|68 69|0x6869"),
        ("%5d|%-5s|%05d|%+d|% d|%.3d", '42 "ab" 42 3 4 7', "   42|ab   |00042|+3| 4|007"),
        ("%08.3f|%+.1e|%-8.2f|", "-3.5 12345.0 2.0", "-003.500|+1.2e+04|2.00    |"),
        ("%*d|%-*d|%.*f", "5 1 3 2 2 3.14159", "    1|2  |3.14"),
        ("%.3s|%.1q|%10.2s|", '"abcdef" "xyz" "hello"', 'abc|"x"|        he|'),
        ("%[2]s %[1]s %s", '"a" "b"', "b a b"),
        (
            "%T %T %T %T %T %T %T",
            '1 1.5 "s" true .list .map .nil',
            "int float64 string bool []interface {} map[string]interface {} <nil>",
        ),
        ("%v %s %d", ".map .list .nums", "map[a:1 b:[1]] [a b c] [1 2]"),
        ("%.2f %d", "3 .int", "3.00 42"),
        ("%x %v", "1.5 1e21", "0x1.8p+00 1e+21"),
        ("%v %s", ".nil .float", "<nil> %!s(float64=3)"),
        ("%d", "", "%!d(MISSING)"),
        ("%d", "1 2", "1%!(EXTRA int=2)"),
        ("%d %s", '"hi" nil', "%!d(string=hi) %!s(<nil>)"),
        ("%z", "1", "%!z(int=1)"),
        ("%t", "1", "%!t(int=1)"),
        ("%d", "true", "%!d(bool=true)"),
        ("abc%", "", "abc%!(NOVERB)"),
        ("%[3]d", "1", "%!d(BADINDEX)"),
        ("%*d", '"x" 1', "%!(BADWIDTH)1"),
        ("%.*d", '"x" 1', "%!(BADPREC)1"),
        ("%c %c", "-1 1114112", "\ufffd \ufffd"),
        ("%v %f %v", "", "%!v(MISSING) %!f(MISSING) %!v(MISSING)"),
        ("no verbs", "", "no verbs"),
        ("%d", '"a" | len', "1"),
    ],
)
def test_printf(fmt: str, args: str, expected: str) -> None:
    template = f'{{{{printf "{fmt}" {args}}}}}'
    if "|" in args:
        template = f'{{{{{args.split("|")[0]} | {args.split("|")[1].strip()} | printf "{fmt}"}}}}'
    assert r(template) == expected


def test_printf_special_floats() -> None:
    data = {"nan": math.nan, "inf": math.inf, "ninf": -math.inf}
    assert r('{{printf "%f %v %.2f %e" .nan .inf .ninf .inf}}', data) == "NaN +Inf -Inf +Inf"


def test_printf_errors() -> None:
    assert reason("{{printf 3}}") == "error calling printf: argument 1 must be a string, got int"
    assert reason("{{printf}}") == "wrong number of args for printf: want at least 1 got 0"


# --- comparisons ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{eq 1 1}} {{eq 1 2}} {{eq 1 2 3 1}} {{eq 1 2 3}}", "true false true false"),
        ('{{eq "a" "a"}} {{eq true true}} {{eq 1.5 1.5}}', "true true true"),
        ("{{eq 1 1.0}} {{eq .float 3}}", "true true"),  # numbers compare by value
        ('{{eq .nil "x"}} {{eq .nil .nil}} {{eq 1 .nil}}', "false true false"),
        ('{{ne 1 2}} {{ne "a" "a"}}', "true false"),
        ('{{lt 1 2}} {{lt 2 1}} {{lt 1 2.5}} {{lt "a" "b"}}', "true false true true"),
        ('{{le 2 2}} {{le 3 2}} {{le "b" "a"}}', "true false false"),
        ("{{gt 3 2}} {{gt 2 2}} {{ge 2 2}} {{ge 1 2}}", "true false true false"),
        ("{{if and (ge .int 10) (lt .int 100)}}two digits{{end}}", "two digits"),
        ("{{.int | eq 42}}", "true"),
    ],
)
def test_comparisons(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{eq "1" 1}}', "error calling eq: incompatible types for comparison: string and int"),
        ("{{eq true 1}}", "error calling eq: incompatible types for comparison: bool and int"),
        ("{{eq .list .list}}", "error calling eq: non-comparable type [a b c]: []interface {}"),
        ("{{eq 1}}", "error calling eq: missing argument for comparison"),
        ("{{ne 1}}", "wrong number of args for ne: want 2 got 1"),
        ('{{lt 1 "a"}}', "error calling lt: incompatible types for comparison: int and string"),
        ("{{lt true false}}", "error calling lt: invalid type for comparison: bool"),
        ("{{gt .nil 1}}", "error calling gt: invalid type for comparison: nil value"),
        ("{{le .list 1}}", "error calling le: invalid type for comparison: list"),
        ("{{ge .map 1}}", "error calling ge: invalid type for comparison: map"),
    ],
)
def test_comparison_errors(source: str, expected: str) -> None:
    assert reason(source) == expected


# --- html / js / urlquery ------------------------------------------------------------------------


def test_html() -> None:
    data = {"s": "<a href='x'>&\"</a>\x00"}
    assert r("{{html .s}}", data) == "&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;\ufffd"
    assert r("{{html 1 2}}", data) == "1 2"
    assert r("{{html .nil}}") == "&lt;no value&gt;"
    assert r("{{.s | html}}", data) == r("{{html .s}}", data)


def test_js() -> None:
    data = {"s": 'it\'s <b>"x"=\\\n\x01é\u2028'}
    assert r("{{js .s}}", data) == (
        'it\\\'s \\u003Cb\\u003E\\"x\\"\\u003D\\\\\\u000A\\u0001é\\u2028'
    )
    assert r("{{js 1 2}}") == "1 2"


def test_urlquery() -> None:
    assert r('{{urlquery "a b&c=d/é~_.-"}}') == "a+b%26c%3Dd%2F%C3%A9~_.-"
    assert r('{{urlquery "a" 1}}') == "a1"


# --- AWF functions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("it's", "'it'\"'\"'s'"),
        ("", "''"),
        ("plain", "'plain'"),
        ('$(rm -rf /); `x` "y" \\ \n', "'$(rm -rf /); `x` \"y\" \\ \n'"),
        (3, "'3'"),
        (["a", "b"], "'[a b]'"),
    ],
)
def test_escape(value: Any, expected: str) -> None:
    assert r("{{escape .v}}", {"v": value}) == expected
    assert r("{{.v | escape}}", {"v": value}) == expected


@pytest.mark.parametrize("text", ["it's", "a'b''c", '$HOME `id` "q" \\n *', "", "\t\n", "é ☃"])
def test_escape_survives_a_real_shell(text: str) -> None:
    command = r("printf '%s' {{escape .v}}", {"v": text})
    result = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=10, check=True
    )
    assert result.stdout == text
    assert shlex.split(r("{{escape .v}}", {"v": text})) == [text]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": [1, 2.5, None], "a": True}, '{"a":true,"b":[1,2.5,null]}'),
        ("<&>", '"\\u003c\\u0026\\u003e"'),
        ('é\n"\u2028', '"é\\n\\"\\u2028"'),
        (3.0, "3"),
        (-0.0, "-0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (None, "null"),
        ([], "[]"),
        ({}, "{}"),
        ({2: "x"}, '{"2":"x"}'),
        (("a",), '["a"]'),
    ],
)
def test_json(value: Any, expected: str) -> None:
    assert r("{{json .v}}", {"v": value}) == expected


def test_json_errors() -> None:
    assert (
        reason("{{json .v}}", {"v": math.nan}) == "error calling json: json: unsupported value: NaN"
    )
    assert reason("{{json .v}}", {"v": object()}) == (
        "error calling json: json: unsupported type: object"
    )
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    assert "nested too deeply" in reason("{{json .v}}", {"v": deep})


def test_json_of_dates() -> None:
    from datetime import UTC, datetime

    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert r("{{json .v}}", {"v": when}) == '"2024-05-01T12:00:00+00:00"'


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{split "a, b ,c" ","}}', "[a b c]"),
        ('{{split "abc" ""}}', "[a b c]"),
        ('{{split "" ","}}', "[]"),  # one empty element prints as [] too
        ('{{len (split "" ",")}}', "1"),
        ('{{index (split "x|y" "|") 1}}', "y"),
        ('{{range split "1,2" ","}}<{{.}}>{{end}}', "<1><2>"),
        ('{{join .list ", "}}', "a, b, c"),
        ('{{join .nums "+"}}', "1+2"),
        ('{{join (split "1, 2" ",") "-"}}', "1-2"),
        ('{{join .empty ","}}', ""),
        ("{{trimSpace .text}}", "padded"),
        ('{{trimSpace "\\u00a0 x \\u3000"}}', "x"),
        ('{{trimSpace "\\x1fx"}}', "\x1fx"),  # not a space for Go
        ('{{.text | trimSpace | printf "[%s]"}}', "[padded]"),
    ],
)
def test_split_join_trim_space(source: str, expected: str) -> None:
    assert r(source, {**DATA, "empty": []}) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{split 1 ","}}', "error calling split: argument 1 must be a string, got int"),
        ('{{split "a" .nil}}', "error calling split: argument 2 must be a string, got nil value"),
        ('{{join "abc" ","}}', "error calling join: argument 1 must be a list, got string"),
        ("{{join .list 1}}", "error calling join: argument 2 must be a string, got int"),
        ("{{trimSpace .list}}", "error calling trimSpace: argument 1 must be a string, got list"),
        ('{{split "a"}}', "wrong number of args for split: want 2 got 1"),
        ("{{escape}}", "wrong number of args for escape: want 1 got 0"),
        ("{{json 1 2}}", "wrong number of args for json: want 1 got 2"),
    ],
)
def test_awf_function_errors(source: str, expected: str) -> None:
    assert reason(source) == expected


def test_read_file_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "p.md").write_text("Hello é\n", encoding="utf-8")
    assert r('{{readFile "prompts/p.md"}}', base_dir=tmp_path) == "Hello é\n"
    assert r('{{readFile "prompts/p.md" | trimSpace}}', base_dir=tmp_path) == "Hello é"
    absolute = str(tmp_path / "prompts" / "p.md")
    assert r("{{readFile .p}}", {"p": absolute}) == "Hello é\n"


def test_read_file_defaults_to_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f.txt").write_text("cwd file", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert r('{{readFile "f.txt"}}') == "cwd file"


def test_read_file_size_limit(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_bytes(b"x" * MAX_READ_FILE_BYTES)
    (tmp_path / "big.txt").write_bytes(b"x" * (MAX_READ_FILE_BYTES + 1))
    assert len(r('{{readFile "ok.txt"}}', base_dir=tmp_path)) == MAX_READ_FILE_BYTES
    assert reason('{{readFile "big.txt"}}', base_dir=tmp_path) == (
        'error calling readFile: file "big.txt" exceeds 1MB size limit'
    )


def test_read_file_errors(tmp_path: Path) -> None:
    missing = reason('{{readFile "nope.txt"}}', base_dir=tmp_path)
    assert missing.startswith('error calling readFile: failed to read file "nope.txt": no such')
    assert reason('{{readFile "."}}', base_dir=tmp_path) == (
        'error calling readFile: failed to read file ".": path is a directory'
    )
    assert reason("{{readFile 1}}") == (
        "error calling readFile: argument 1 must be a string, got int"
    )


def test_read_file_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"a\xffb")
    assert r('{{readFile "bin"}}', base_dir=tmp_path) == "a\ufffdb"


def test_unknown_function_is_a_parse_error() -> None:
    with pytest.raises(TemplateSyntaxError, match='function "upper" not defined'):
        parse("{{upper .x}}")
