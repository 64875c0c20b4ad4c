"""Roles (AGENTS.md) and skills (SKILL.md) as AWF finds, reads and checks them: one test per
discovery rule and per `awf validate` message (workflow/roles_skills.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from awf_nb.workflow.loader import load_text
from awf_nb.workflow.model import SkillPath
from awf_nb.workflow.roles_skills import (
    MAX_AGENT_FILE_BYTES,
    AgentFileError,
    Lookup,
    agent_file_problems,
    format_skill,
    resolve_role,
    resolve_skill,
    strip_front_matter,
)
from tests.support.cli import run_awf

FIXTURES = Path(__file__).parent / "awf_fixtures"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """A project folder (the run's working directory), a home, a config home, a workflow
    folder and an override folder, all empty."""
    names = ("cwd", "home", "config", "wfdir", "override")
    found = {name: tmp_path / name for name in names}
    for path in found.values():
        path.mkdir()
    return found


def _lookup(places: dict[str, Path], **env: str) -> Lookup:
    base = {"HOME": str(places["home"]), "XDG_CONFIG_HOME": str(places["config"])}
    return Lookup(places["cwd"], {**base, **env}, places["wfdir"])


ROLE_DIRS = [
    ("cwd", ".awf/roles"),
    ("cwd", ".agents/roles"),
    ("config", "awf/roles"),
    ("home", ".agents/roles"),
]


@pytest.mark.parametrize("rank", range(len(ROLE_DIRS)))
def test_a_role_name_is_found_in_awfs_order(places: dict[str, Path], rank: int) -> None:
    """Each folder wins over every one after it, and is found when it alone has the role."""
    for root, folder in ROLE_DIRS[rank:]:
        _write(places[root] / folder / "critic" / "AGENTS.md", f"from {root}/{folder}")
    role = resolve_role("critic", _lookup(places))
    root, folder = ROLE_DIRS[rank]
    assert role.content == f"from {root}/{folder}"
    assert role.name == "critic"


def test_awf_roles_path_is_an_exclusive_override(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/roles/critic/AGENTS.md", "local")
    override = places["override"]
    lookup = _lookup(places, AWF_ROLES_PATH=f"{places['home']}/none:{override}")
    with pytest.raises(AgentFileError, match='resolve role "critic": not found'):
        resolve_role("critic", lookup)
    _write(override / "critic/AGENTS.md", "overridden")
    assert resolve_role("critic", lookup).content == "overridden"


def test_awf_config_home_wins_over_xdg(places: dict[str, Path]) -> None:
    _write(places["config"] / "awf/roles/critic/AGENTS.md", "xdg")
    _write(places["override"] / "roles/critic/AGENTS.md", "awf config home")
    lookup = _lookup(places, AWF_CONFIG_HOME=str(places["override"]))
    assert resolve_role("critic", lookup).content == "awf config home"


def test_a_role_path_is_relative_to_the_workflow_file(places: dict[str, Path]) -> None:
    _write(places["wfdir"] / "my-roles/critic/AGENTS.md", "by path")
    _write(places["cwd"] / "my-roles/critic/AGENTS.md", "not this one")
    assert resolve_role("./my-roles/critic", _lookup(places)).content == "by path"
    assert resolve_role("my-roles/critic", _lookup(places)).content == "by path"
    # the file itself may be named
    assert resolve_role("./my-roles/critic/AGENTS.md", _lookup(places)).content == "by path"


def test_a_role_path_expands_the_tilde_and_takes_absolute_paths(places: dict[str, Path]) -> None:
    _write(places["home"] / ".agents/roles/critic/AGENTS.md", "home")
    assert resolve_role("~/.agents/roles/critic", _lookup(places)).content == "home"
    absolute = str(places["home"] / ".agents/roles/critic")
    assert resolve_role(absolute, _lookup(places)).content == "home"


# --- confinement: what a cloned repository or a templated path cannot make awf send -------

SECRET = "MARKER-do-not-send-0x5eed"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    """A file outside the project that stands in for ~/.aws/credentials."""
    return _write(tmp_path / "elsewhere" / "credentials", SECRET)


def _refused(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(AgentFileError) as caught:
        call()
    assert caught.value.kind == "outside"
    return caught.value.message


def test_a_role_file_linked_out_of_the_project_is_refused(places, secret_file) -> None:
    link = places["cwd"] / ".awf/roles/x/AGENTS.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret_file)
    message = _refused(lambda: resolve_role("x", _lookup(places)))
    assert "outside the project and the role folders, so it is not read" in message
    assert SECRET not in message


def test_a_role_file_linked_to_proc_is_refused(places: dict[str, Path]) -> None:
    link = places["cwd"] / ".awf/roles/env/AGENTS.md"
    link.parent.mkdir(parents=True)
    link.symlink_to("/proc/self/environ")
    assert "are never read as a role" in _refused(lambda: resolve_role("env", _lookup(places)))


def test_a_role_folder_linked_out_of_the_project_is_refused(places, secret_file) -> None:
    _write(secret_file.parent / "AGENTS.md", SECRET)  # as if ~/.ssh held one
    (places["cwd"] / ".awf/roles").mkdir(parents=True)
    (places["cwd"] / ".awf/roles/ssh").symlink_to(secret_file.parent)
    _refused(lambda: resolve_role("ssh", _lookup(places)))


def test_an_absolute_path_to_another_project_is_refused(places, secret_file) -> None:
    _write(secret_file.parent / "other/AGENTS.md", SECRET)
    _refused(lambda: resolve_role(str(secret_file.parent / "other"), _lookup(places)))


def test_a_skill_file_linked_out_of_the_project_is_refused(places, secret_file) -> None:
    link = places["cwd"] / ".awf/skills/s/SKILL.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret_file)
    message = _refused(lambda: resolve_skill("s", _lookup(places)))
    assert "outside the project and the skill folders" in message


def test_a_fifo_as_a_role_file_is_refused_without_blocking(places: dict[str, Path]) -> None:
    import os

    fifo = places["cwd"] / ".awf/roles/pipe/AGENTS.md"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    with pytest.raises(AgentFileError, match=r"not a regular file \(it is a named pipe"):
        resolve_role("pipe", _lookup(places))  # never opened: it would block


def test_links_that_stay_inside_the_project_still_work(places: dict[str, Path]) -> None:
    real = _write(places["cwd"] / "personas/critic.md", "inside")
    link = places["cwd"] / ".awf/roles/critic/AGENTS.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert resolve_role("critic", _lookup(places)).content == "inside"


def test_validate_reports_a_linked_role_and_never_its_text(places, secret_file) -> None:
    link = places["cwd"] / ".awf/roles/x/AGENTS.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret_file)
    [(severity, path, message)] = _problems(places, "role: x")
    assert (severity, path) == ("error", "states.ask.role")
    assert "so it is not read" in message and SECRET not in message


def test_a_role_path_outside_the_role_folders_is_refused_unless_listed(
    places: dict[str, Path],
) -> None:
    """A path may lead to the project, the workflow's folder or a role folder only; a
    folder named in AWF_ROLES_PATH is one."""
    _write(places["home"] / "shared/critic/AGENTS.md", "home")
    with pytest.raises(AgentFileError, match="outside the project and the role folders"):
        resolve_role("~/shared/critic", _lookup(places))
    lookup = _lookup(places, AWF_ROLES_PATH=str(places["home"] / "shared"))
    assert resolve_role("~/shared/critic", lookup).content == "home"


def test_front_matter_is_stripped_as_awf_strips_it() -> None:
    assert strip_front_matter("---\nname: x\n---\n\n  Body text\n\n") == "Body text"
    assert strip_front_matter("---\nname: x\n---") == ""
    assert strip_front_matter("No front matter\n") == "No front matter\n"
    assert strip_front_matter("---\r\nname: x\r\n---\r\nBody") == "Body"
    assert strip_front_matter("---\nnot closed\n") == "---\nnot closed\n"


@pytest.mark.parametrize(
    ("rank", "root", "folder"),
    [
        (0, "cwd", ".awf/skills"),
        (1, "cwd", ".agents/skills"),
        (2, "cwd", ".claude/skills"),
        (3, "config", "awf/skills"),
        (4, "home", ".agents/skills"),
        (5, "home", ".claude/skills"),
    ],
)
def test_a_skill_name_is_found_in_awfs_order(
    places: dict[str, Path], rank: int, root: str, folder: str
) -> None:
    order = [
        ("cwd", ".awf/skills"),
        ("cwd", ".agents/skills"),
        ("cwd", ".claude/skills"),
        ("config", "awf/skills"),
        ("home", ".agents/skills"),
        ("home", ".claude/skills"),
    ]
    for where, path in order[rank:]:
        _write(places[where] / path / "lint" / "SKILL.md", f"from {where}/{path}")
    assert resolve_skill("lint", _lookup(places)).content == f"from {root}/{folder}"


def test_awf_skills_path_is_an_exclusive_override(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/skills/lint/SKILL.md", "local")
    lookup = _lookup(places, AWF_SKILLS_PATH=str(places["override"]))
    with pytest.raises(AgentFileError, match='skill "lint" not found in search paths'):
        resolve_skill("lint", lookup)


def test_a_skill_path_is_relative_to_the_workflow_file_or_home(places: dict[str, Path]) -> None:
    _write(places["wfdir"] / "skills/audit/SKILL.md", "relative")
    _write(places["home"] / ".agents/skills/audit/SKILL.md", "home")
    assert resolve_skill(SkillPath(path="./skills/audit"), _lookup(places)).content == "relative"
    home_skill = SkillPath(path="~/.agents/skills/audit")
    assert resolve_skill(home_skill, _lookup(places)).content == "home"


def test_the_skill_block_is_awfs_with_the_bundled_files() -> None:
    lookup = Lookup(FIXTURES / "project", {"HOME": "/nonexistent"}, FIXTURES)
    skill = resolve_skill(SkillPath(path="./custom-skills/audit"), lookup)
    location = (FIXTURES / "custom-skills/audit").absolute()
    assert format_skill(skill) == textwrap.dedent(
        f"""\
        <skill_content name="audit">
        # Audit

        Check every input is validated.


        Skill directory: {location}
        Relative paths in this skill are relative to the skill directory.

        <skill_resources>
        <file>references/checklist.md</file>
        <file>references/examples/sample-config.yaml</file>
        <file>scripts/check-security.sh</file>
        </skill_resources>
        </skill_content>"""
    )


def test_bundled_files_are_listed_four_folders_deep_without_git(places: dict[str, Path]) -> None:
    skill_dir = places["wfdir"] / "deep"
    _write(skill_dir / "SKILL.md", "body")
    _write(skill_dir / "a/b/c/d/kept.txt", "")
    _write(skill_dir / "a/b/c/d/e/too-deep.txt", "")
    _write(skill_dir / ".git/config", "")
    _write(skill_dir / "node_modules/x/index.js", "")
    skill = resolve_skill(SkillPath(path="deep"), _lookup(places))
    assert skill.resources == ("a/b/c/d/kept.txt",)


def test_a_role_file_over_the_cap_is_refused(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/roles/huge/AGENTS.md", "x" * (MAX_AGENT_FILE_BYTES + 1))
    with pytest.raises(AgentFileError, match="larger than 1 MiB"):
        resolve_role("huge", _lookup(places))


# --- awf validate: AWF's messages -------------------------------------------------------------


def _problems(places: dict[str, Path], step: str, **env: str) -> list[tuple[str, str, str]]:
    source = textwrap.dedent(
        """\
        name: t
        states:
          initial: ask
          ask:
            type: agent
            provider: claude
            prompt: hi
        {step}
            on_success: done
          done: {{type: terminal}}
        """
    ).format(step=textwrap.indent(textwrap.dedent(step), "    "))
    path = _write(places["wfdir"] / "wf.yaml", source)
    workflow = load_text(source, file=str(path), path=path)
    base = {"HOME": str(places["home"]), "XDG_CONFIG_HOME": str(places["config"])}
    found = agent_file_problems(workflow, cwd=places["cwd"], env={**base, **env})
    return [(p.severity, p.path, p.message) for p in found]


def test_validate_a_missing_role_is_an_error(places: dict[str, Path]) -> None:
    [(severity, path, message)] = _problems(places, "role: nobody")
    assert (severity, path) == ("error", "states.ask.role")
    assert message.startswith('resolve role "nobody": not found')


def test_validate_a_role_folder_without_agents_md_is_an_error(places: dict[str, Path]) -> None:
    (places["cwd"] / ".awf/roles/empty-dir").mkdir(parents=True)
    assert _problems(places, "role: empty-dir") == [
        ("error", "states.ask.role", 'role "empty-dir" has no AGENTS.md')
    ]
    (places["wfdir"] / "roles/bare").mkdir(parents=True)
    assert _problems(places, "role: ./roles/bare") == [
        ("error", "states.ask.role", 'role "bare" has no AGENTS.md')
    ]


def test_validate_a_role_with_dotdot_is_an_error(places: dict[str, Path]) -> None:
    assert _problems(places, "role: ../outside/critic") == [
        (
            "error",
            "states.ask.role",
            "role path contains path-traversal pattern (..): ../outside/critic",
        )
    ]


def test_validate_an_empty_role_body_is_a_warning(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/roles/blank/AGENTS.md", "---\nname: blank\n---\n")
    assert _problems(places, "role: blank") == [
        ("warning", "states.ask.role", 'role "blank" has empty AGENTS.md body')
    ]


def test_validate_an_oversized_role_is_a_warning(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/roles/big/AGENTS.md", "x" * (500 * 1024 + 1))
    assert _problems(places, "role: big") == [
        ("warning", "states.ask.role", 'role "big": AGENTS.md exceeds 500KB size threshold')
    ]


def test_validate_a_large_role_and_system_prompt_is_a_warning(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/roles/wordy/AGENTS.md", "x" * (8 * 1024))
    step = f"role: wordy\nsystem_prompt: {'y' * (3 * 1024)}"
    assert _problems(places, step) == [
        (
            "warning",
            "states.ask.role",
            'role "wordy": combined role content and system_prompt exceeds 10KB threshold',
        )
    ]


def test_validate_a_templated_role_is_left_to_the_run(places: dict[str, Path]) -> None:
    assert _problems(places, 'role: "{{.env.PERSONA}}"') == []


def test_validate_a_partners_role_is_checked_too(places: dict[str, Path]) -> None:
    step = """\
        mode: conversation
        conversation:
          with: {provider: claude, role: ghost}
          max_turns: 2
        """
    [(severity, path, message)] = _problems(places, step)
    assert (severity, path) == ("error", "states.ask.conversation.with.role")
    assert 'resolve role "ghost"' in message


def test_validate_skill_messages(places: dict[str, Path]) -> None:
    _write(places["cwd"] / ".awf/skills/empty/SKILL.md", "")
    (places["cwd"] / ".awf/skills/no-file").mkdir(parents=True)
    step = "skills: [nonexistent, no-file, empty, {path: ./missing}]"
    problems = _problems(places, step)
    assert problems[0][:2] == ("error", "states.ask.skills[0]")
    assert problems[0][2].startswith('skill "nonexistent" not found in search paths: ')
    assert problems[1:] == [
        ("error", "states.ask.skills[1]", 'skill "no-file" has no SKILL.md'),
        ("warning", "states.ask.skills[2]", 'skill "empty" has empty content'),
        (
            "error",
            "states.ask.skills[3]",
            f'skill "missing" not found in search paths: {places["wfdir"] / "missing"}',
        ),
    ]


def test_validate_a_skill_name_with_a_separator_is_an_error(places: dict[str, Path]) -> None:
    assert _problems(places, 'skills: ["a..b"]') == [
        (
            "error",
            "states.ask.skills[0]",
            "invalid skill name 'a..b': must not contain path separators or '..'",
        )
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('[""]', "skill[0]: empty skill name"),
        ("[{name: x}]", "skill[0]: map must have 'path' key"),
        ('[ok, {path: ""}]', "skill[1]: path must be a non-empty string"),
        ("[3]", "skill[0]: invalid type"),
    ],
)
def test_skill_references_are_checked_with_awfs_messages(value: str, message: str) -> None:
    from awf_nb.errors import DefinitionError

    source = f"""
name: t
states:
  initial: ask
  ask: {{type: agent, provider: claude, prompt: hi, skills: {value}, on_success: done}}
  done: {{type: terminal}}
"""
    with pytest.raises(DefinitionError) as caught:
        load_text(source)
    assert any(message in p.message for p in caught.value.problems), caught.value.problems


def test_awf_validate_reports_roles_and_skills(places: dict[str, Path], monkeypatch) -> None:
    """`awf validate` runs these checks (exit 2 on an error), with the file and line."""
    _write(places["wfdir"] / "wf.yaml", (FIXTURES / "role-combined.yaml").read_text())
    env = {"HOME": str(places["home"]), "PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": "/none"}
    done = run_awf(
        "validate", str(places["wfdir"] / "wf.yaml"), cwd=places["cwd"], env=env, inherit_env=False
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'wf.yaml:11:5: error: states.review.role: resolve role "go-senior": not found' in (
        done.stdout
    )
    done = run_awf(
        "validate",
        str(places["wfdir"] / "wf.yaml"),
        cwd=FIXTURES / "project",
        env=env,
        inherit_env=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "fixture", ["role-combined.yaml", "role-conversation.yaml", "skills-mixed.yaml"]
)
def test_the_json_schema_knows_roles_and_skills(fixture: str) -> None:
    import jsonschema
    import yaml

    from awf_nb.workflow.loader import json_schema

    jsonschema.validate(yaml.safe_load((FIXTURES / fixture).read_text()), json_schema())
    bad = yaml.safe_load((FIXTURES / "skills-mixed.yaml").read_text())
    bad["states"]["analyze"]["skills"] = [{"name": "x"}]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema())
