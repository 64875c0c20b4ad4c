"""Agent roles (`role:`, an AGENTS.md) and skills (`skills:`, SKILL.md files), as AWF has
them: where they are looked for, how they are read, the text an agent is given, and what
`awf validate` says about them.

A role is a persona: the body of `<role-dir>/AGENTS.md` (YAML front matter stripped),
put before the step's `system_prompt`. A skill is knowledge: the body of
`<skill-dir>/SKILL.md` in a `<skill_content>` block naming the skill's folder and the
files bundled in it, put before the step's prompt.

By name, a role is found in the first of `$AWF_ROLES_PATH` (colon-separated; when set,
nothing else is searched), `.awf/roles/`, `.agents/roles/` (both in the run's working
directory), `$AWF_CONFIG_HOME` or `$XDG_CONFIG_HOME/awf/roles/` (default
`~/.config/awf/roles/`), `~/.agents/roles/`. Skills: `$AWF_SKILLS_PATH` (exclusive), then
`.awf/skills/`, `.agents/skills/`, `.claude/skills/`, the config `awf/skills/`,
`~/.agents/skills/`, `~/.claude/skills/`. A reference that starts with `.` or `~` or holds a
`/` is a path: relative to the workflow file's folder, `~` expanded.

Reading is bounded: a file over 1 MiB is refused (AWF only warns past 500 KB, as we do
too), and a skill lists at most `MAX_SKILL_RESOURCES` bundled files, four folders deep.
Only reading files happens here (the workflow package does no other I/O).

Reading is confined, as the built-in file tools are: a role's or skill's file, links
followed, must be a regular file inside the project (the run's working directory or the
workflow file's folder) or one of the folders roles and skills are looked up in; `/proc`,
`/sys` and `/dev` never are. A cloned repository can ship `AGENTS.md -> /proc/self/environ`
or a role folder linked to `~/.ssh`, and a templated role can be handed any path: what the
model is sent as a persona must never be whatever such a link points at.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from awf_nb.errors import Problem
from awf_nb.workflow.files import MAX_FILE_BYTES, FileTooLarge, read_text_capped

if TYPE_CHECKING:
    from awf_nb.workflow.model import SkillPath, Workflow

# AWF's thresholds (warnings only, as in AWF).
ROLE_SIZE_WARN_BYTES = 500 * 1024
SKILL_SIZE_WARN_BYTES = 500 * 1024
COMBINED_PROMPT_WARN_BYTES = 10 * 1024
# Ours: what one role or skill file may hold at all, and how many bundled files a skill
# lists (AWF has neither bound; a skill folder holding a repository would flood the prompt).
MAX_AGENT_FILE_BYTES = MAX_FILE_BYTES
MAX_SKILL_RESOURCES = 1000
SKILL_RESOURCE_DEPTH = 4  # folders below the skill's own, as AWF walks them
_SKIPPED_FOLDERS = frozenset({".git", "node_modules"})

ROLE_FILE = "AGENTS.md"
SKILL_FILE = "SKILL.md"


class AgentFileError(Exception):
    """A role or skill that cannot be used; the message is AWF's where AWF has one."""

    def __init__(self, message: str, *, kind: str = "not_found") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


@dataclass(frozen=True)
class Lookup:
    """Where names are looked up: the run's working directory, its environment (for
    `AWF_ROLES_PATH`, `HOME`, …) and the workflow file's folder (for path references)."""

    cwd: Path
    env: Mapping[str, str]
    workflow_dir: Path

    def home(self) -> Path:
        home = self.env.get("HOME")
        return Path(home) if home else Path.home()

    def config_dir(self) -> Path:
        """AWF's configuration folder: `$AWF_CONFIG_HOME`, else `$XDG_CONFIG_HOME/awf`."""
        if awf_home := self.env.get("AWF_CONFIG_HOME"):
            return self._absolute(awf_home)
        xdg = self.env.get("XDG_CONFIG_HOME")
        return (self._absolute(xdg) if xdg else self.home() / ".config") / "awf"

    def _absolute(self, path: str) -> Path:
        return self.cwd / Path(path).expanduser()

    def search_path(self, kind: Literal["roles", "skills"]) -> list[Path]:
        """The folders a name is looked up in, in order (the override alone when set)."""
        override = self.env.get("AWF_ROLES_PATH" if kind == "roles" else "AWF_SKILLS_PATH")
        if override:
            return [self._absolute(entry) for entry in override.split(os.pathsep) if entry]
        home = self.home()
        local = [self.cwd / ".awf" / kind, self.cwd / ".agents" / kind]
        shared = [self.config_dir() / kind, home / ".agents" / kind]
        if kind == "skills":
            local.append(self.cwd / ".claude" / "skills")
            shared.append(home / ".claude" / "skills")
        return local + shared

    def path_ref(self, ref: str) -> Path:
        """A path reference: `~` expanded, relative to the workflow file's folder."""
        if ref == "~" or ref.startswith("~/"):
            return self.home() / ref[2:]
        path = Path(ref)
        return Path(os.path.normpath(path if path.is_absolute() else self.workflow_dir / path))


@dataclass(frozen=True)
class Role:
    name: str
    content: str  # the AGENTS.md body, front matter stripped
    source: Path
    raw_size: int


@dataclass(frozen=True)
class Skill:
    name: str
    content: str  # the SKILL.md body, front matter stripped
    location: Path  # the skill's folder, absolute
    resources: tuple[str, ...] = ()  # bundled files, relative to the folder, sorted
    resources_left_out: int = 0  # past MAX_SKILL_RESOURCES
    raw_size: int = 0


# --- references -----------------------------------------------------------------------------


def is_path_ref(ref: str) -> bool:
    """A reference with a `/` or `\\`, or starting with `.` or `~`, is a path (AWF's rule)."""
    return bool(ref) and ("/" in ref or "\\" in ref or ref[0] in ".~")


def resolve_role(ref: str, lookup: Lookup) -> Role:
    """The role `ref` names (a name or a path). Raises `AgentFileError`."""
    if ".." in ref:
        raise AgentFileError(
            f"role path contains path-traversal pattern (..): {ref}", kind="traversal"
        )
    if not is_path_ref(ref):
        for folder in lookup.search_path("roles"):
            if (folder / ref / ROLE_FILE).is_file():
                return _read_role(folder / ref, lookup)
        if any((folder / ref).is_dir() for folder in lookup.search_path("roles")):
            raise AgentFileError(f'role "{ref}" has no {ROLE_FILE}', kind="missing_file")
        searched = ", ".join(str(p) for p in lookup.search_path("roles"))
        raise AgentFileError(f'resolve role "{ref}": not found (searched: {searched})')
    path = lookup.path_ref(ref)
    folder = path.parent if path.name == ROLE_FILE else path
    if (folder / ROLE_FILE).is_file():
        return _read_role(folder, lookup)
    if folder.is_dir():
        raise AgentFileError(f'role "{folder.name}" has no {ROLE_FILE}', kind="missing_file")
    raise AgentFileError(f'resolve role "{ref}": not found ({folder} does not exist)')


def resolve_skill(ref: str | SkillPath, lookup: Lookup) -> Skill:
    """The skill `ref` names: a name, or `{path: …}`. Raises `AgentFileError`."""
    if isinstance(ref, str):
        if "/" in ref or "\\" in ref or ".." in ref:
            raise AgentFileError(
                f"invalid skill name {ref!r}: must not contain path separators or '..'",
                kind="traversal",
            )
        folders = [folder / ref for folder in lookup.search_path("skills")]
    else:
        folders = [lookup.path_ref(ref.path)]
    for folder in folders:
        if (folder / SKILL_FILE).is_file():
            return _read_skill(folder, lookup)
    name = folders[0].name if folders else str(ref)
    if any(folder.is_dir() for folder in folders):
        raise AgentFileError(f'skill "{name}" has no {SKILL_FILE}', kind="missing_file")
    shown = [folder.parent if isinstance(ref, str) else folder for folder in folders]
    searched = ", ".join(str(folder) for folder in shown)
    raise AgentFileError(f'skill "{name}" not found in search paths: {searched}')


# --- reading -------------------------------------------------------------------------------


def strip_front_matter(text: str) -> str:
    """The body of a Markdown file whose YAML front matter (`---` … `---`) is removed, as
    AWF strips it: the body is trimmed; a file that is only front matter is empty; a file
    without front matter is kept as it is."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return text
    rest = text[4:]
    _, found, body = rest.partition("\n---\n")
    if found:
        return body.strip()
    if rest.endswith("\n---"):
        return ""
    return text


def _read(path: Path) -> tuple[str, int]:
    try:
        size = path.stat().st_size
        return read_text_capped(path, MAX_AGENT_FILE_BYTES), size
    except FileTooLarge:
        limit = MAX_AGENT_FILE_BYTES // (1 << 20)
        raise AgentFileError(f"{path} is larger than {limit} MiB", kind="too_large") from None
    except OSError as exc:
        raise AgentFileError(
            f"cannot read {path}: {exc.strerror or exc}", kind="unreadable"
        ) from None


# Never a role or skill, wherever a link leads: the kernel's and the devices' files.
_SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))


def confine(path: Path, lookup: Lookup, kind: Literal["roles", "skills"]) -> None:
    """Refuse `path` (an AGENTS.md or SKILL.md) unless, links followed, it is a regular
    file inside the project or a folder `kind` are looked up in. Raises `AgentFileError`."""
    real = Path(os.path.realpath(path))
    what = "role" if kind == "roles" else "skill"
    if any(real == folder or folder in real.parents for folder in _SYSTEM_FOLDERS):
        raise AgentFileError(
            f"{what} file {path} leads to {real}, a system file: refused", kind="outside"
        )
    roots = [lookup.cwd, lookup.workflow_dir, *lookup.search_path(kind)]
    allowed = {Path(os.path.realpath(root)) for root in roots}
    if not any(real == root or root in real.parents for root in allowed):
        raise AgentFileError(
            f"{what} file {path} leads to {real}, outside the project and the {kind} "
            f"folders: refused (put the {what} under .awf/{kind}/ or in ~/.agents/{kind}/)",
            kind="outside",
        )
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise AgentFileError(
            f"cannot read {path}: {exc.strerror or exc}", kind="unreadable"
        ) from None
    if not stat.S_ISREG(mode):
        raise AgentFileError(f"{what} file {path} is not a regular file: refused", kind="outside")


def _read_role(folder: Path, lookup: Lookup) -> Role:
    source = (folder / ROLE_FILE).absolute()
    confine(source, lookup, "roles")
    text, size = _read(source)
    return Role(folder.name, strip_front_matter(text), source, size)


def _read_skill(folder: Path, lookup: Lookup) -> Skill:
    location = folder.absolute()
    confine(location / SKILL_FILE, lookup, "skills")
    text, size = _read(location / SKILL_FILE)
    resources, left_out = _bundled_files(location)
    return Skill(folder.name, strip_front_matter(text), location, resources, left_out, size)


def _bundled_files(folder: Path) -> tuple[tuple[str, ...], int]:
    """The files in a skill's folder other than SKILL.md, relative and sorted; at most
    `MAX_SKILL_RESOURCES` (and how many more there were)."""
    found: list[str] = []
    more = 0
    for root, dirs, files in os.walk(folder, onerror=lambda _: None):
        depth = len(Path(root).relative_to(folder).parts)
        dirs[:] = [] if depth >= SKILL_RESOURCE_DEPTH else [
            d for d in sorted(dirs) if d not in _SKIPPED_FOLDERS
        ]  # fmt: skip
        for name in files:
            relative = os.path.relpath(os.path.join(root, name), folder)
            if relative == SKILL_FILE:
                continue
            if len(found) < MAX_SKILL_RESOURCES:
                found.append(relative)
            else:
                more += 1
    return tuple(sorted(found)), more


# --- the text an agent gets ------------------------------------------------------------------


def compose_system_prompt(role: str, inline: str | None) -> str | None:
    """The role's text, then a blank line, then the step's own `system_prompt`."""
    if not role:
        return inline
    return f"{role}\n\n{inline}" if inline else role


def format_skill(skill: Skill) -> str:
    """One skill as AWF injects it: a `<skill_content>` block."""
    lines = [
        f'<skill_content name="{skill.name}">',
        skill.content,
        "",
        f"Skill directory: {skill.location}",
        "Relative paths in this skill are relative to the skill directory.",
    ]
    if skill.resources:
        lines += ["", "<skill_resources>"]
        lines += [f"<file>{resource}</file>" for resource in skill.resources]
        if skill.resources_left_out:
            lines.append(f"<!-- and {skill.resources_left_out} more files -->")
        lines.append("</skill_resources>")
    lines.append("</skill_content>")
    return "\n".join(lines)


def with_skills(prompt: str, skills: Iterable[Skill]) -> str:
    """The prompt preceded by each skill's block, in the order declared."""
    blocks = [format_skill(skill) for skill in skills]
    return "\n\n".join([*blocks, prompt]) if blocks else prompt


def role_warnings(role: Role, system_prompt: str | None) -> list[str]:
    """AWF's one warning about a role's size or emptiness (or none)."""
    if not role.content.strip():
        return [f'role "{role.name}" has empty {ROLE_FILE} body']
    if role.raw_size > ROLE_SIZE_WARN_BYTES:
        limit = ROLE_SIZE_WARN_BYTES // 1024
        return [f'role "{role.name}": {ROLE_FILE} exceeds {limit}KB size threshold']
    combined = len(role.content.encode()) + len((system_prompt or "").encode())
    if combined > COMBINED_PROMPT_WARN_BYTES:
        limit = COMBINED_PROMPT_WARN_BYTES // 1024
        return [
            f'role "{role.name}": combined role content and system_prompt exceeds '
            f"{limit}KB threshold"
        ]
    return []


def skill_warnings(skill: Skill) -> list[str]:
    if not skill.content.strip():
        return [f'skill "{skill.name}" has empty content']
    if skill.raw_size > SKILL_SIZE_WARN_BYTES:
        limit = SKILL_SIZE_WARN_BYTES // 1024
        return [f'skill "{skill.name}": {SKILL_FILE} exceeds {limit}KB, may impact context window']
    if skill.resources_left_out:
        return [
            f'skill "{skill.name}": only the first {MAX_SKILL_RESOURCES} bundled files are '
            f"listed ({skill.resources_left_out} more left out)"
        ]
    return []


# --- awf validate ------------------------------------------------------------------------------


def agent_file_problems(
    workflow: Workflow, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> list[Problem]:
    """Every role and skill the workflow names, checked as `awf validate` checks them: a
    missing one (or one without its AGENTS.md / SKILL.md, or with `..`) is an error, an
    empty or oversized one a warning. A role given as a template is checked when it runs."""
    from awf_nb.workflow.checks import join_path, locate
    from awf_nb.workflow.model import AgentStep

    lookup = Lookup(
        (cwd or Path.cwd()).absolute(),
        dict(os.environ) if env is None else env,
        workflow.base_dir,
    )
    file = str(workflow.source_path or "")
    problems: list[Problem] = []

    def report(message: str, path: str, severity: str = "error") -> None:
        line, column = locate(workflow.locations, path)
        problems.append(
            Problem(message, path=path, file=file, line=line, column=column, severity=severity)  # type: ignore[arg-type]
        )

    for name, step in workflow.steps.items():
        if not isinstance(step, AgentStep):
            continue
        base = join_path("states", name)
        partner = step.conversation.partner if step.conversation else None
        roles: list[tuple[str | None, str | None, str]] = [
            (step.role, step.system_prompt, join_path(base, "role"))
        ]
        if partner is not None:
            where = join_path(base, "conversation.with.role")
            roles.append((partner.role, partner.system_prompt, where))
        for ref, system_prompt, path in roles:
            if not ref or "{{" in ref:
                continue
            try:
                role = resolve_role(ref, lookup)
            except AgentFileError as exc:
                report(exc.message, path)
                continue
            for warning in role_warnings(role, system_prompt):
                report(warning, path, "warning")
        for i, skill_ref in enumerate(step.skills or []):
            path = join_path(join_path(base, "skills"), i)
            try:
                skill = resolve_skill(skill_ref, lookup)
            except AgentFileError as exc:
                report(exc.message, path)
                continue
            for warning in skill_warnings(skill):
                report(warning, path, "warning")
    return problems
