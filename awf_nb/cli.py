"""The `awf` command line (spec §9): argparse, one small function per command.

Each command is registered with `@command(...)`, which adds its sub-parser and handler to
`COMMANDS`; `build_parser` turns the registry into the argument parser. Handlers return the
process exit code; `main` turns every `AwfError` into its message and exit code (1 user
error, 2 definition error, 3 execution error, 4 system error) and never shows a traceback
unless `--debug` is given. Heavy modules (pydantic, the loader) are imported inside the
handlers so `awf --version` and `awf --help` stay instant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from awf_nb import __version__
from awf_nb.errors import (
    EXIT_CANCELLED,
    EXIT_EXECUTION,
    EXIT_SYSTEM,
    EXIT_USER,
    AwfError,
    Problem,
    UserError,
)

if TYPE_CHECKING:
    from awf_nb.workflow.loader import WorkflowInfo

__all__ = ["COMMANDS", "Command", "build_parser", "command", "main"]

Handler = Callable[[argparse.Namespace], int]
Configure = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """One sub-command: its name, one-line help, how to add its arguments, what runs it."""

    name: str
    help: str
    configure: Configure
    handler: Handler
    description: str = ""


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, configure: Configure | None = None
) -> Callable[[Handler], Handler]:
    """Register a handler as `awf NAME`; `configure` adds its arguments to its sub-parser."""

    def register(handler: Handler) -> Handler:
        COMMANDS[name] = Command(
            name,
            help,
            configure or (lambda parser: None),
            handler,
            description=(handler.__doc__ or help).strip(),
        )
        return handler

    return register


class _UsageError(Exception):
    """A bad command line: argparse's message, shown with the usage of the command."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    # argparse exits with status 2 on a bad command line, which in awf means "invalid
    # workflow"; a bad command line is a user error (1), so raise and let main decide.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    """The `awf` argument parser, with one sub-parser per registered command."""
    parser = _Parser(
        prog="awf",
        description="Run AWF agent workflows: YAML state machines of shell and LLM steps.",
    )
    parser.add_argument("--version", action="version", version=f"awf-nb {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for cmd in COMMANDS.values():
        sub_parser = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # Accept --debug after the command too (`awf validate x --debug`); SUPPRESS keeps
        # the sub-parser from resetting a --debug given before the command.
        sub_parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        cmd.configure(sub_parser)
        sub_parser.set_defaults(handler=cmd.handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `awf` with `argv` (default: the process arguments); return the exit code."""
    _tolerant_streams()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USER
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USER
    return _run(handler, args)


def _tolerant_streams() -> None:
    """Bytes that are not UTF-8 on stdin, and text that cannot be encoded on the way out,
    must never crash a run (and leave it marked running): stdin keeps such bytes as
    surrogate escapes (readers turn them into U+FFFD), stdout/stderr replace what they
    cannot write."""
    for stream, errors in ((sys.stdin, "surrogateescape"), (sys.stdout, "replace"),
                           (sys.stderr, "replace")):  # fmt: skip
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors=errors)


def _utf8(text: str) -> str:
    """argv text whose bytes were not UTF-8 (surrogate escapes), with U+FFFD for them."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _run(handler: Handler, args: argparse.Namespace) -> int:
    debug = bool(getattr(args, "debug", False))
    try:
        return handler(args)
    except AwfError as err:
        if debug:
            traceback.print_exc()
        print(str(err), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_CANCELLED
    except BrokenPipeError:
        # `awf list | head`: the reader left; say nothing more and exit quietly.
        _silence_stdout()
        return 0
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if not debug:
            print("rerun with --debug to see the traceback, and report it", file=sys.stderr)
        return EXIT_SYSTEM


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


# --- awf validate --------------------------------------------------------------------------


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
    from awf_nb.providers import provider_problems
    from awf_nb.workflow.loader import load_workflow
    from awf_nb.workflow.roles_skills import agent_file_problems

    result = _Validation(workflow)
    from awf_nb.frontends.eval_commands import validate_eval_file

    if (checked := validate_eval_file(workflow, strict=strict)) is not None:  # an eval file
        result.path, result.problems, result.exit_code = checked
        return result
    try:
        loaded = load_workflow(workflow)
        result.path = _relative(loaded.source_path) if loaded.source_path else None
        found = [*loaded.warnings, *provider_problems(loaded), *agent_file_problems(loaded)]
        problems = sorted(found, key=lambda p: (p.line, p.column))
    except DefinitionError as err:
        problems = err.problems
        result.path = problems[0].file if problems else None
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
        rows.append((info.name, info.version or "", _one_line(description), _relative(info.path)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        print("  ".join([*cells, row[3]]), file=out)


def _one_line(text: str, limit: int = 60) -> str:
    from awf_nb.frontends.terminal_text import terminal_safe

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


# --- awf run / resume / status / history ---------------------------------------------------


def configure_run_io(parser: argparse.ArgumentParser) -> None:
    """The flags `awf run` and `awf resume` share."""
    parser.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a workflow input (repeatable); NAME=@path reads the value from a file",
    )
    parser.add_argument(
        "--reply",
        action="append",
        metavar="TEXT",
        help="answer the next conversation turn with TEXT instead of reading stdin "
        '(repeatable; --reply "" ends the conversation)',
    )
    parser.add_argument(
        "--output",
        choices=["streaming", "buffered", "silent"],
        default=None,
        help="show agent replies as they arrive (default), when complete, or not at all",
    )
    parser.add_argument(
        "--simulate-user",
        metavar="TEXT|@FILE",
        help="an agent plays the person in every conversation; TEXT (or the file) is who it "
        "is and what it wants",
    )
    parser.add_argument(
        "--user-provider",
        metavar="NAME",
        help="the provider of the simulated user (default: local)",
    )
    parser.add_argument(
        "--max-turns",
        type=int,
        metavar="N",
        help="replies per conversation with the simulated user (default 5)",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="run tool calls that ask for confirmation (tools.confirm) without asking",
    )
    parser.add_argument(
        "--model",
        metavar="SPEC",
        help="run `provider: local` steps on this model instead of the bundled one: "
        "ollama:NAME, openai:NAME, NAME@URL, a .gguf file or an agent CLI "
        "(default: $AWF_MODEL)",
    )
    parser.add_argument("--json", action="store_true", help="print the final run state as JSON")
    _configure_storage(parser)
    configure_cassette(parser)


def configure_cassette(parser: argparse.ArgumentParser) -> None:
    """--record / --replay (one or the other) and --replay-speed."""
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument(
        "--record",
        metavar="PATH",
        help="write every agent reply and conversation message to the cassette PATH",
    )
    cassette.add_argument(
        "--replay",
        metavar="PATH",
        help="answer agent turns and conversation messages from the cassette PATH "
        "(no provider is called)",
    )
    parser.add_argument(
        "--replay-speed",
        type=_replay_speed,
        metavar="X",
        help="with --replay: 0 replays at once (default), 1 at the recorded pace; "
        "X multiplies the recorded delays",
    )


def _replay_speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (got {text})")
    return value


def run_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `prepare_run` / `prepare_resume` that `configure_run_io`'s
    flags set: the simulated user, the cassette, `--yes`."""
    if args.replay_speed is not None and args.replay is None:
        raise UserError("--replay-speed only applies with --replay PATH")
    return {
        "user": simulated_user_flags(args),
        "record": args.record,
        "replay": args.replay,
        "replay_speed": args.replay_speed or 0.0,
        "yes": args.yes,
        "model": args.model,
    }


def simulated_user_flags(args: argparse.Namespace) -> Any:
    """The `SimulatedUser` the flags ask for, or None."""
    from awf_nb.api import simulated_user

    persona = args.simulate_user
    return simulated_user(
        None if persona is None else _utf8(persona),
        provider=args.user_provider,
        max_turns=args.max_turns,
    )


def _configure_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="DIR", help="where runs are stored")


def configure_dry_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resolved plan; run nothing"
    )


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workflow", metavar="WORKFLOW", help="file path or workflow name")
    configure_run_io(parser)
    configure_dry_run(parser)


def _show_in_terminal(runner: Any, args: argparse.Namespace) -> Any:
    """Connect the run to this terminal; returns its `TerminalSink`."""
    from awf_nb.api import use_cassette_input
    from awf_nb.frontends.connect import connect
    from awf_nb.frontends.terminal import TerminalSink

    replies = None
    if args.reply is not None:  # argv bytes that are not UTF-8 are shown as U+FFFD
        replies = [_utf8(reply) for reply in args.reply]
    output = args.output or ("silent" if args.json else "streaming")
    sink = connect(runner, "terminal", replies=replies, output=output)
    use_cassette_input(runner)
    if args.replay is not None and isinstance(sink, TerminalSink):
        # Replayed messages were typed by nobody at this terminal: show them like --reply.
        sink.echo_input = True
    return sink


def _ask_on_tty(spec: Any) -> str | None:
    """Ask for a missing required input, only when a person is at the terminal."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    hint = f" ({spec.description})" if spec.description else ""
    try:
        sys.stderr.write(f"{spec.name}{hint}: ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
    except (OSError, KeyboardInterrupt):
        return None
    return answer.rstrip("\n") if answer else None


def _run_outcome(state: Any, args: argparse.Namespace) -> int:
    if args.json:
        print(state.to_json())
    if state.status == "completed":
        return 0
    if state.status == "cancelled":
        print(
            f"run {state.run_id} cancelled; continue it with: awf resume {state.run_id}",
            file=sys.stderr,
        )
        return EXIT_CANCELLED
    print(f"error: {state.error}", file=sys.stderr)
    print(f"run {state.run_id} failed; retry with: awf resume {state.run_id}", file=sys.stderr)
    return state.exit_code or EXIT_EXECUTION


@command("run", "run a workflow", _configure_run)
def cmd_run(args: argparse.Namespace) -> int:
    """Run a workflow. Agent replies stream to stdout, progress goes to stderr.

    In a conversation, type at the `> ` prompt; an empty line, `exit` or `quit` ends it.
    Ctrl-C interrupts a streaming reply; at the prompt (or twice) it cancels the run.
    """
    from pathlib import Path

    from awf_nb.api import prepare_run
    from awf_nb.engine.inputs import parse_input_args
    from awf_nb.engine.plan import describe_plan
    from awf_nb.frontends.terminal import run_in_terminal
    from awf_nb.store import Store
    from awf_nb.workflow.loader import load_workflow

    workflow = load_workflow(args.workflow)
    given = parse_input_args(args.input, cwd=Path.cwd())
    if args.dry_run:
        print(describe_plan(workflow, given, user=simulated_user_flags(args)))
        return 0
    runner = prepare_run(
        workflow,
        given,
        store=Store(args.storage),
        ask=_ask_on_tty,
        **run_flags(args),
    )
    sink = _show_in_terminal(runner, args)
    return _run_outcome(run_in_terminal(runner, sink), args)


def _configure_resume(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run (a unique prefix is enough)")
    parser.add_argument(
        "--from", dest="from_step", metavar="STEP", help="start at this step instead"
    )
    configure_run_io(parser)


@command("resume", "continue a failed, cancelled or interrupted run", _configure_resume)
def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a run from the step it stopped at (or --from STEP), with the recorded
    outputs of the steps before it. An interrupted conversation re-opens with its turns."""
    from pathlib import Path

    from awf_nb.api import prepare_resume
    from awf_nb.engine.inputs import parse_input_args
    from awf_nb.frontends.terminal import run_in_terminal
    from awf_nb.store import Store

    runner = prepare_resume(
        args.run_id,
        store=Store(args.storage),
        from_step=args.from_step,
        inputs=parse_input_args(args.input, cwd=Path.cwd()),
        **run_flags(args),
    )
    sink = _show_in_terminal(runner, args)
    return _run_outcome(run_in_terminal(runner, sink), args)


def _configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run (a unique prefix is enough)")
    parser.add_argument("--json", action="store_true", help="print the state file as JSON")
    _configure_storage(parser)


@command("status", "show a run: status, steps, outputs, conversations", _configure_status)
def cmd_status(args: argparse.Namespace) -> int:
    from awf_nb.frontends.terminal_text import describe_state
    from awf_nb.store import Store

    store = Store(args.storage)
    state = store.load_state(args.run_id)
    if args.json:
        from awf_nb.api import status_json

        print(status_json(state, store))
    else:
        print(describe_state(state))
    return 0


def _configure_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-w", "--workflow", metavar="NAME", help="only runs of this workflow")
    parser.add_argument("-s", "--status", metavar="STATUS", help="only runs with this status")
    parser.add_argument("-n", type=int, default=20, metavar="N", help="how many (default 20)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    _configure_storage(parser)


@command("history", "list recent runs", _configure_history)
def cmd_history(args: argparse.Namespace) -> int:
    from awf_nb.engine.summary import format_duration
    from awf_nb.store import Store

    entries = Store(args.storage).history(workflow=args.workflow, status=args.status, limit=args.n)
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))
        return 0
    if not entries:
        print("no runs yet", file=sys.stderr)
        return 0
    print(
        f"{'RUN ID':<23}  {'WORKFLOW':<20}  {'STATUS':<9}  {'STARTED (UTC)':<19}  "
        f"{'TIME':>10}  {'TOKENS':>6}"
    )
    for entry in entries:
        started = entry.started_at.strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{entry.run_id:<23}  {_one_line(entry.workflow, 20):<20}  {entry.status:<9}  "
            f"{started:<19}  {format_duration(entry.duration):>10}  {entry.tokens:>6}"
        )
    return 0


# --- awf mcp-serve -------------------------------------------------------------------------


def _configure_mcp_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="JSON file: the tools to serve")
    parser.add_argument(
        "--builtin",
        metavar="NAMES",
        help="built-in tools to serve, comma-separated (Read,Write,Edit,Bash,Glob,Grep) or all",
    )
    parser.add_argument(
        "--dir", metavar="DIR", help="working directory of the tools (default: root_dir, or .)"
    )
    parser.add_argument(
        "--yes", action="store_true", help="allow the tools listed in confirm (no one is asked)"
    )


@command(
    "mcp-serve", "serve awf's tools to an agent as an MCP server on stdio", _configure_mcp_serve
)
def cmd_mcp_serve(args: argparse.Namespace) -> int:
    """Serve awf's tools to an agent as an MCP server (stdio), for AWF's mcp_proxy.

    The built-ins (Read, Write, Edit, Bash, Glob, Grep) work inside the working directory
    only. --config FILE is a JSON object with the keys of a step's `tools:` block —
    builtin, commands, mcp (servers to proxy; their tools are named <server>_<tool>),
    confirm — plus root_dir (working directory) and env (extra variables for commands):

      {"root_dir": "/work/project", "builtin": ["Read", "Grep"],
       "commands": [{"name": "run_tests", "description": "Run the tests",
                     "parameters": {"path": {"type": "string"}},
                     "command": "pytest -q \\"$path\\""}]}

    AWF's intercept_builtins: true serves all six built-ins. Tools in confirm are refused
    unless --yes is given. Stop the server by closing its stdin or with SIGTERM.
    """
    from awf_nb.tools.serve import load_serve_config, run_server

    config = load_serve_config(args.config, builtin=args.builtin, root_dir=args.dir)
    return run_server(config, yes=args.yes)


# --- awf eval / evals / eval-show: awf_nb/frontends/eval_commands.py -----------------------


def _register_eval_commands() -> None:
    from awf_nb.frontends.eval_commands import register

    register(command)


_register_eval_commands()


def entry() -> NoReturn:
    """The `awf` program: run `main` and exit with its code.

    The first Ctrl-C outside a run (where the terminal frontend handles it the chat way)
    stops the command with code 130; later presses, from a key held down while the
    command is already stopping, are ignored instead of killing it by SIGINT.
    """
    import signal

    def first_press_only(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first_press_only)
    try:
        code = main()
        # Python's finalization puts SIGINT back to the system default (death) unless it
        # is ignored; the work is done, so it is ignored from here.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # first_press_only already ignores the presses after it
        code = EXIT_CANCELLED
    sys.exit(code)


if __name__ == "__main__":
    entry()
