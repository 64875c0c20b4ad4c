"""The commands about workflow files: `awf validate`, `awf list`, `awf schema`, `awf diagram`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO

from awf_nb.errors import Problem, UserError
from awf_nb.frontends.commands.table import command

if TYPE_CHECKING:
    from awf_nb.workflow.loader import WorkflowInfo


@dataclass
class _Validation:
    """The outcome of validating one workflow argument."""

    workflow: str
    path: str | None = None
    problems: list[Problem] = field(default_factory=list)
    exit_code: int = 0

    @property
    def valid(self) -> bool:
        return not any(p.severity == "error" for p in self.problems) and self.exit_code == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "path": self.path,
            "valid": self.valid,
            "problems": [p.as_dict() for p in self.problems],
        }

    def summary(self) -> str:
        errors = sum(p.severity == "error" for p in self.problems)
        warnings = len(self.problems) - errors
        counts = ", ".join(
            f"{n} {word}{'s' if n != 1 else ''}"
            for n, word in ((errors, "error"), (warnings, "warning"))
            if n
        )
        label = self.path or self.workflow
        return f"{label}: {'valid' if self.valid else 'invalid'}" + (
            f" ({counts})" if counts else ""
        )


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workflows", nargs="+", metavar="WORKFLOW", help="file path or name")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


@command("validate", "check workflow files without running them", _configure_validate)
def cmd_validate(args: argparse.Namespace) -> int:
    """Check workflow files without running them.

    Prints every problem as `file:line:col: severity: path: message`. Exit status: 0 when
    all are valid, 2 when one has errors (warnings too, with --strict), 1 when one is not
    found.
    """
    results = [_validate_one(name, strict=args.strict) for name in args.workflows]
    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        for result in results:
            _print_validation(result, sys.stdout)
    return max(r.exit_code for r in results)


def _validate_one(workflow: str, *, strict: bool) -> _Validation:
    from awf_nb.errors import DefinitionError
    from awf_nb.workflow.loader import load_workflow

    result = _Validation(workflow)
    from awf_nb.frontends.commands.evals import validate_eval_file

    if (checked := validate_eval_file(workflow, strict=strict)) is not None:  # an eval file
        result.path, result.problems, result.exit_code = checked
        return result
    try:
        loaded = load_workflow(workflow)
        result.path = _relative(loaded.source_path) if loaded.source_path else None
        later = _later_problems(loaded, workflow if os.path.isfile(workflow) else result.path)
        problems = sorted([*loaded.warnings, *later], key=lambda p: (p.line, p.column))
    except DefinitionError as err:
        problems = err.problems
        result.path = problems[0].file if problems else None
        if err.partial is not None:  # built, failed its checks: the later checks run too
            later = _later_problems(err.partial, result.path)
            problems = sorted([*problems, *later], key=lambda p: (p.line, p.column))
    except UserError as err:
        result.problems = [Problem(err.message, file=workflow, hint=err.hint)]
        result.exit_code = err.exit_code
        return result
    if strict:
        problems = [replace(p, severity="error") for p in problems]
    result.problems = problems
    if any(p.severity == "error" for p in problems):
        result.exit_code = DefinitionError.exit_code
    return result


def _later_problems(loaded: Any, shown: str | None) -> list[Problem]:
    """The checks after loading (providers, roles and skills), the file named as `shown`
    (as given, like the loader's problems; they name it by its absolute path)."""
    from awf_nb.runs.checks import provider_problems
    from awf_nb.workflow.roles_skills import agent_file_problems

    found = [*provider_problems(loaded), *agent_file_problems(loaded)]
    source = str(loaded.source_path)
    return [replace(p, file=shown) if shown and p.file == source else p for p in found]


def _relative(path: os.PathLike[str]) -> str:
    """A path as the user would type it: relative to the working directory when inside."""
    text = os.fspath(path)
    relative = os.path.relpath(text)
    return text if relative.startswith("..") else relative


def _print_validation(result: _Validation, out: TextIO) -> None:
    for problem in result.problems:
        print(problem, file=out)
    print(result.summary(), file=out)


# --- awf list ------------------------------------------------------------------------------


def _configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the list as JSON")


@command("list", "list the workflows found on the search path", _configure_list)
def cmd_list(args: argparse.Namespace) -> int:
    """List the workflows found on the search path.

    Searched in order: $AWF_WORKFLOWS_PATH (colon-separated), ./.awf/workflows,
    ./workflows, $XDG_CONFIG_HOME/awf/workflows. A name found twice is listed once, from
    the first folder (the one `awf run NAME` would use).
    """
    from awf_nb.workflow.loader import list_workflows, search_path

    infos = list_workflows()
    if args.json:
        print(json.dumps([info.as_dict() for info in infos], indent=2))
        return 0
    if not infos:
        searched = ", ".join(str(d) for d in search_path())
        print(f"no workflows found (searched: {searched})", file=sys.stderr)
        return 0
    _print_table(infos, sys.stdout)
    return 0


def _print_table(infos: list[WorkflowInfo], out: TextIO) -> None:
    rows = [("NAME", "VERSION", "DESCRIPTION", "PATH")]
    for info in infos:
        description = info.description if info.valid else f"INVALID: {info.error}"
        rows.append((info.name, info.version or "", one_line(description), _relative(info.path)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        print("  ".join([*cells, row[3]]), file=out)


def one_line(text: str, limit: int = 60) -> str:
    from awf_nb.frontends.terminal.text import terminal_safe

    flat = " ".join(terminal_safe(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# --- awf schema ----------------------------------------------------------------------------


@command("schema", "print the JSON Schema of the workflow language (for editors)")
def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of workflow files.

    Point your editor's YAML language server at it, e.g. with a first line
    `# yaml-language-server: $schema=./awf-workflow.schema.json` after
    `awf schema > awf-workflow.schema.json`.
    """
    from awf_nb.workflow.loader import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


# --- awf diagram ---------------------------------------------------------------------------


def _configure_diagram(parser: argparse.ArgumentParser) -> None:
    from awf_nb.diagram import DIRECTIONS, FORMATS

    parser.add_argument("workflow", metavar="WORKFLOW", help="file path or name")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (its extension picks the format)"
    )
    parser.add_argument(
        "--format", choices=FORMATS, help="dot (default), mermaid, or svg/png/pdf via Graphviz"
    )
    parser.add_argument(
        "--direction", default="TB", type=str.upper, choices=DIRECTIONS, help="layout direction"
    )
    parser.add_argument(
        "--highlight", nargs="+", default=[], metavar="STEP", help="mark these steps"
    )


@command("diagram", "draw a workflow as a Graphviz or Mermaid diagram", _configure_diagram)
def cmd_diagram(args: argparse.Namespace) -> int:
    """Draw a workflow: every step by its kind, every route labelled.

    Writes Graphviz DOT by default, or Mermaid (`--format mermaid`, which GitHub, GitLab and
    JupyterLab render themselves). svg, png and pdf are drawn by Graphviz's `dot` program
    (apt-get install graphviz). With -o FILE the format follows FILE's extension
    (.dot/.gv, .mmd/.mermaid, .svg, .png, .pdf) unless --format is given.
    """
    from awf_nb.diagram import diagram
    from awf_nb.workflow.loader import load_workflow

    format_ = args.format or _format_from_path(args.output) or "dot"
    drawing = diagram(
        load_workflow(args.workflow),
        format=format_,
        direction=args.direction,
        highlight=args.highlight,
    )
    data = drawing.encode() if isinstance(drawing, str) else drawing
    if args.output:
        try:
            with open(args.output, "wb") as out:
                out.write(data)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        print(f"wrote {args.output} ({format_})", file=sys.stderr)
    elif isinstance(drawing, bytes) and sys.stdout.isatty():
        raise UserError(f"{format_} is binary: write it to a file with -o FILE.{format_}")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


_DIAGRAM_EXTENSIONS = {
    ".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid",
    ".svg": "svg", ".png": "png", ".pdf": "pdf",
}  # fmt: skip


def _format_from_path(path: str | None) -> str | None:
    if not path:
        return None
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in _DIAGRAM_EXTENSIONS:
        known = ", ".join(_DIAGRAM_EXTENSIONS)
        raise UserError(f"cannot tell the format of {path}: use --format, or one of {known}")
    return _DIAGRAM_EXTENSIONS[suffix]
