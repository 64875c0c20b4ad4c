"""YAML-level loading (spec §1): structure messages, positions, removed fields, unknown keys,
YAML errors, and finding workflows by name."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
import yaml

from awf_nb.errors import DefinitionError, Problem, UserError
from awf_nb.safe_text import BIDI_CONTROLS
from awf_nb.workflow import yaml_locations
from awf_nb.workflow.loader import (
    MAX_DEPTH,
    MAX_NODES,
    REMOVED_FIELDS,
    find_workflow,
    list_workflows,
    load_text,
    load_workflow,
    search_path,
)
from awf_nb.workflow.model import AgentStep, CommandStep, TerminalStep
from tests.support.problems import only, problems_of, yml


def where(problem: Problem) -> tuple[str, int, int, str]:
    return problem.path, problem.line, problem.column, problem.severity


VALID = """
name: demo
states:
  initial: build
  build:
    type: step
    command: make
    on_success: done
  done:
    type: terminal
"""


# --- a valid file ------------------------------------------------------------------------------


def test_valid_workflow_loads_with_steps_in_file_order() -> None:
    wf = load_text(yml(VALID))
    assert wf.name == "demo"
    assert wf.initial == "build"
    assert list(wf.steps) == ["build", "done"]
    assert isinstance(wf.steps["build"], CommandStep)
    assert wf.steps["build"].name == "build"
    assert isinstance(wf.steps["done"], TerminalStep)
    assert wf.warnings == []


def test_locations_map_every_yaml_path_to_its_line_and_column() -> None:
    wf = load_text(yml(VALID))
    assert wf.locations["name"] == (1, 1)
    assert wf.locations["states.initial"] == (3, 3)
    assert wf.locations["states.build"] == (4, 3)
    assert wf.locations["states.build.command"] == (6, 5)
    assert wf.locations["states.done.type"] == (9, 5)


def test_source_text_and_base_dir(tmp_path: Path) -> None:
    wf = load_text(yml(VALID), base_dir=tmp_path)
    assert wf.base_dir == tmp_path
    assert wf.source_text == yml(VALID)


def test_step_type_is_case_insensitive_and_step_means_command() -> None:
    wf = load_text(yml(VALID).replace("type: step", "type: STEP"))
    assert wf.steps["build"].type == "command"


# --- §1 structure messages -----------------------------------------------------------------


def test_name_missing() -> None:
    problem = only(problems_of(VALID.replace("name: demo\n", "")), "name: required field missing")
    assert where(problem) == ("name", 1, 1, "error")


def test_name_empty_is_missing_too() -> None:
    problem = only(
        problems_of(VALID.replace("name: demo", "name:")), "name: required field missing"
    )
    assert where(problem) == ("name", 1, 1, "error")


# A name reaches terminals and notebooks: one that could erase a line (`ESC[1A ESC[2K`),
# rewrite it (`\r`), or reorder it (U+202E) would let a workflow hide what it runs.
NAMED = """
name: "deploy{bad}"
inputs:
  - name: "target{bad}"
states:
  initial: "build{bad}"
  "build{bad}":
    type: agent
    provider: scripted
    mode: conversation
    prompt: hi
    conversation:
      with: {{name: "critic{bad}", replies: [ok]}}
      max_turns: 1
    on_success: done
  done: {{type: terminal}}
"""
REASON = (
    "a name must be visible text, without control, bidirectional-text or other invisible "
    "characters (it is shown on terminals and in notebooks, where they can erase, hide or "
    "reorder text)"
)


@pytest.mark.parametrize(
    ("bad", "escaped", "what"),
    [
        ("\\e[1A\\e[2K", "\\x1b[1A\\x1b[2K", "a control character (U+001B)"),
        ("\\r", "\\r", "a control character (U+000D)"),
        ("\\x00", "\\x00", "a control character (U+0000)"),
        ("\\u202e", "\\u202e", "right-to-left override (U+202E)"),
        ("\\u2066", "\\u2066", "left-to-right isolate (U+2066)"),
        ("\\u200b", "\\u200b", "zero width space (U+200B)"),
    ],
)
def test_control_and_bidi_characters_in_names_are_located_errors(
    bad: str, escaped: str, what: str
) -> None:
    problems = problems_of(NAMED.format(bad=bad))

    def found(kind: str, name: str) -> Problem:
        return only(problems, f'{kind} "{name}{escaped}" holds {what}: {REASON}')

    assert found("workflow name", "deploy").line == 1
    assert found("input name", "target").line == 3
    assert (found("step name", "build").line, found("step name", "build").column) == (6, 3)
    assert found("conversation partner name", "critic").line == 12
    for problem in problems:  # nothing the terminal would act on, in any message
        shown = str(problem)
        assert not any(unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS for c in shown)


def test_names_in_any_script_and_with_emoji_load() -> None:
    text = (
        NAMED.format(bad="")
        .replace('"deploy"', '"déploiement 🚀"')
        .replace('"build"', '"مرحلة-البناء"')
    )
    workflow = load_text(yml(text.replace('initial: "build"', 'initial: "مرحلة-البناء"')))

    assert workflow.name == "déploiement 🚀" and "مرحلة-البناء" in workflow.steps


def test_initial_missing() -> None:
    problems = problems_of(VALID.replace("  initial: build\n", ""))
    problem = only(problems, "states.initial: required field missing")
    assert where(problem) == ("states.initial", 2, 1, "error")  # at `states:`


def test_states_missing_reports_initial_missing() -> None:
    problems = problems_of("name: demo\ndescription: nothing here\n")
    problem = only(problems, "states.initial: required field missing")
    assert where(problem) == ("states.initial", 1, 1, "error")


def test_inputs_must_be_a_list() -> None:
    text = VALID.replace("states:", "inputs:\n  topic: {default: x}\nstates:")
    problem = only(problems_of(text), "inputs must be a list")
    assert where(problem) == ("inputs", 2, 1, "error")


@pytest.mark.parametrize(
    ("value", "word"),
    [("echo hi", "string"), ("42", "int"), ("[a, b]", "list"), ("true", "bool"), ("", "null")],
)
def test_step_that_is_not_a_map(value: str, word: str) -> None:
    text = VALID.replace(
        "  done:\n    type: terminal", f"  done: {value}\n  end:\n    type: terminal"
    )
    problem = only(problems_of(text), f'state "done": expected map, got {word}')
    assert where(problem) == ("states.done", 8, 3, "error")


def test_unknown_step_type() -> None:
    problems = problems_of(VALID.replace("type: step", "type: shell"))
    problem = only(problems, "states.build.type: unknown step type: shell")
    assert where(problem) == ("states.build.type", 5, 5, "error")


def test_missing_step_type() -> None:
    problems = problems_of(VALID.replace("    type: step\n", ""))
    problem = only(problems, "states.build.type: required field missing")
    assert where(problem) == ("states.build.type", 4, 3, "error")


def test_states_must_be_a_map() -> None:
    problem = only(problems_of("name: x\nstates: [a, b]\n"), "states: expected map, got list")
    assert where(problem) == ("states", 2, 1, "error")


def test_workflow_must_be_a_map() -> None:
    problem = only(problems_of("- name: x\n"), "a workflow must be a map, got list")
    assert (problem.line, problem.column) == (1, 1)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_file(text: str) -> None:
    problem = only(problems_of(text), "the workflow file is empty")
    assert (problem.line, problem.column, problem.file) == (1, 1, "wf.yaml")


# --- removed fields (conversation.md §4) ---------------------------------------------------

AGENT = """
name: demo
states:
  initial: chat
  chat:
    type: agent
    provider: local
    mode: conversation
    prompt: hello
    conversation:
      continue_from: chat
    on_success: done
  done:
    type: terminal
"""


@pytest.mark.parametrize("removed", [k for k in REMOVED_FIELDS if k.startswith("conversation.")])
def test_removed_conversation_fields_are_errors(removed: str) -> None:
    key = removed.split(".", 1)[1]
    text = AGENT.replace("      continue_from: chat", f"      continue_from: chat\n      {key}: 5")
    message = f"{removed} was removed in AWF v0.7: {REMOVED_FIELDS[removed]}"
    if removed == "conversation.max_turns":  # it lives on for conversations between agents
        message += ", or use conversation.with for a conversation between agents"
    problem = only(problems_of(text), message)
    assert where(problem) == (f"states.chat.{removed}", 11, 7, "error")


def test_removed_initial_prompt_at_step_level() -> None:
    text = AGENT.replace("    prompt: hello", "    initial_prompt: hello")
    problems = problems_of(text)
    message = "initial_prompt was removed in AWF v0.7: use `prompt`: it is the first user message"
    assert where(only(problems, message)) == ("states.chat.initial_prompt", 8, 5, "error")
    # and what the missing prompt means, so the user fixes both at once
    only(problems, "prompt is required in conversation mode")


def test_removed_initial_prompt_anywhere_in_an_agent_step() -> None:
    text = AGENT.replace("      continue_from: chat", "      initial_prompt: hi")
    message = "initial_prompt was removed in AWF v0.7: use `prompt`: it is the first user message"
    assert where(only(problems_of(text), message)) == (
        "states.chat.conversation.initial_prompt",
        10,
        7,
        "error",
    )


def test_migration_messages_are_the_spec_texts() -> None:
    assert REMOVED_FIELDS == {
        "initial_prompt": "use `prompt`: it is the first user message",
        "conversation.max_turns": (
            "the user drives the number of turns; `mode: single` is one turn"
        ),
        "conversation.max_context_tokens": (
            "context window management is done by the provider (`options`)"
        ),
        "conversation.strategy": "removed: no automatic truncation at step level",
        "conversation.stop_condition": "removed: the user types exit/quit or an empty line",
        "conversation.inject_context": "compose prompts with `{{.states.*}}` interpolation",
    }


def test_initial_prompt_outside_an_agent_step_is_just_unknown() -> None:
    text = VALID.replace("    command: make", "    command: make\n    initial_prompt: x")
    problem = only(problems_of(text), 'unknown key "initial_prompt"')
    assert problem.severity == "warning"


# --- unknown keys --------------------------------------------------------------------------


UNKNOWN_KEYS = [
    # (after this line, add this one, YAML path of the unknown key, suggestion)
    ("    command: make", "    on_sucess: x", "states.build.on_sucess", "on_success"),
    ("name: demo", "descripton: x", "descripton", "description"),
    (
        "    command: make",
        "    retry: {max_atempts: 2}",
        "states.build.retry.max_atempts",
        "max_attempts",
    ),
    ("    type: terminal", "    mesage: bye", "states.done.mesage", "message"),
]


@pytest.mark.parametrize(("after", "added", "path", "suggestion"), UNKNOWN_KEYS)
def test_unknown_keys_are_warnings_with_a_suggestion(
    after: str, added: str, path: str, suggestion: str
) -> None:
    text = yml(VALID).replace(after, f"{after}\n{added}")
    wf = load_text(text, file="wf.yaml")  # it still loads
    key = path.rsplit(".", 1)[-1]
    problem = only(wf.warnings, f'unknown key "{key}"')
    assert problem.severity == "warning"
    assert problem.path == path
    assert problem.hint == f'did you mean "{suggestion}"?'
    line = next(i for i, row in enumerate(text.splitlines(), 1) if f"{key}:" in row)
    assert (problem.line, problem.column) == (line, text.splitlines()[line - 1].index(key) + 1)


def test_unknown_key_in_input_and_conversation() -> None:
    text = AGENT.replace("states:", "inputs:\n  - name: topic\n    defualt: x\nstates:")
    text = text.replace("continue_from: chat", "continue_frm: chat")
    problems = problems_of(text)
    assert only(problems, 'unknown key "defualt"').hint == 'did you mean "default"?'
    assert only(problems, 'unknown key "continue_frm"').path == (
        "states.chat.conversation.continue_frm"
    )


def test_unknown_key_without_a_close_match_has_no_hint() -> None:
    wf = load_text(yml(VALID).replace("name: demo", "name: demo\nzzz: 1"))
    assert only(wf.warnings, 'unknown key "zzz"').hint is None


def test_top_level_initial_hints_at_states() -> None:
    wf = load_text(yml(VALID) + "initial: build\n")
    assert only(wf.warnings, 'unknown key "initial"').hint == "did you mean states.initial?"


def test_step_name_key_is_unknown() -> None:
    wf = load_text(yml(VALID).replace("    command: make", "    command: make\n    name: other"))
    assert only(wf.warnings, 'unknown key "name"').path == "states.build.name"
    assert wf.steps["build"].name == "build"


def test_unknown_keys_do_not_reach_the_model() -> None:
    wf = load_text(yml(VALID).replace("    command: make", "    command: make\n    colour: red"))
    assert not wf.steps["build"].model_extra


# --- YAML errors ---------------------------------------------------------------------------


def _pyyaml_error(text: str) -> yaml.MarkedYAMLError:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the loader's choice
    with pytest.raises(yaml.MarkedYAMLError) as info:
        yaml.load(text, Loader=loader)
    return info.value


@pytest.mark.parametrize(
    "text",
    [
        "name: demo\nstates:\n  initial: a\n  a: [1, 2\n",
        "name: demo\nstates:\n\tinitial: a\n",
        "name: demo\n  bad: indent\n",
        'name: "unterminated\n',
        "name: demo\n---\nname: other\n",
    ],
)
def test_yaml_syntax_error_has_pyyaml_position_and_text(text: str) -> None:
    expected = _pyyaml_error(text)
    [problem] = problems_of(text)
    mark = expected.problem_mark
    assert (problem.line, problem.column) == (mark.line + 1, mark.column + 1)
    assert problem.message == f"invalid YAML: {expected.problem}"
    assert problem.file == "wf.yaml"


def test_yaml_error_keeps_the_context_as_hint() -> None:
    [problem] = problems_of("a: [1, 2\nb: 3\n")
    assert problem.hint is not None and "flow sequence" in problem.hint


def test_duplicate_key_is_an_error_at_the_second_one() -> None:
    text = VALID.replace("    command: make", "    command: make\n    command: make test")
    problem = only(problems_of(text), 'duplicate key "command" (first defined at line 6)')
    assert (problem.line, problem.column, problem.severity) == (7, 5, "error")


def test_duplicate_step_names_and_other_problems_are_all_reported() -> None:
    text = VALID + "  done:\n    type: terminal\n  extra:\n    type: nonsense\n"
    problems = problems_of(text)
    assert only(problems, 'duplicate key "done" (first defined at line 8)').line == 10
    only(problems, "states.extra.type: unknown step type: nonsense")


def test_five_mistakes_give_five_errors() -> None:
    text = """
    name:
    inputs: {topic: x}
    states:
      initial: build
      build:
        type: step
        command: make
        script_file: build.sh
        on_success: done
      review:
        type: agent
        provider: local
        mode: chatty
        prompt: hi
        on_success: done
      done:
        type: finish
    """
    errors = [p for p in problems_of(text) if p.severity == "error"]
    assert [p.message for p in errors] == [
        "name: required field missing",
        "inputs must be a list",
        "command and script_file are mutually exclusive",
        "mode must be 'single' or 'conversation'",
        "states.done.type: unknown step type: finish",
    ]
    assert [p.line for p in errors] == [1, 2, 5, 13, 17]


def test_control_character_is_reported_where_it_is() -> None:
    [problem] = problems_of("name: demo\nstates:\n  initial: a\x01\n")
    assert (problem.line, problem.column) == (3, 13)
    assert problem.message.startswith("invalid YAML: character #x0001")


def test_control_character_after_non_ascii_text() -> None:
    [problem] = problems_of("name: demo\ndescription: café ☕\x07\n")
    assert (problem.line, problem.column) == (2, 20)


def test_lone_surrogate_is_reported_where_it_is() -> None:
    [problem] = problems_of("name: demo\ndescription: \ud800\n")
    assert (problem.line, problem.column) == (2, 14)


def test_non_string_keys_are_refused() -> None:
    problems = problems_of(VALID.replace("name: demo", "? [a, b]\n: c\nname: demo"))
    assert only(problems, "a key must be a plain value, not a list or map").line == 1


# --- hostile YAML --------------------------------------------------------------------------


def test_deep_nesting_is_refused_before_the_parser_recurses() -> None:
    text = "name: demo\nx: " + "[" * 100_000 + "]" * 100_000 + "\n"
    [problem] = problems_of(text)
    assert problem.message == f"nesting deeper than {MAX_DEPTH} levels"
    assert problem.line == 2


def test_the_yaml_parser_s_own_nesting_limit_gives_the_project_s_message() -> None:
    # PyYAML >= 6.0.4 with libyaml >= 0.2.6 refuses deep flow nesting in its scanner, before
    # the events past our limit reach us; a person must see the same message either way.
    # The parser's message is made here, so the test holds on every PyYAML.
    mark = yaml.Mark("<unicode string>", 0, 1, 1002, None, None)
    error = yaml.scanner.ScannerError(
        "while increasing flow level", mark, "exceeded maximum nesting depth", mark
    )

    def refusing_parse(*args: object, **kwargs: object) -> object:
        yield yaml.StreamStartEvent()
        raise error

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(yaml_locations.yaml, "parse", refusing_parse)
        [problem] = problems_of("name: demo\nx: " + "[" * 200 + "]" * 200 + "\n")
    assert problem.message == f"nesting deeper than {MAX_DEPTH} levels"
    assert problem.line == 2


def test_deep_block_nesting_is_refused() -> None:
    nested = "".join("  " * i + "-\n" for i in range(300))
    [problem] = problems_of("name: demo\nx:\n" + nested)
    assert problem.message == f"nesting deeper than {MAX_DEPTH} levels"


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    [problem] = problems_of("\n".join(lines) + "\n")
    assert problem.message == f"more than {MAX_NODES} YAML values"


def test_recursive_alias_is_refused() -> None:
    [problem] = problems_of("name: demo\nx: &loop [1, *loop]\n")
    assert problem.message == "a YAML alias must not refer to itself"
    assert problem.line == 2


# --- YAML features workflows use -------------------------------------------------------------


def test_merge_keys_and_anchors() -> None:
    text = """
    name: demo
    states:
      initial: build
      build: &cmd
        type: step
        command: make
        timeout: 30
        on_success: done
      test:
        <<: *cmd
        command: make test
      done:
        type: terminal
    """
    wf = load_text(yml(text))
    test = wf.steps["test"]
    assert isinstance(test, CommandStep)
    assert (test.command, test.timeout, test.on_success) == ("make test", 30.0, "done")
    assert wf.locations["states.test.command"] == (11, 5)  # its own key, not the anchor's


def test_scalars_in_string_fields_keep_their_text_as_go_does() -> None:
    text = VALID.replace("name: demo", "name: 2024\nversion: 1.10\ndescription:")
    text = text.replace("    command: make", "    command: make\n    dir: yes")
    wf = load_text(yml(text))
    assert (wf.name, wf.version, wf.description) == ("2024", "1.10", "")
    assert wf.steps["build"].dir == "yes"


def test_null_value_means_the_default() -> None:
    wf = load_text(yml(VALID).replace("name: demo", "name: demo\ntags:\nauthor:"))
    assert wf.tags == [] and wf.author is None


def test_agent_step_defaults() -> None:
    wf = load_text(yml(AGENT))
    chat = wf.steps["chat"]
    assert isinstance(chat, AgentStep)
    assert chat.mode == "conversation" and chat.timeout == 300.0


def test_warnings_are_kept_with_the_errors() -> None:
    text = VALID.replace("name: demo", "name: demo\nauthr: me\nversion: [1]")
    problems = problems_of(text)
    assert only(problems, 'unknown key "authr"').severity == "warning"
    assert only(problems, "expected string, got list").path == "version"


def test_problems_are_sorted_by_position() -> None:
    text = VALID.replace("name: demo", "name:\nfoo: 1").replace("type: step", "type: nope")
    problems = problems_of(text)
    assert [p.line for p in problems] == sorted(p.line for p in problems)


def test_definition_error_message_lists_every_error() -> None:
    with pytest.raises(DefinitionError) as info:
        load_text(yml(VALID).replace("name: demo\n", "").replace("type: step", "type: x"))
    text = str(info.value)
    assert "<inline>:1:1: error: name: required field missing" in text
    assert "<inline>:4:5: error: states.build.type: unknown step type: x" in text
    assert info.value.exit_code == 2


# --- files and names -----------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with an isolated search path."""
    monkeypatch.delenv("AWF_WORKFLOWS_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _write(path: Path, name: str = "demo", description: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yml(VALID).replace("name: demo", f"name: {name}\ndescription: '{description}'")
    path.write_text(text)
    return path


def test_search_path_order(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWF_WORKFLOWS_PATH", "/opt/a:rel/b")
    assert search_path() == [
        Path("/opt/a"),
        workspace / "rel" / "b",
        workspace / ".awf" / "workflows",
        workspace / "workflows",
        workspace.parent / "config" / "awf" / "workflows",
    ]


def test_name_lookup_prefers_earlier_folders(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = workspace.parent / "config" / "awf" / "workflows" / "demo.yaml"
    local = workspace / "workflows" / "demo.yaml"
    hidden = workspace / ".awf" / "workflows" / "demo.yaml"
    env_dir = workspace.parent / "env"
    for path in (config, local, hidden):
        _write(path)
    assert find_workflow("demo") == hidden
    hidden.unlink()
    assert find_workflow("demo") == local
    local.unlink()
    assert find_workflow("demo") == config
    monkeypatch.setenv("AWF_WORKFLOWS_PATH", str(env_dir))
    _write(env_dir / "demo.yml")
    assert find_workflow("demo") == env_dir / "demo.yml"


def test_yaml_before_yml_and_explicit_suffix(workspace: Path) -> None:
    _write(workspace / "workflows" / "demo.yml")
    assert find_workflow("demo") == workspace / "workflows" / "demo.yml"
    _write(workspace / "workflows" / "demo.yaml")
    assert find_workflow("demo") == workspace / "workflows" / "demo.yaml"
    assert find_workflow("demo.yml") == workspace / "workflows" / "demo.yml"


def test_names_may_have_subfolders(workspace: Path) -> None:
    _write(workspace / "workflows" / "team" / "review.yaml")
    assert find_workflow("team/review") == workspace / "workflows" / "team" / "review.yaml"


def test_relative_to_is_searched_first(workspace: Path) -> None:
    _write(workspace / "workflows" / "child.yaml")
    sibling = _write(workspace / "lib" / "child.yaml")
    assert find_workflow("child", relative_to=workspace / "lib") == sibling


def test_dotdot_names_are_refused(workspace: Path) -> None:
    _write(workspace / "secret.yaml")
    with pytest.raises(UserError, match=r'workflow "\.\./secret": .* must not contain "\.\."'):
        find_workflow("../secret", relative_to=workspace / "workflows")


def test_absolute_name_outside_the_search_path_is_refused(workspace: Path) -> None:
    outside = _write(workspace.parent / "elsewhere" / "x.yaml")
    with pytest.raises(UserError, match="must be inside a workflow folder"):
        find_workflow(str(outside))
    inside = _write(workspace / "workflows" / "y.yaml")
    assert find_workflow(str(inside)) == inside


def test_not_found_names_the_searched_folders(workspace: Path) -> None:
    with pytest.raises(UserError) as info:
        load_workflow("nope")
    message = str(info.value)
    assert message.startswith('workflow "nope" not found (searched: .awf/workflows, workflows, ')
    assert info.value.exit_code == 1


def test_an_existing_file_path_is_loaded_directly(workspace: Path) -> None:
    path = _write(workspace.parent / "elsewhere" / "x.yaml", name="direct")
    assert load_workflow(path).name == "direct"
    assert load_workflow("../elsewhere/x.yaml").name == "direct"
    wf = load_workflow("../elsewhere/x.yaml")
    assert wf.source_path == workspace / "../elsewhere/x.yaml"
    assert wf.base_dir == path.parent or wf.base_dir.resolve() == path.parent.resolve()


def test_problems_name_the_file_as_given(workspace: Path) -> None:
    path = workspace / "bad.yaml"
    path.write_text("name: x\nstates:\n  initial: a\n  a: 1\n")
    with pytest.raises(DefinitionError) as info:
        load_workflow("bad.yaml")
    assert str(info.value.problems[0]).startswith('bad.yaml:4:3: error: states.a: state "a"')


def test_a_file_found_by_name_is_named_by_its_path(workspace: Path) -> None:
    (workspace / "workflows").mkdir()
    (workspace / "workflows" / "bad.yaml").write_text("name: x\n")
    with pytest.raises(DefinitionError) as info:
        load_workflow("bad")
    assert info.value.problems[0].file == "workflows/bad.yaml"


def test_non_utf8_file_is_a_definition_error_with_a_position(workspace: Path) -> None:
    (workspace / "latin.yaml").write_bytes(b"name: demo\ndescription: caf\xe9\n")
    with pytest.raises(DefinitionError) as info:
        load_workflow("latin.yaml")
    [problem] = info.value.problems
    assert (problem.line, problem.column) == (2, 17)
    assert "not valid UTF-8" in problem.message


def test_utf8_bom_is_accepted(workspace: Path) -> None:
    (workspace / "bom.yaml").write_bytes(b"\xef\xbb\xbf" + yml(VALID).encode())
    assert load_workflow("bom.yaml").name == "demo"


def test_a_folder_is_not_a_workflow(workspace: Path) -> None:
    (workspace / "workflows" / "dir.yaml").mkdir(parents=True)
    with pytest.raises(UserError, match='workflow "dir" not found'):
        load_workflow("dir")


# --- listing -------------------------------------------------------------------------------


def test_list_workflows_shows_valid_and_broken_files(workspace: Path) -> None:
    _write(workspace / "workflows" / "good.yaml", name="good", description="All fine")
    (workspace / "workflows" / "broken.yml").write_text("name: broken\ndescription: Oops\n")
    (workspace / "workflows" / "notes.txt").write_text("not a workflow")
    _write(workspace.parent / "config" / "awf" / "workflows" / "good.yaml", description="shadowed")
    _write(workspace.parent / "config" / "awf" / "workflows" / "other.yaml", name="other")
    infos = {info.name: info for info in list_workflows()}
    assert sorted(infos) == ["broken", "good", "other"]
    assert infos["good"].valid and infos["good"].description == "All fine"
    assert infos["good"].path == workspace / "workflows" / "good.yaml"
    assert not infos["broken"].valid
    assert infos["broken"].description == "Oops"
    assert infos["broken"].error == (
        "workflows/broken.yml:1:1: error: states.initial: required field missing"
    )
    assert infos["other"].as_dict()["valid"] is True


def test_list_workflows_counts_further_errors(workspace: Path) -> None:
    (workspace / "workflows").mkdir()
    (workspace / "workflows" / "bad.yaml").write_text("description: x\n")
    [info] = list_workflows()
    assert info.error is not None and info.error.endswith("(and 1 more)")


def test_list_workflows_with_nothing_to_find(workspace: Path) -> None:
    assert list_workflows() == []


def test_the_package_re_exports_the_loader() -> None:
    import awf_nb.workflow as package
    from awf_nb.workflow import checks, loader, model

    assert package.load_workflow is loader.load_workflow
    assert package.load_text is loader.load_text
    assert package.find_workflow is loader.find_workflow
    assert package.list_workflows is loader.list_workflows
    assert package.check_workflow is checks.check_workflow
    assert package.Workflow is model.Workflow
    with pytest.raises(AttributeError):
        package.nothing_here  # noqa: B018
