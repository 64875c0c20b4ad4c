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

A role or skill is text given to the model, so where its files may be is confined, as the
built-in file tools are (a cloned repository could otherwise ship `.awf/roles/x/AGENTS.md`
as a link to `/proc/self/environ` or a key, and have it sent as the system prompt): the
AGENTS.md / SKILL.md and the skill's folder must resolve (symlinks followed) inside the run's
working directory, the workflow file's folder, or one of the folders named above outside
them (the config and home folders, `$AWF_ROLES_PATH` / `$AWF_SKILLS_PATH`). A link that
leads elsewhere is refused, `/proc` and `/sys` always, and only a regular file is read. A
link from the project cannot widen this: a listed folder inside the project adds nothing
beyond the project.

Reading is bounded: a file over 1 MiB is refused (AWF only warns past 500 KB, as we do
too), and a skill lists at most `MAX_SKILL_RESOURCES` bundled files, four folders deep; its
folder's walk stops there, or after `MAX_SKILL_ENTRIES` entries of any kind. A file name
that does not print (a newline, a control) is listed escaped (`safe_text.escape_name`).
Only reading files happens here (the workflow package does no other I/O).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.errors import Problem
from awf_nb.safe_text import escape_name
from awf_nb.workflow.files import (
    MAX_FILE_BYTES,
    FileTooLarge,
    fd_path,
    open_regular,
    read_text_from,
)

if TYPE_CHECKING:
    from awf_nb.workflow.model import AgentStep, SkillPath, Workflow

# AWF's thresholds (warnings only, as in AWF).
ROLE_SIZE_WARN_BYTES = 500 * 1024
SKILL_SIZE_WARN_BYTES = 500 * 1024
COMBINED_PROMPT_WARN_BYTES = 10 * 1024
# Ours: what one role or skill file may hold at all, and how many bundled files a skill
# lists (AWF has neither bound; a skill folder holding a repository would flood the prompt).
MAX_AGENT_FILE_BYTES = MAX_FILE_BYTES
MAX_SKILL_RESOURCES = 1000
# How many entries (files, folders, skipped ones) the walk of a skill's folder looks at, at
# most: a folder of many empty subfolders is cut too.
MAX_SKILL_ENTRIES = 10 * MAX_SKILL_RESOURCES
SKILL_RESOURCE_DEPTH = 4  # folders below the skill's own, as AWF walks them
_SKIPPED_FOLDERS = frozenset({".git", "node_modules"})
# Never read as a role or skill, wherever the project is: the kernel's views of processes
# (their environment, memory) and devices.
_PSEUDO_FOLDERS = ("/proc", "/sys")

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
        local = [self.cwd / ".awf" / kind, self.cwd / ".agents" / kind]
        if kind == "skills":
            local.append(self.cwd / ".claude" / "skills")
        return local + self._shared(kind)

    def allowed(self, kind: Literal["roles", "skills"]) -> tuple[str, ...]:
        """The real folders a role's or skill's files may be in: the run's working
        directory, the workflow file's folder, and the search folders outside them."""
        project = [os.path.realpath(self.cwd), os.path.realpath(self.workflow_dir)]
        folders = [*self.search_path(kind), *self._shared(kind)]
        found = list(project)
        for folder in folders:
            # One inside the project adds nothing: a link the project ships (`.awf/roles`
            # -> `/`) must not widen what may be read.
            plain = os.path.normpath(self.cwd / folder)
            if not any(_inside(plain, root) for root in (str(self.cwd), *project)):
                found.append(os.path.realpath(plain))
        return tuple(dict.fromkeys(found))

    def _shared(self, kind: Literal["roles", "skills"]) -> list[Path]:
        home = self.home()
        shared = [self.config_dir() / kind, home / ".agents" / kind]
        if kind == "skills":
            shared.append(home / ".claude" / "skills")
        return shared

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
    resources_cut: bool = False  # the walk stopped at a bound: the folder holds more
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
            if _present(folder / ref / ROLE_FILE):
                return _read_role(folder / ref, lookup)
        if any((folder / ref).is_dir() for folder in lookup.search_path("roles")):
            raise AgentFileError(f'role "{ref}" has no {ROLE_FILE}', kind="missing_file")
        searched = ", ".join(str(p) for p in lookup.search_path("roles"))
        raise AgentFileError(f'resolve role "{ref}": not found (searched: {searched})')
    path = lookup.path_ref(ref)
    folder = path.parent if path.name == ROLE_FILE else path
    if _present(folder / ROLE_FILE):
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
        if _present(folder / SKILL_FILE):
            return _read_skill(folder, lookup)
    name = folders[0].name if folders else str(ref)
    if any(folder.is_dir() for folder in folders):
        raise AgentFileError(f'skill "{name}" has no {SKILL_FILE}', kind="missing_file")
    shown = [folder.parent if isinstance(ref, str) else folder for folder in folders]
    searched = ", ".join(str(folder) for folder in shown)
    raise AgentFileError(f'skill "{name}" not found in search paths: {searched}')


def _present(path: Path) -> bool:
    """Whether there is a file at `path` to read (a FIFO or a device too: the reader
    refuses it, saying why, rather than the search going on past it)."""
    return path.exists() and not path.is_dir()


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


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(os.path.join(root, ""))


def _confine(path: Path, real: str, allowed: tuple[str, ...], kind: str) -> None:
    """`AgentFileError` unless the real path `real` (of `path`) may be read as a role's or
    a skill's."""
    if any(_inside(real, pseudo) for pseudo in _PSEUDO_FOLDERS):
        raise AgentFileError(
            f"{path} leads to {real}: files under /proc and /sys are never read as a {kind[:-1]}",
            kind="outside",
        )
    if not any(_inside(real, root) for root in allowed):
        variable = "AWF_ROLES_PATH" if kind == "roles" else "AWF_SKILLS_PATH"
        shown = f"{path} (a link to {real})" if str(path) != real else str(path)
        noun = kind[:-1]
        raise AgentFileError(
            f"{shown} is outside the project and the {noun} folders, so it is not read: keep "
            f"{kind} in the project or a {noun} folder (~/.config/awf/{kind}, "
            f"~/.agents/{kind}, ${variable})",
            kind="outside",
        )


def _read(path: Path, allowed: tuple[str, ...], kind: str) -> tuple[str, int]:
    """The text of the role's or skill's file `path`, if it is a regular file inside
    `allowed`, and its size. Checked before it is opened, and the file opened is checked
    again (a link swapped in meanwhile, as the file tools check theirs)."""
    real = os.path.realpath(path)
    _confine(path, real, allowed, kind)
    try:
        with open_regular(real) as handle:
            opened = fd_path(handle.fileno())
            if opened is not None:
                _confine(path, opened, allowed, kind)
            size = os.fstat(handle.fileno()).st_size
            return read_text_from(handle, path, MAX_AGENT_FILE_BYTES), size
    except FileTooLarge:
        limit = MAX_AGENT_FILE_BYTES // (1 << 20)
        raise AgentFileError(f"{path} is larger than {limit} MiB", kind="too_large") from None
    except OSError as exc:
        raise AgentFileError(
            f"cannot read {path}: {exc.strerror or exc}", kind="unreadable"
        ) from None


def _read_role(folder: Path, lookup: Lookup) -> Role:
    source = (folder / ROLE_FILE).absolute()
    text, size = _read(source, lookup.allowed("roles"), "roles")
    return Role(folder.name, strip_front_matter(text), source, size)


def _read_skill(folder: Path, lookup: Lookup) -> Skill:
    location = folder.absolute()
    allowed = lookup.allowed("skills")
    # The folder too: its file names are listed to the model.
    _confine(location, os.path.realpath(location), allowed, "skills")
    text, size = _read(location / SKILL_FILE, allowed, "skills")
    resources, cut = bundled_files(location)
    return Skill(folder.name, strip_front_matter(text), location, resources, cut, size)


def bundled_files(folder: Path) -> tuple[tuple[str, ...], bool]:
    """The files in a skill's folder other than SKILL.md, relative and sorted, down to
    `SKILL_RESOURCE_DEPTH` folders (not `.git` nor `node_modules`, nor a linked folder);
    and whether the walk stopped short, at `MAX_SKILL_RESOURCES` files or after
    `MAX_SKILL_ENTRIES` entries, leaving some out. Folders are walked breadth first, each
    in the order the system gives (sorting one would mean reading all of it first)."""
    found: list[str] = []
    visited = 0
    pending = deque([(str(folder), "", 0)])  # path, relative to `folder`, depth
    while pending:
        path, relative, depth = pending.popleft()
        try:
            entries = os.scandir(path)
        except OSError:
            continue  # unreadable: left out, as os.walk leaves it
        with entries:
            subfolders: list[tuple[str, str, int]] = []
            for entry in entries:
                if visited == MAX_SKILL_ENTRIES or len(found) == MAX_SKILL_RESOURCES:
                    return tuple(sorted(found)), True
                visited += 1
                name = os.path.join(relative, entry.name) if relative else entry.name
                try:
                    is_folder = entry.is_dir()
                    linked = is_folder and entry.is_symlink()
                except OSError:
                    continue
                if not is_folder:
                    if name != SKILL_FILE:
                        found.append(name)
                elif (
                    not linked
                    and depth < SKILL_RESOURCE_DEPTH
                    and entry.name not in _SKIPPED_FOLDERS
                ):
                    subfolders.append((entry.path, name, depth + 1))
            pending.extend(sorted(subfolders))
    return tuple(sorted(found)), False


# --- the text an agent gets ------------------------------------------------------------------


def compose_system_prompt(role: str, inline: str | None) -> str | None:
    """The role's text, then a blank line, then the step's own `system_prompt`."""
    if not role:
        return inline
    return f"{role}\n\n{inline}" if inline else role


def format_skill(skill: Skill) -> str:
    """One skill as AWF injects it: a `<skill_content>` block. A name that does not print
    (a newline would make a line of its own) or holds `<` or `>` (which could close the
    block) is written escaped, and marked so."""
    lines = [
        f'<skill_content name="{_escaped(skill.name, attribute=True)[0]}">',
        skill.content,
        "",
        f"Skill directory: {_escaped(str(skill.location))[0]}",
        "Relative paths in this skill are relative to the skill directory.",
    ]
    if skill.resources:
        lines += ["", "<skill_resources>"]
        for resource in skill.resources:
            shown, escaped = _escaped(resource)
            mark = ' escaped="true"' if escaped else ""
            lines.append(f"<file{mark}>{shown}</file>")
        if skill.resources_cut:
            lines.append(
                f"<!-- the listing stops at {len(skill.resources)} files: the folder holds more -->"
            )
        lines.append("</skill_resources>")
    lines.append("</skill_content>")
    return "\n".join(lines)


def _escaped(name: str, *, attribute: bool = False) -> tuple[str, bool]:
    shown, escaped = escape_name(name)
    if "<" in shown or ">" in shown or (attribute and '"' in shown):
        shown = shown.replace("<", "\\x3c").replace(">", "\\x3e")
        shown = shown.replace('"', "\\x22") if attribute else shown
        escaped = True
    return shown, escaped


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
    if skill.resources_cut:
        return [
            f'skill "{skill.name}": the folder holds more files than are listed (at most '
            f"{MAX_SKILL_RESOURCES} files, {MAX_SKILL_ENTRIES} entries looked at)"
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

    named = [
        _named_by(join_path("states", name), step)
        for name, step in workflow.steps.items()
        if isinstance(step, AgentStep)
    ]
    named += [
        _named_by_text(join_path("states", n), raw) for n, raw in workflow.unread_steps.items()
    ]
    for base, roles, skills in named:
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
        for i, skill_ref in skills:
            path = join_path(join_path(base, "skills"), i)
            try:
                skill = resolve_skill(skill_ref, lookup)
            except AgentFileError as exc:
                report(exc.message, path)
                continue
            for warning in skill_warnings(skill):
                report(warning, path, "warning")
    return problems


# (the step's YAML path, its roles: (reference, system prompt, YAML path), its skills by index)
_Named = tuple[str, list[tuple[str | None, str | None, str]], list[tuple[int, "str | SkillPath"]]]


def _named_by(base: str, step: AgentStep) -> _Named:
    """The roles and skills an agent step names."""
    from awf_nb.workflow.checks import join_path

    partner = step.conversation.partner if step.conversation else None
    roles: list[tuple[str | None, str | None, str]] = [
        (step.role, step.system_prompt, join_path(base, "role"))
    ]
    if partner is not None:
        where = join_path(base, "conversation.with.role")
        roles.append((partner.role, partner.system_prompt, where))
    return base, roles, list(enumerate(step.skills or []))


def _named_by_text(base: str, raw: dict[str, Any]) -> _Named:
    """The roles and skills an agent step names, read from the step as written, when some
    of its fields could not be read (their problems are reported by the loader): what is
    readable is checked, an unreadable entry skipped, each at its own index."""
    from awf_nb.workflow.checks import join_path
    from awf_nb.workflow.model import skill_ref

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None

    roles = [(text(raw.get("role")), text(raw.get("system_prompt")), join_path(base, "role"))]
    conversation = raw.get("conversation")
    partner = conversation.get("with") if isinstance(conversation, dict) else None
    if isinstance(partner, dict):
        where = join_path(base, "conversation.with.role")
        roles.append((text(partner.get("role")), text(partner.get("system_prompt")), where))
    skills: list[tuple[int, str | SkillPath]] = []
    listed = raw.get("skills")
    for index, item in enumerate(listed if isinstance(listed, list) else []):
        try:
            skills.append((index, skill_ref(item)))
        except ValueError:
            continue
    return base, roles, skills
