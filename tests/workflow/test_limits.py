"""Hostile workflows are refused quickly with a clear error: alias bombs, printf widths,
endless ranges, huge renders, endless files."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.errors import DefinitionError
from awf_nb.workflow import template
from awf_nb.workflow.loader import load_text
from tests.support.cli import run_awf


def alias_bomb() -> str:
    big = "x" * (1 << 20)
    uses = ", ".join(["*big"] * 64)
    return f"name: bomb\nbig: &big {big}\nmany: [{uses}]\nstates:\n  initial: d\n  d: {{type: terminal}}\n"


def test_aliases_repeating_a_long_string_are_refused() -> None:
    with pytest.raises(DefinitionError, match="with its aliases expanded, is larger than 16 MiB"):
        load_text(alias_bomb())


@pytest.mark.parametrize("command", [["validate", "bomb.yaml"], ["list"]])
def test_validate_and_list_refuse_an_alias_bomb(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "bomb.yaml").write_text(alias_bomb())
    arguments = [c if c != "bomb.yaml" else str(folder / c) for c in command]
    result = run_awf(*arguments, cwd=tmp_path, timeout=120)
    shown = result.stdout + result.stderr
    assert (
        "larger than 16 MiB" in shown
        or "INVALID: workflows/bomb.yaml:2:6: error: the workflow's tex" in shown
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{{printf "%099999999999d" 1}}', "printf width or precision 99999999999 is larger"),
        ('{{printf "%.*d" 999999999 1}}', "printf width or precision 999999999 is larger"),
        ("{{range 100000000}}x{{end}}", "the template does too much work"),
        ("{{range 3000}}{{range 3000}}{{end}}{{end}}", "the template does too much work"),
        ('{{range 20}}{{printf "%90000s" "x"}}{{end}}', "the rendered text is larger than 16 MiB"),
    ],
)
def test_runaway_templates_stop_with_a_clear_error(source: str, message: str) -> None:
    # more work than a real prompt needs by orders of magnitude: refused with a message
    source = source.replace("{{range 20}}", "{{range 200}}")
    with pytest.raises(template.TemplateError, match=message):
        template.parse(source).render({}, name="prompt")


def test_an_ordinary_template_is_untouched() -> None:
    rendered = template.parse('{{range .}}{{printf "%05d" .}} {{end}}').render([1, 2], name="p")
    assert rendered == "00001 00002 "
