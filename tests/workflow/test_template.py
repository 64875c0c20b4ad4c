"""Tests for the Go text/template interpreter (awf_nb/workflow/template/, spec §6).

Syntax, fields and namespaces, control flow, variables, named templates, error messages,
references(), caching, and property tests. The functions and value formatting are in
test_template_functions.py.
"""

from __future__ import annotations

import contextlib
import copy
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awf_nb.workflow import template as template_module
from awf_nb.workflow.template import (
    FieldRef,
    Template,
    TemplateError,
    TemplateRenderError,
    TemplateSyntaxError,
    parse,
    render,
)

DATA: dict[str, Any] = {
    "inputs": {
        "topic": "cats",
        "count": 3,
        "ratio": 2.5,
        "empty": "",
        "zero": 0,
        "list": ["a", "b", "c"],
        "nums": [3, 1, 2],
        "map": {"b": 2, "a": 1},
        "nil": None,
        "my-key": "dash",
        "nested": {"deep": {"value": "x"}},
        "flag": True,
        "people": [{"name": "ann"}, {"name": "bob"}],
    },
    "states": {
        "review": {
            "Output": "LGTM",
            "ExitCode": 0,
            "Response": None,
            "Status": "completed",
            "Conversation": {"TotalTurns": 2},
            "conversation": {"total_turns": 2},
        },
    },
    "env": {"HOME": "/home/u"},
    "workflow": {"ID": "run-1", "Name": "demo"},
    "context": {"WorkingDir": "/w", "User": "u", "Hostname": "h"},
    "loop": {
        "Item": {"name": "n1"},
        "Index": 0,
        "Index1": 1,
        "First": True,
        "Last": False,
        "Length": 2,
        "Parent": {"Index": 4, "Index1": 5, "Item": "outer"},
    },
    "error": {"Message": "boom", "State": "build", "ExitCode": 2, "Type": "execution"},
}


def r(source: str, data: Any = DATA, **kw: Any) -> str:
    return render(source, data, **kw)


def syntax_error(source: str, name: str = "template") -> TemplateSyntaxError:
    with pytest.raises(TemplateSyntaxError) as info:
        parse(source, name=name)
    return info.value


def render_error(source: str, data: Any = DATA, name: str = "template") -> TemplateRenderError:
    with pytest.raises(TemplateRenderError) as info:
        render(source, data, name=name)
    return info.value


# --- text, trim markers, comments -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("plain text", "plain text"),
        ("", ""),
        ("a }} b", "a }} b"),
        ("a {{- 1 -}} b", "a1b"),
        ("a {{-1}} b", "a -1 b"),  # no space after "-": the number -1, nothing trimmed
        ("a {{1 -}}\n\n\t b", "a 1b"),
        ("a \t\r\n{{- 1}}", "a1"),
        ("{{- 1}}", "1"),
        ("{{1 -}}", "1"),
        ("a  {{- 1}}  b", "a1  b"),
        ("a  {{1 -}}  b", "a  1b"),
        ("a\u00a0{{- 1}}", "a\u00a01"),  # only Go's four space characters are trimmed
        ("x {{- 1 -}} {{- 2 -}} y", "x12y"),
        ("a {{1\t-}} b", "a 1b"),  # any of the four spaces can precede the marker
        ("a {{-\n1}} b", "a1 b"),
        ("line1\n{{- /* comment */ -}}\nline2", "line1line2"),
        ("a {{/* c */}} b", "a  b"),
        ("a{{/* multi\nline {{ }} */}}b", "ab"),
        ("{{/**/}}x", "x"),
        ("{{if true}}\n  {{- .inputs.topic -}}\n{{end}}", "cats"),
    ],
)
def test_text_trim_markers_and_comments(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{/* c */ }}", "comment ends before closing delimiter"),
        ("{{/* c", "unclosed comment"),
        ("{{ /* c */ }}", 'unexpected "/" in command'),
        ("{{.x-}}", "bad character U+002D '-'"),
        ("{{1-}}", 'bad number syntax: "1-"'),
        ("{{ - }}", 'illegal number syntax: "-"'),
    ],
)
def test_trim_and_comment_errors(source: str, message: str) -> None:
    assert syntax_error(source).message == message


def test_static_templates() -> None:
    assert parse("no actions }} here").is_static
    assert not parse("{{/* only a comment */}}").is_static
    assert not parse("{{.inputs.topic}}").is_static
    source = "static text"
    assert parse(source).render({}) is source


# --- fields and namespaces ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{.inputs.topic}}", "cats"),
        ("{{ .inputs.topic }}", "cats"),
        ("{{.inputs.nested.deep.value}}", "x"),
        ("{{$.inputs.topic}}", "cats"),
        ("{{.states.review.Output}}", "LGTM"),
        ("{{.states.review.conversation.total_turns}}", "2"),
        ("{{.states.review.Conversation.TotalTurns}}", "2"),
        ("{{.env.HOME}}", "/home/u"),
        ("{{.workflow.ID}}", "run-1"),
        ("{{.context.WorkingDir}}", "/w"),
        ("{{.loop.Index1}}", "1"),
        ("{{.error.Message}}", "boom"),
        ('{{index .inputs "my-key"}}', "dash"),
        ("{{(index .inputs.people 1).name}}", "bob"),
        ("{{.inputs.nil}}", "<no value>"),
        ("{{.states.review.Response}}", "<no value>"),
        ("{{.inputs.people}}", "[map[name:ann] map[name:bob]]"),
    ],
)
def test_fields(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{inputs.topic}}", "cats"),
        ("{{states.review.Output}}", "LGTM"),
        ("{{states.review.conversation.total_turns}}", "2"),
        ("{{env.HOME}}", "/home/u"),
        ("{{workflow.ID}} {{workflow.Name}}", "run-1 demo"),
        ("{{loop.index}} {{loop.index1}} {{loop.first}} {{loop.last}}", "0 1 true false"),
        ("{{loop.length}}", "2"),
        ("{{loop.item.name}}", "n1"),  # the item itself is user data: keys as they are
        ("{{loop.parent.index1}} {{loop.parent.item}}", "5 outer"),
        ("{{context.working_dir}} {{context.user}} {{context.hostname}}", "/w u h"),
        ("{{error.message}} {{error.exit_code}} {{error.state}}", "boom 2 build"),
        ("{{error.type}}", "execution"),
        ("{{len inputs}}", "13"),
        ("{{with inputs}}{{.topic}}{{end}}", "cats"),
        ('{{index inputs "topic"}}', "cats"),
        ("{{range $k, $v := context}}{{$k}}={{$v}};{{end}}", "hostname=h;user=u;working_dir=/w;"),
        ("{{if loop.first}}first{{end}}", "first"),
        ('{{inputs.topic | printf "%s!"}}', "cats!"),
    ],
)
def test_namespace_function_forms(source: str, expected: str) -> None:
    assert r(source) == expected


def test_snake_case_view_accepts_acronyms_and_pascal_keys() -> None:
    data = {"workflow": {}, "error": {"ID": "e1", "SessionID": "s"}, "loop": {"Index": 7}}
    assert r("{{error.id}} {{error.session_id}}", data) == "e1 s"
    assert r("{{loop}}", data) == "map[index:7]"


def test_missing_field_error_names_template_field_and_position() -> None:
    err = render_error("Topic: {{.inputs.nope}}", name="prompt")
    assert str(err).startswith('template "prompt": no field "nope" in .inputs')
    assert ".inputs.nope" in str(err)
    assert err.field == "inputs.nope"
    assert (err.line, err.column) == (1, 10)
    assert err.message == str(err)
    assert err.reason == 'no field "nope" in .inputs'


@pytest.mark.parametrize(
    ("source", "reason", "field"),
    [
        ("{{.states.notrun.Output}}", 'no field "notrun" in .states', "states.notrun.Output"),
        ("{{.nope}}", 'no field "nope" in .', "nope"),
        ("{{$.inputs.nope}}", 'no field "nope" in $.inputs', "inputs.nope"),
        ("{{inputs.nope}}", 'no field "nope" in inputs', "inputs.nope"),
        ("{{loop.nope}}", 'no field "nope" in loop', "loop.nope"),
        ("{{$x := .inputs}}{{$x.nope}}", 'no field "nope" in $x', "$x.nope"),
        (
            "{{.states.review.Response.field}}",
            'can\'t evaluate field "field": .states.review.Response is nil',
            "states.review.Response.field",
        ),
        (
            "{{.inputs.topic.length}}",
            'can\'t evaluate field "length" in type string (.inputs.topic)',
            "inputs.topic.length",
        ),
        (
            "{{.inputs.list.first}}",
            'can\'t evaluate field "first" in type list (.inputs.list)',
            "inputs.list.first",
        ),
    ],
)
def test_field_errors(source: str, reason: str, field: str) -> None:
    err = render_error(source)
    assert err.reason == reason
    assert err.field == field


def test_namespace_missing_from_data_has_a_hint() -> None:
    err = render_error("{{loop.index}}", {"inputs": {}})
    assert '"loop" is not available here: loop data exists only inside a for_each' in str(err)
    assert err.field == "loop.index"
    err = render_error("{{error.message}}", {"inputs": {}})
    assert "only in workflow_error hooks" in str(err)
    err = render_error("{{len env}}", {})
    assert '"env" is not available here' in str(err)
    err = render_error("{{loop.index}}", {"loop": None})
    assert '"loop" is not available here' in str(err)
    err = render_error("{{.loop.Index}}", {"inputs": {}})
    assert err.reason == (
        'no field "loop" in . (loop data exists only inside a for_each or while body)'
    )


def test_namespace_function_takes_no_arguments() -> None:
    err = render_error('{{inputs "topic"}}')
    assert err.reason == "wrong number of args for inputs: want 0 got 1"


def test_field_with_arguments_is_an_error() -> None:
    err = render_error("{{.inputs.topic 1}}")
    assert err.reason == "can't give argument to non-function .inputs.topic"
    err = render_error('{{"x" | .inputs.topic}}')
    assert err.reason == "can't give argument to non-function .inputs.topic"


def test_data_root_and_dot() -> None:
    assert r("{{.}}", {"a": 1, "b": [1, 2]}) == "map[a:1 b:[1 2]]"
    assert r("{{$}}", {"a": 1}) == "map[a:1]"


def test_other_mappings_work_as_data() -> None:
    from types import MappingProxyType

    data = MappingProxyType({"inputs": MappingProxyType({"x": "y"})})
    assert r("{{.inputs.x}} {{inputs.x}}", data) == "y y"


# --- pipelines and literals -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{"a" | printf "%s-%s" "b"}}', "b-a"),
        ('{{.inputs.topic | len | printf "%03d"}}', "004"),
        ('{{printf "%d" (len .inputs.list)}}', "3"),
        ("{{(1)}}", "1"),
        ("{{((.inputs.topic))}}", "cats"),
        ('{{printf "%s %s" (index .inputs.list 0) (index .inputs.list 2)}}', "a c"),
        ('{{"a\\tb\\u00e9\\x41\\101\\"\\\\"}}', 'a\tbéAA"\\'),
        ('{{"\\xc3\\xa9"}}', "é"),
        ("{{`raw \\n {{ }}`}}", "raw \\n {{ }}"),
        ('{{"}}"}} {{"{{- x -}}"}}', "}} {{- x -}}"),
        ("{{`multi\r\nline`}}", "multi\nline"),
        ("{{'a'}} {{'\\n'}} {{'\\''}} {{'é'}} {{'\\x41'}}", "97 10 39 233 65"),
        ("{{1_000}} {{0x1F}} {{0X1f}} {{0o17}} {{017}} {{0b101}}", "1000 31 31 15 15 5"),
        (
            "{{1.5}} {{.5}} {{1.}} {{1e3}} {{-2}} {{+3}} {{1e6}} {{0x1p-2}}",
            "1.5 0.5 1 1000 -2 3 1e+06 0.25",
        ),
        ("{{1_0.5}}", "10.5"),
        ("{{true}} {{false}}", "true false"),
        ("{{print nil}}", "<nil>"),
        ("{{-9223372036854775808}}", "-9223372036854775808"),
    ],
)
def test_pipelines_and_literals(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{{"abc}}', "unterminated quoted string"),
        ('{{"a\nb"}}', "unterminated quoted string"),
        ("{{`abc}}", "unterminated raw quoted string"),
        ("{{'a}}", "unterminated character constant"),
        ('{{"\\q"}}', "invalid escape \\q in string"),
        ('{{"\\\'"}}', "invalid escape \\' in string"),
        ('{{"\\uD800"}}', "invalid escape \\uD800: not a Unicode code point"),
        ('{{"\\x4"}}', "invalid escape \\x4 in string"),
        ("{{'ab'}}", "malformed character constant: 'ab'"),
        ("{{''}}", "malformed character constant: ''"),
        ("{{1i}}", 'complex number constants are not supported: "1i"'),
        ("{{1+2i}}", 'complex number constants are not supported: "1+2i"'),
        ("{{99999999999999999999}}", 'integer overflow: "99999999999999999999"'),
        ("{{08}}", 'illegal number syntax: "08"'),
        ("{{1__0}}", 'illegal number syntax: "1__0"'),
        ("{{1x}}", 'bad number syntax: "1x"'),
        ("{{1e400}}", 'number out of range: "1e400"'),
        ('{{"a".b}}', 'unexpected . after term "\\"a\\""'),
        ("{{nil.x}}", 'unexpected . after term "nil"'),
        ('{{.x | "a"}}', "non executable command in pipeline stage 2"),
        ("{{.x | 3}}", "non executable command in pipeline stage 2"),
        ("{{.x | .}}", "non executable command in pipeline stage 2"),
        ("{{(1}}", "unclosed left paren"),
        ("{{1)}}", "unexpected right paren"),
        ("{{()}}", "missing value for parenthesized pipeline"),
        ("{{}}", "missing value for command"),
        ("{{ }}", "missing value for command"),
        ("{{| .x}}", 'unexpected "|" in command'),
        ("{{.x @}}", 'unexpected "@" in operand'),
        ("{{.x \u2603}}", "unrecognized character in action: U+2603 '\u2603'"),
        ("{{.x \x07}}", "unrecognized character in action: U+0007"),
        ("{{:}}", "expected :="),
        ("{{.x", "unclosed action"),
        ("{{.x}", "bad character U+007D '}'"),
        ("{{.x }", 'unexpected "}" in operand'),
        ("{{.x ", "unclosed action"),
        ("{{if .x (", "unclosed action"),
        ("{{foo}}", 'function "foo" not defined'),
        ("{{call .x}}", 'function "call" not defined'),
        ("{{.x.}}", "unexpected <.> in operand"),
        ("{{$x}}", 'undefined variable "$x"'),
    ],
)
def test_syntax_errors(source: str, message: str) -> None:
    assert syntax_error(source).message == message


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{{3 4}}", "can't give argument to non-function 3"),
        ("{{nil}}", "nil is not a command"),
        ('{{"a" 1}}', 'can\'t give argument to non-function "a"'),
        ("{{(1) 2}}", "can't give argument to non-function (1)"),
    ],
)
def test_command_errors(source: str, reason: str) -> None:
    assert render_error(source).reason == reason


# --- if / with / range ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{if .inputs.flag}}yes{{end}}", "yes"),
        ("{{if .inputs.empty}}yes{{else}}no{{end}}", "no"),
        ("{{if .inputs.zero}}a{{else if .inputs.empty}}b{{else if .inputs.count}}c{{end}}", "c"),
        ("{{if .inputs.zero}}a{{else if .inputs.empty}}b{{else}}d{{end}}", "d"),
        ('{{if eq .inputs.topic "cats"}}meow{{end}}', "meow"),
        ("{{if .inputs.nil}}a{{else}}nil is false{{end}}", "nil is false"),
        ("{{if 0.0}}a{{else}}b{{end}}", "b"),
        ('{{if "0"}}non-empty string{{end}}', "non-empty string"),
        ("{{if .inputs.list}}list{{end}}{{if .inputs.map}} map{{end}}", "list map"),
        ("{{with .inputs.topic}}{{.}}{{end}}", "cats"),
        ("{{with .inputs.empty}}x{{else}}y{{end}}", "y"),
        ("{{with $t := .inputs.topic}}{{$t}}/{{.}}{{end}}", "cats/cats"),
        ("{{with .inputs.zero}}A{{else with .inputs.topic}}B:{{.}}{{end}}", "B:cats"),
        ("{{with .inputs.zero}}A{{else with .inputs.empty}}B{{else}}C{{end}}", "C"),
        ("{{with .inputs.nested}}{{with .deep}}{{.value}}{{end}}{{end}}", "x"),
        ("{{with .inputs}}{{if .flag}}{{.topic}}{{end}}{{end}}", "cats"),
        ("{{if .inputs.flag}}{{with .inputs.list}}{{index . 1}}{{end}}{{end}}", "b"),
        ("{{with .inputs.nested}}{{$.inputs.topic}}{{end}}", "cats"),
    ],
)
def test_if_and_with(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{range .inputs.list}}[{{.}}]{{end}}", "[a][b][c]"),
        ("{{range $i, $v := .inputs.list}}{{$i}}={{$v}} {{end}}", "0=a 1=b 2=c "),
        ("{{range $v := .inputs.list}}{{$v}}{{end}}", "abc"),
        ("{{range .inputs.map}}{{.}}{{end}}", "12"),  # values in sorted key order
        ("{{range $k, $v := .inputs.map}}{{$k}}:{{$v}} {{end}}", "a:1 b:2 "),
        ("{{range 3}}{{.}}{{end}}", "012"),
        ("{{range $i := 3}}{{$i}}{{end}}", "012"),
        ("{{range 0}}x{{else}}none{{end}}", "none"),
        ("{{range -2}}x{{else}}none{{end}}", "none"),
        ("{{range .inputs.empty_list}}x{{else}}empty{{end}}", "empty"),
        ("{{range .inputs.nil}}x{{else}}nil{{end}}", "nil"),
        ("{{range .inputs.list}}x{{else}}never{{end}}", "xxx"),
        ("{{range .inputs.people}}{{.name}} {{end}}", "ann bob "),
        ("{{range .inputs.list}}{{$.inputs.topic}}{{end}}", "catscatscats"),
        ('{{range .inputs.list}}{{if eq . "b"}}{{break}}{{end}}{{.}}{{end}}', "a"),
        ('{{range .inputs.list}}{{if eq . "b"}}{{continue}}{{end}}{{.}}{{end}}', "ac"),
        ("{{range .inputs.list}}{{range $.inputs.nums}}{{break}}{{end}}{{.}}{{end}}", "abc"),
        (
            "{{range $i, $p := .inputs.people}}"
            "{{range $j, $q := $.inputs.list}}{{$i}}{{$j}} {{end}}{{end}}",
            "00 01 02 10 11 12 ",
        ),
        ("{{range .inputs.list}}{{else}}{{.inputs.topic}}{{end}}", ""),
        ("{{range .inputs.empty_list}}{{else}}{{.inputs.topic}}{{end}}", "cats"),
        ("{{range $x := .inputs.list}}{{break}}{{else}}e{{end}}", ""),
    ],
)
def test_range(source: str, expected: str) -> None:
    data = copy.deepcopy(DATA)
    data["inputs"]["empty_list"] = []
    assert r(source, data) == expected


def test_range_over_tuples_and_other_mappings() -> None:
    from types import MappingProxyType

    assert r("{{range .}}{{.}}{{end}}", {"z": 1, "a": 2}) == "21"
    assert r("{{range .x}}{{.}}{{end}}", {"x": (1, 2)}) == "12"
    assert (
        r("{{range $k, $v := .x}}{{$k}}{{end}}", {"x": MappingProxyType({"b": 1, "a": 2})}) == "ab"
    )


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{{range .inputs.topic}}{{end}}", "range can't iterate over cats (a string)"),
        ("{{range .inputs.flag}}{{end}}", "range can't iterate over true (a bool)"),
        ("{{range 1.5}}{{end}}", "range can't iterate over 1.5 (a float)"),
        ("{{range $i, $v := 3}}{{end}}", "can't use 3 to iterate over more than one variable"),
    ],
)
def test_range_errors(source: str, reason: str) -> None:
    assert render_error(source).reason == reason


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{if .x}}", "unexpected EOF"),
        ("{{range .x}}a", "unexpected EOF"),
        ("{{end}}", "unexpected {{end}}"),
        ("{{else}}", "unexpected {{else}}"),
        ("{{if}}{{end}}", "missing value for if"),
        ("{{with}}{{end}}", "missing value for with"),
        ("{{range}}{{end}}", "missing value for range"),
        ("{{if .x}}a{{else}}b{{else}}c{{end}}", "expected end; found {{else}}"),
        ("{{range .x}}a{{else if .y}}b{{end}}", "unexpected <if> in input"),
        ("{{if .x}}a{{else with .y}}b{{end}}", "unexpected <with> in input"),
        ("{{end 1}}", 'unexpected "1" in end'),
        ("{{else 1}}", 'unexpected "1" in else'),
        ("{{break}}", "{{break}} outside {{range}}"),
        ("{{continue}}", "{{continue}} outside {{range}}"),
        ("{{if true}}{{break}}{{end}}", "{{break}} outside {{range}}"),
        ("{{range .x}}{{break 1}}{{end}}", 'unexpected "1" in {{break}}'),
        ('{{if .x}}{{define "a"}}{{end}}{{end}}', "unexpected <define> in command"),
    ],
)
def test_control_syntax_errors(source: str, message: str) -> None:
    assert syntax_error(source).message == message


# --- variables ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{$x := 1}}{{$x}}", "1"),
        ("{{$x := 1}}{{$x = 2}}{{$x}}", "2"),
        ("{{$x := .inputs}}{{$x.topic}} {{$x.nested.deep.value}}", "cats x"),
        ("{{$x := 1}}{{if true}}{{$x = 2}}{{end}}{{$x}}", "2"),
        ('{{$last := ""}}{{range .inputs.list}}{{$last = .}}{{end}}{{$last}}', "c"),
        ("{{$x := 1}}{{range .inputs.list}}{{$x := .}}{{$x}}{{end}}{{$x}}", "abc1"),
        ("{{$x := 1}}{{with $x := 2}}{{$x}}{{end}}{{$x}}", "21"),
        ("{{$i := 9}}{{range $i = .inputs.list}}{{end}}{{$i}}", "c"),
        ("{{$i := 9}}{{$v := 0}}{{range $i, $v = .inputs.list}}{{end}}{{$i}}{{$v}}", "2c"),
        ("{{$x := 5 -}}  \n after {{$x}}", "after 5"),
        ("{{$ := 1}}{{$}}", "1"),
        ("{{$a := (len .inputs.list)}}{{$a}}", "3"),
        ('{{printf "%d %s" ($n := 2) "x"}}{{$n}}', "2 x2"),
    ],
)
def test_variables(source: str, expected: str) -> None:
    assert r(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{if true}}{{$y := 1}}{{end}}{{$y}}", 'undefined variable "$y"'),
        ("{{range .x}}{{$y := 1}}{{end}}{{$y}}", 'undefined variable "$y"'),
        ("{{with $y := 1}}{{end}}{{$y}}", 'undefined variable "$y"'),
        ("{{$x = 1}}", 'undefined variable "$x"'),
        ("{{$a, $b := 1}}", "too many declarations in command"),
        ("{{range $a, $b, $c := .x}}{{end}}", "too many declarations in range"),
        ("{{range $a, 1}}{{end}}", "range can only initialize variables"),
        ("{{$x := }}", "missing value for command"),
    ],
)
def test_variable_errors(source: str, message: str) -> None:
    assert syntax_error(source).message == message


def test_variable_defined_in_if_body_is_unset_in_else() -> None:
    # Go accepts this at parse time (same scope) and fails when the else branch runs.
    source = "{{if .inputs.zero}}{{$y := 1}}{{else}}{{$y}}{{end}}"
    assert render_error(source).reason == "undefined variable: $y"


# --- named templates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{define "T"}}Hi {{.}}{{end}}{{template "T" "bob"}}', "Hi bob"),
        ('{{template "T" .inputs.topic}}{{define "T"}}<{{.}}>{{end}}', "<cats>"),
        ('{{define "T"}}{{$}}{{end}}{{template "T" 1}}', "1"),
        ('{{define "T"}}[{{.}}]{{end}}{{template "T"}}', "[<no value>]"),
        ('{{block "B" .inputs.topic}}[{{.}}]{{end}}', "[cats]"),
        ('{{define "B"}}{{end}}{{block "B" 1}}[{{.}}]{{end}}', "[1]"),
        ('{{define "T"}}{{inputs.topic}}{{end}}{{template "T"}}', "cats"),
        (
            '{{define "L"}}<{{.}}>{{end}}{{range .inputs.people}}{{template "L" .name}}{{end}}',
            "<ann><bob>",
        ),
    ],
)
def test_named_templates(source: str, expected: str) -> None:
    assert r(source) == expected


def test_named_template_errors() -> None:
    assert render_error('{{template "nope"}}').reason == 'no template "nope" defined'
    recursive = '{{define "r"}}{{template "r" .}}{{end}}{{template "r" 1}}'
    assert render_error(recursive).reason == "exceeded maximum template depth (100)"
    twice = '{{define "a"}}x{{end}}{{define "a"}}y{{end}}'
    assert syntax_error(twice).message == 'multiple definition of template "a"'
    assert syntax_error("{{define a}}{{end}}").message == 'unexpected "a" in define clause'
    assert syntax_error("{{template}}").message == 'unexpected "}}" in template clause'
    assert syntax_error('{{block "b"}}{{end}}').message == "missing value for block clause"
    assert syntax_error('{{define "a"}}{{else}}{{end}}').message == (
        "unexpected {{else}} in define clause"
    )
    # a named template has its own variables and is outside any range
    assert syntax_error('{{$x := 1}}{{define "a"}}{{$x}}{{end}}').message == (
        'undefined variable "$x"'
    )
    assert syntax_error('{{range .}}{{block "b" .}}{{break}}{{end}}{{end}}').message == (
        "{{break}} outside {{range}}"
    )


# --- error messages and positions ---------------------------------------------------------------


def test_syntax_error_reads_like_go_with_a_column() -> None:
    err = syntax_error("hello {{.x } }}", name="prompt")
    assert str(err) == 'template: prompt:1:12: unexpected "}" in operand'
    assert (err.message, err.line, err.column, err.name) == (
        'unexpected "}" in operand',
        1,
        12,
        "prompt",
    )
    assert isinstance(err, TemplateError)
    assert isinstance(err, ValueError)


def test_syntax_error_positions_on_later_lines() -> None:
    err = syntax_error("line one\nab {{if}}{{end}}")
    assert (err.line, err.column) == (2, 8)
    err = syntax_error("x\n\n  {{.x")
    assert (err.line, err.column) == (3, 3)  # unclosed action: where it opened
    err = syntax_error("{{if .x}}\n{{end}}\n{{end}}")
    assert (err.line, err.column) == (3, 3)
    err = syntax_error("{{if .x}}\nabc")
    assert err.message == "unexpected EOF"
    assert (err.line, err.column) == (2, 4)


def test_errors_are_reported_in_source_order() -> None:
    # the lexer error comes after the parse error, as with Go's concurrent lexer
    assert syntax_error('{{end}} {{"unterminated}}').message == "unexpected {{end}}"


def test_syntax_error_name_does_not_leak_between_callers() -> None:
    assert str(syntax_error("{{if}}", name="a")).startswith("template: a:")
    assert str(syntax_error("{{if}}", name="b")).startswith("template: b:")
    assert syntax_error("{{if}}").with_name("c").name == "c"


def test_render_error_position_and_snippet() -> None:
    err = render_error("a\n  {{index .inputs.list 7}}", name="cmd")
    assert str(err) == (
        'template "cmd": error calling index: index out of range: 7 '
        "(at <index .inputs.list 7>, line 2, column 5)"
    )
    assert (err.line, err.column, err.field) == (2, 5, "")


def test_render_error_snippet_is_shortened() -> None:
    long_call = "{{index .inputs.list " + "  ".join(["0"] * 40) + "}}"
    err = render_error(long_call)
    assert "..." in str(err)
    assert len(str(err)) < 200


def test_errors_survive_pickling_and_copying() -> None:
    for err in (syntax_error("{{if}}", name="p"), render_error("{{.nope}}", name="p")):
        clone = pickle.loads(pickle.dumps(err))
        assert type(clone) is type(err)
        assert str(clone) == str(err)
        assert vars(clone) == vars(err)
        assert str(copy.deepcopy(err)) == str(err)


def test_bad_source_type_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="expected text, got int"):
        parse(123)  # type: ignore[arg-type]


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    source = "{{" + "(" * 400 + "1" + ")" * 400 + "}}"
    try:
        assert r(source) == "1"
    except TemplateSyntaxError as err:
        assert "nested too deeply" in err.message
    nested: Any = "x"
    for _ in range(3000):
        nested = [nested]
    with pytest.raises(TemplateRenderError, match="nested too deeply"):
        r("{{.}}", nested)


# --- references ----------------------------------------------------------------------------------


def test_references_dot_and_function_forms_in_order() -> None:
    source = (
        "{{.inputs.topic}} {{inputs.task}} {{$.states.review.Output}}\n"
        "{{range .inputs.items}}{{.name}}{{$.inputs.sep}}{{loop.index1}}"
        "{{else}}{{.inputs.empty}}{{end}}\n"
        '{{with .states.build}}{{.Output}}{{end}}{{if eq .workflow.ID "x"}}{{env.HOME}}{{end}}\n'
        '{{printf "%s" (index .inputs.list 0)}} {{states.chat.conversation.total_turns}}'
        '{{len context}}{{define "T"}}{{.x}}{{$.y}}{{error.message}}{{end}}'
    )
    refs = parse(source).references()
    assert [(ref.path, ref.function_form) for ref in refs] == [
        (("inputs", "topic"), False),
        (("inputs", "task"), True),
        (("states", "review", "Output"), False),
        (("inputs", "items"), False),
        (("inputs", "sep"), False),
        (("loop", "index1"), True),
        (("inputs", "empty"), False),
        (("states", "build"), False),
        (("workflow", "ID"), False),
        (("env", "HOME"), True),
        (("inputs", "list"), False),
        (("states", "chat", "conversation", "total_turns"), True),
        (("context",), True),
        (("error", "message"), True),
    ]
    assert refs[0] == FieldRef(("inputs", "topic"), 1, 3, False)
    assert (refs[1].line, refs[1].column) == (1, 21)
    assert (refs[3].line, refs[3].column) == (2, 9)
    assert refs[0].dotted == "inputs.topic"


def test_references_of_static_and_bare_templates() -> None:
    assert parse("plain").references() == []
    assert parse("{{.}}{{$}}{{$x := 1}}{{$x}}").references() == []
    assert [ref.path for ref in parse("{{.inputs}}").references()] == [("inputs",)]


def test_references_returns_a_copy() -> None:
    template = parse("{{.inputs.a}}")
    template.references().clear()
    assert len(template.references()) == 1


# --- caching and the module API ------------------------------------------------------------------


def test_parse_is_cached_on_the_source() -> None:
    source = "{{.inputs.topic}} cached"
    first = parse(source)
    assert parse(source) is first
    assert parse(source, name="other") is first
    assert isinstance(first, Template)
    assert first.source == source
    assert "cached" in repr(first)
    info = template_module._parse_cached.cache_info()
    render(source, DATA)
    assert template_module._parse_cached.cache_info().hits == info.hits + 1


def test_a_template_renders_many_times_with_different_data() -> None:
    template = parse("{{range .}}{{.}},{{end}}")
    assert template.render([1, 2]) == "1,2,"
    assert template.render(["x"]) == "x,"
    assert template.render([]) == ""


def test_render_passes_the_name_to_errors() -> None:
    assert str(render_error("{{.nope}}", name="states.s.command")).startswith(
        'template "states.s.command":'
    )


# --- properties ----------------------------------------------------------------------------------


@settings(max_examples=200)
@given(st.text().filter(lambda text: "{{" not in text))
def test_text_without_actions_renders_to_itself(text: str) -> None:
    assert render(text, DATA) == text
    assert parse(text).is_static


# Pieces of template syntax; numbers end with a space so that joined pieces cannot form
# a huge `range` count.
_PIECES = [
    ".", "$", "|", "(", ")", "=", ":=", ",", "-", "+", '"', "'", "`", "\\", "/*", "*/",
    "{{", "}}", " ", "\n", "x", "inputs", ".inputs", ".topic", ".list", "$x", "if", "else",
    "end", "range", "with", "define", "template", "block", "break", "continue", "nil",
    "true", "len", "index", "slice", "printf", '"%d"', '"%s %v"', "eq", "and", "or", "not",
    "json", "escape", "split", "join", "print", "html", "js", "0 ", "1 ", "2 ", "1.5 ",
    "0x1 ", "'a'", "@", "é", "☃", "\t", "#",
]  # fmt: skip


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_garbage_inside_actions_only_raises_template_errors(pieces: list[str]) -> None:
    source = "{{" + "".join(pieces) + "}}"
    data = {"inputs": {"topic": "t", "list": [1, 2]}, "x": 1}
    with contextlib.suppress(TemplateError):
        render(source, data)


@settings(max_examples=200)
@given(st.text(alphabet="{}.-/* $x|()\"'`ab1\n", max_size=30))
def test_random_braces_only_raise_template_errors(source: str) -> None:
    with contextlib.suppress(TemplateError):
        render(source, {"x": 1, "a": {"b": 2}})
