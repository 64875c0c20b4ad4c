"""No silent differences: a key AWF defines that awf-nb does not implement is an error that
names it; keys AWF reads but never uses are warnings saying so; unknown keys stay
warnings with a did-you-mean. Checked against AWF's own fixture files."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.errors import DefinitionError
from awf_nb.workflow.loader import load_text, load_workflow
from awf_nb.workflow.loader.keys import AWF_UNSUPPORTED

FIXTURES = Path(__file__).parent / "awf_fixtures"


def _problems(source: str) -> list[tuple[str, str, str]]:
    try:
        workflow = load_text(source)
    except DefinitionError as exc:
        found = exc.problems
    else:
        found = workflow.warnings
    return [(p.severity, p.path, p.message) for p in found]


STEP = """
name: t
states:
  initial: a
  a:
    type: step
    command: echo hi
    {key}: {value}
    on_success: done
  done: {{type: terminal}}
"""


@pytest.mark.parametrize(
    ("key", "value"),
    [("use_template", "ai-analyze"), ("parameters", "{model: x}"), ("config", "{a: 1}")],
)
def test_an_awf_step_key_we_do_not_implement_is_an_error(key: str, value: str) -> None:
    [(severity, path, message)] = _problems(STEP.format(key=key, value=value))
    assert (severity, path) == ("error", f"states.a.{key}")
    assert message.startswith(f'"{key}" is an AWF feature that awf-nb does not support (')
    assert "run this workflow with AWF" in message


def test_awf_plugins_at_the_top_is_an_error() -> None:
    source = """
name: t
plugins: {pg: database}
states:
  initial: a
  a: {type: step, command: echo hi, on_success: done}
  done: {type: terminal}
"""
    [(severity, path, message)] = _problems(source)
    assert (severity, path) == ("error", "plugins")
    assert message == (
        '"plugins" is an AWF feature that awf-nb does not support (workflow plugins); '
        "remove it, or run this workflow with AWF"
    )


def test_mcp_proxy_plugin_tools_is_an_error_when_the_file_loads() -> None:
    source = """
name: t
states:
  initial: a
  a:
    type: agent
    provider: claude
    prompt: hi
    mcp_proxy: {enable: true, plugin_tools: [{plugin: db, expose: [query]}]}
    on_success: done
  done: {type: terminal}
"""
    [(severity, path, message)] = _problems(source)
    assert (severity, path) == ("error", "states.a.mcp_proxy.plugin_tools")
    assert message.startswith('"mcp_proxy.plugin_tools" is an AWF feature that awf-nb does not')


def test_every_unsupported_key_is_in_the_syntax_docs() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "workflow-syntax.md").read_text()
    for where, keys in AWF_UNSUPPORTED.items():
        for key in keys:
            written = f"mcp_proxy.{key}" if where == "mcp_proxy" else key
            assert f"`{written}`" in docs, written


@pytest.mark.parametrize(
    ("fixture", "key", "steps"),
    [
        ("valid-full.yaml", "capture", ["extract"]),
        ("example-simple.yaml", "capture", ["extract", "analyze"]),
        ("valid-parallel.yaml", "depends_on", ["task_b", "task_c", "aggregate"]),
    ],
)
def test_awf_fixtures_with_keys_awf_never_uses_load_with_a_warning(
    fixture: str, key: str, steps: list[str]
) -> None:
    workflow = load_workflow(FIXTURES / fixture)
    about = [p for p in workflow.warnings if p.path.endswith(f".{key}")]
    assert [p.path for p in about] == [f"states.{step}.{key}" for step in steps]
    assert all(p.message.startswith(f'"{key}" has no effect: AWF reads') for p in about)


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.yaml")))
def test_every_awf_fixture_loads(fixture: str) -> None:
    load_workflow(FIXTURES / fixture)


def test_an_unknown_key_is_still_a_warning_with_a_suggestion() -> None:
    [(severity, path, message)] = _problems(STEP.format(key="on_sucess", value="done"))
    assert (severity, path, message) == ("warning", "states.a.on_sucess", 'unknown key "on_sucess"')
    workflow = load_text(STEP.format(key="on_sucess", value="done"))
    assert workflow.warnings[0].hint == 'did you mean "on_success"?'


def test_role_and_skills_are_no_longer_unknown_keys() -> None:
    source = """
name: t
states:
  initial: a
  a: {type: agent, provider: claude, prompt: hi, role: critic, skills: [x], on_success: done}
  done: {type: terminal}
"""
    assert _problems(source) == []
