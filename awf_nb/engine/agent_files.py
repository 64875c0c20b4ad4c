"""An agent step's role (an AGENTS.md before its system prompt) and skills (SKILL.md
blocks before its prompt), found and read for the run (workflow/roles_skills.py knows the
files). Used by the agent step and by an agent partner of a conversation (its `role:`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from awf_nb.errors import ExecutionError
from awf_nb.workflow import roles_skills

if TYPE_CHECKING:
    from awf_nb.engine.context import LoopFrame
    from awf_nb.engine.runtime import StepRun
    from awf_nb.workflow.model import AgentStep


def _lookup(run: StepRun) -> roles_skills.Lookup:
    return roles_skills.Lookup(run.config.cwd, run.config.env, run.workflow.base_dir)


def with_role(
    run: StepRun,
    step: str,
    role: str | None,
    system: str | None,
    *,
    what: str,
    loop: LoopFrame | None = None,
) -> str | None:
    """`system` preceded by the text of the role `role` names (a template; its result a
    name or a path), as AWF composes them; unchanged without a role."""
    if not role:
        return system
    ref = run.ctx.render(role, step=step, what=what, loop=loop).strip()
    if not ref:  # a template that chose no role
        return system
    try:
        found = roles_skills.resolve_role(ref, _lookup(run))
    except roles_skills.AgentFileError as exc:
        raise ExecutionError(f"step {step}: {what}: {exc.message}", step=step) from None
    for warning in roles_skills.role_warnings(found, system):
        run.warn_once(f"role:{step}:{warning}", f"step {step}: {warning}", step)
    return roles_skills.compose_system_prompt(found.content, system)


async def with_skills(run: StepRun, step: AgentStep, prompt: str) -> str:
    """The prompt preceded by the step's skills, each in its `<skill_content>` block.

    Found and read in a worker thread: listing a skill's folder walks up to
    `roles_skills.MAX_SKILL_ENTRIES` entries, and the loop also drives the frontend and
    the run's other steps."""
    if not step.skills:
        return prompt
    lookup, refs = _lookup(run), list(step.skills)
    try:
        skills = await asyncio.to_thread(
            lambda: [roles_skills.resolve_skill(ref, lookup) for ref in refs]
        )
    except roles_skills.AgentFileError as exc:
        raise ExecutionError(f"step {step.name}: skills: {exc.message}", step=step.name) from None
    for skill in skills:
        for warning in roles_skills.skill_warnings(skill):
            run.warn_once(f"skill:{step.name}:{warning}", f"step {step.name}: {warning}", step.name)
    return roles_skills.with_skills(prompt, skills)
