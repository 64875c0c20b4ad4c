"""AWF's role and skill examples run as AWF documents them: the role's text before the
system prompt (single mode, conversation mode, a conversation partner, a role chosen by a
template), the skills' blocks before the prompt. The agent is a recording scripted
provider standing in for `claude`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from awf_nb.api import arun
from awf_nb.engine.events import RunWarning
from awf_nb.engine.ports import TurnRequest
from awf_nb.errors import DefinitionError
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import Collect, with_providers

pytestmark = pytest.mark.asyncio

FIXTURES = Path(__file__).parents[1] / "workflow" / "awf_fixtures"
PROJECT = FIXTURES / "project"
GO_SENIOR = (
    "You are a senior Go engineer with 10+ years of experience.\n\n"
    "When reviewing code:\n"
    "- Prioritize readability and maintainability\n"
    "- Suggest idiomatic Go patterns"
)


class Recording(ScriptedProvider):
    """Echoes the prompt (no replies scripted) and keeps every request."""

    seen: list[TurnRequest]

    def __init__(self, name: str = "claude") -> None:
        super().__init__(name)
        self.seen = []

    def stream(self, turn: TurnRequest):  # type: ignore[override]
        self.seen.append(turn)
        return super().stream(turn)


async def _run(workflow: str | Path, tmp_path: Path, **kwargs: Any) -> tuple[Any, Recording]:
    made: list[Recording] = []

    def claude(name: str) -> Recording:
        made.append(Recording(name))
        return made[-1]

    kwargs.setdefault("cwd", PROJECT)
    kwargs.setdefault("env", {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    result = await arun(
        workflow, kwargs.pop("inputs", {}), providers=with_providers(claude=claude),
        storage=tmp_path / "runs", **kwargs,
    )  # fmt: skip
    return result, made[0] if made else Recording()


async def test_a_role_goes_before_the_system_prompt(tmp_path: Path) -> None:
    result, claude = await _run(FIXTURES / "role-combined.yaml", tmp_path)
    assert result.ok, result.error
    [request] = claude.seen
    assert request.system_prompt == (
        GO_SENIOR + "\n\nFocus on performance optimizations and memory leaks."
    )
    assert request.prompt == "Review this code: func main() {}"


async def test_a_role_by_path_is_relative_to_the_workflow_file(tmp_path: Path) -> None:
    result, claude = await _run(FIXTURES / "role-path.yaml", tmp_path, cwd=tmp_path)
    assert result.ok, result.error
    assert claude.seen[0].system_prompt == "You are a senior Go engineer, loaded by path.\n"


async def test_the_role_is_a_template(tmp_path: Path) -> None:
    result, claude = await _run(FIXTURES / "role-dynamic.yaml", tmp_path)
    assert result.ok, result.error
    assert claude.seen[0].system_prompt == GO_SENIOR
    result, _ = await _run(
        FIXTURES / "role-dynamic.yaml", tmp_path, inputs={"persona": "security-reviewer"}
    )
    assert not result.ok
    assert 'step review: role: resolve role "security-reviewer": not found' in result.error


async def test_a_missing_role_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match='resolve role "go-senior": not found'):
        await _run(FIXTURES / "role-combined.yaml", tmp_path, cwd=tmp_path)


async def test_a_role_in_conversation_mode_is_the_sessions_system_prompt(tmp_path: Path) -> None:
    result, claude = await _run(
        FIXTURES / "role-conversation.yaml", tmp_path, replies=["and channels?"]
    )
    assert result.ok, result.error
    assert [r.prompt for r in claude.seen] == ["goroutines", "and channels?"]
    assert all(r.system_prompt == GO_SENIOR + "\n\nBe helpful and concise." for r in claude.seen)
    turns = result.steps["chat"].conversation.turns
    assert turns[0].role == "system" and turns[0].content.startswith("You are a senior Go")


async def test_a_partner_has_a_role_of_its_own(tmp_path: Path) -> None:
    workflow = """
name: pair
states:
  initial: write
  write:
    type: agent
    provider: claude
    mode: conversation
    prompt: draft it
    conversation:
      with: {name: reviewer, provider: claude, role: go-senior, system_prompt: Say APPROVED.}
      max_turns: 2
    on_success: done
  done: {type: terminal}
"""
    result, claude = await _run(workflow, tmp_path)
    assert result.ok, result.error
    partner = [r for r in claude.seen if r.speaker == "reviewer"]
    own = [r for r in claude.seen if not r.speaker]
    assert partner and all(r.system_prompt == GO_SENIOR + "\n\nSay APPROVED." for r in partner)
    assert all(r.system_prompt is None for r in own)


async def test_skills_go_before_the_prompt_in_declaration_order(tmp_path: Path) -> None:
    result, claude = await _run(FIXTURES / "skills-mixed.yaml", tmp_path)
    assert result.ok, result.error
    prompt = claude.seen[0].prompt
    conventions = (PROJECT / ".awf/skills/go-conventions").absolute()
    assert prompt.startswith('<skill_content name="go-conventions">\nFollow these Go conventions:')
    assert f"Skill directory: {conventions}\n" in prompt
    assert "<file>references/style-guide.md</file>" in prompt
    first, second = prompt.index('name="go-conventions"'), prompt.index('name="audit"')
    assert first < second
    assert prompt.endswith("</skill_content>\n\nReview this Go code: package main")


async def test_skills_in_conversation_mode_go_with_the_first_message(tmp_path: Path) -> None:
    workflow = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: claude
    mode: conversation
    prompt: hello
    skills: [go-conventions]
    on_success: done
  done: {type: terminal}
"""
    result, claude = await _run(workflow, tmp_path, replies=["second"])
    assert result.ok, result.error
    first, second = (r.prompt for r in claude.seen)
    assert first.startswith('<skill_content name="go-conventions">')
    assert first.endswith("</skill_content>\n\nhello")
    assert second == "second"


async def test_an_empty_skill_warns_when_the_run_starts(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".awf/skills/blank").mkdir(parents=True)
    (project / ".awf/skills/blank/SKILL.md").write_text("")
    workflow = """
name: t
states:
  initial: ask
  ask: {type: agent, provider: claude, prompt: hi, skills: [blank], on_success: done}
  done: {type: terminal}
"""
    sink = Collect()
    result, _ = await _run(workflow, tmp_path, cwd=project, sink=sink)
    assert result.ok, result.error
    warnings = [e.message for e in sink.of(RunWarning)]
    assert 'states.ask.skills[0]: skill "blank" has empty content' in warnings


# --- confined: what leads out of the project never reaches the model --------------------------

SECRET = "MARKER-outside-the-project"

TEMPLATED_ROLE = """
name: t
inputs: [{name: persona, type: string}]
states:
  initial: ask
  ask: {type: agent, provider: claude, prompt: hi, role: "{{.inputs.persona}}", on_success: done}
  done: {type: terminal}
"""


def _hostile_project(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose roles lead out (to a secret, /proc/self/environ, a folder
    elsewhere), and the folder elsewhere, holding a role and a skill that say SECRET."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    for folder in ("role", "skill"):
        (elsewhere / folder).mkdir(parents=True)
    (elsewhere / "secret.txt").write_text(SECRET)
    (elsewhere / "role/AGENTS.md").write_text(SECRET)
    (elsewhere / "skill/SKILL.md").write_text(SECRET)
    roles = project / ".awf/roles"
    for name in ("linked-file", "environ"):
        (roles / name).mkdir(parents=True)
    (roles / "linked-file/AGENTS.md").symlink_to(elsewhere / "secret.txt")
    (roles / "environ/AGENTS.md").symlink_to("/proc/self/environ")
    (roles / "linked-folder").symlink_to(elsewhere / "role")
    return project, elsewhere


@pytest.mark.parametrize(
    ("persona", "reason"),
    [
        ("linked-file", "is outside the project"),
        ("environ", "files under /proc and /sys are never read as a role"),
        ("linked-folder", "is outside the project"),
        ("{elsewhere}/role", "is outside the project"),
    ],
)
async def test_a_templated_role_leading_out_fails_the_step(
    tmp_path: Path, persona: str, reason: str
) -> None:
    """Validation leaves a templated role to the run: the step refuses it."""
    project, elsewhere = _hostile_project(tmp_path)
    persona = persona.format(elsewhere=elsewhere)
    result, claude = await _run(TEMPLATED_ROLE, tmp_path, cwd=project, inputs={"persona": persona})
    assert not result.ok
    assert result.error.startswith("step ask: role: ")
    assert reason in result.error
    assert claude.seen == []


@pytest.mark.parametrize(
    ("swap", "reason"),
    [
        ("rm .awf/skills/s/SKILL.md && ln -s {elsewhere}/secret.txt .awf/skills/s/SKILL.md",
         ".awf/skills/s/SKILL.md (a link to {elsewhere}/secret.txt) is outside the project"),
        ("rm -r .awf/skills/s && ln -s {elsewhere}/skill .awf/skills/s",
         ".awf/skills/s (a link to {elsewhere}/skill) is outside the project"),
        ("rm .awf/roles/r/AGENTS.md && ln -s {elsewhere}/secret.txt .awf/roles/r/AGENTS.md",
         ".awf/roles/r/AGENTS.md (a link to {elsewhere}/secret.txt) is outside the project"),
    ],
)  # fmt: skip
async def test_a_role_or_skill_turned_into_a_link_by_then_fails_the_step(
    tmp_path: Path, swap: str, reason: str
) -> None:
    """Checked before the run starts, and again when the step starts: a command run
    before it (or at the same time) may have swapped a file for a link."""
    project, elsewhere = _hostile_project(tmp_path)
    (project / ".awf/skills/s").mkdir(parents=True)
    (project / ".awf/skills/s/SKILL.md").write_text("a skill")
    (project / ".awf/roles/r").mkdir(parents=True)
    (project / ".awf/roles/r/AGENTS.md").write_text("a role")
    workflow = f"""
name: t
states:
  initial: swap
  swap: {{type: step, command: "{swap.format(elsewhere=elsewhere)}", on_success: ask}}
  ask: {{type: agent, provider: claude, prompt: hi, role: r, skills: [s], on_success: done}}
  done: {{type: terminal}}
"""
    result, claude = await _run(workflow, tmp_path, cwd=project)
    assert not result.ok
    assert reason.format(elsewhere=elsewhere) in result.error
    assert claude.seen == []


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ("role: linked-file", "is outside the project"),
        ("role: environ", "files under /proc and /sys are never read as a role"),
        ("role: linked-folder", "is outside the project"),
        ("role: {elsewhere}/role", "is outside the project"),
        ("skills: [{{path: {elsewhere}/skill}}]", "is outside the project"),
    ],
)
async def test_a_role_or_skill_leading_out_stops_the_run_before_it_starts(
    tmp_path: Path, step: str, reason: str
) -> None:
    project, elsewhere = _hostile_project(tmp_path)
    step = step.format(elsewhere=elsewhere)
    workflow = f"""
name: t
states:
  initial: ask
  ask: {{type: agent, provider: claude, prompt: hi, {step}, on_success: done}}
  done: {{type: terminal}}
"""
    with pytest.raises(DefinitionError, match=reason) as caught:
        await _run(workflow, tmp_path, cwd=project)
    assert SECRET not in str(caught.value)


async def test_what_the_model_gets_through_links_inside_the_project(tmp_path: Path) -> None:
    project, _ = _hostile_project(tmp_path)
    (project / "shared").mkdir()
    (project / "shared/critic.md").write_text("You are a critic.")
    (project / ".awf/roles/critic").mkdir()
    (project / ".awf/roles/critic/AGENTS.md").symlink_to("../../../shared/critic.md")
    workflow = TEMPLATED_ROLE
    result, claude = await _run(workflow, tmp_path, cwd=project, inputs={"persona": "critic"})
    assert result.ok, result.error
    [request] = claude.seen
    assert request.system_prompt == "You are a critic."
    assert SECRET not in repr(request)


async def test_skills_are_found_and_listed_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A skill folder's walk may take a while: the loop keeps driving the frontend."""
    import threading

    from awf_nb.workflow import roles_skills

    threads: list[threading.Thread] = []
    resolve = roles_skills.resolve_skill

    def noting(*args: Any) -> roles_skills.Skill:
        threads.append(threading.current_thread())
        return resolve(*args)

    monkeypatch.setattr(roles_skills, "resolve_skill", noting)
    result, claude = await _run(FIXTURES / "skills-mixed.yaml", tmp_path)
    assert result.ok, result.error
    # two skills: found once by the check before the run starts (which also loads the
    # workflow, off any step), then again when the step starts, in a worker thread
    assert len(threads) == 4
    assert threading.current_thread() not in threads[2:]
    assert claude.seen[0].prompt.startswith('<skill_content name="go-conventions">')
