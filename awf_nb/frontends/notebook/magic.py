"""The `%%awf` cell magic and `%awf` line magic: run workflows in a notebook.

    %load_ext awf_nb

    %%awf -i topic="Go channels" --out chat
    name: clarify
    ...

`%%awf [WORKFLOW_NAME] [flags]` runs the YAML in the cell body; `%awf run NAME_OR_FILE`,
`%awf resume RUN_ID`, `%awf validate FILE…`, `%awf list`, `%awf history`, `%awf status RUN_ID`
mirror the CLI. Flags: `-i/--input k=v` (repeatable; `{name}` in a value — and in a RUN_ID —
is replaced by the Python variable `name`), `--reply TEXT` (repeatable: answers conversation
turns, headless), `--out NAME` (bind the run handle, default `_awf`), `--storage DIR`,
`--dry-run`, `--no-interactive`, `--wait`/`--no-wait`.

Run modes (spec/notebook.md, measured on real kernels). Magics cannot be async, so an input
transformer rewrites a `%%awf` cell (and a cell that is a single `%awf run|resume` line)
into `await …run_cell(line, body)`: the cell then awaits the run on the kernel's loop.
`choose_run_mode` decides whether that coroutine waits for the run to end ("await": the run
needs no input, or the kernel is ipykernel >= 7.4 where widget events reach an awaiting
cell) or starts it as a task and returns ("background": older kernels would deadlock
waiting for a click); the handle is bound either way. Headless runs (`--no-interactive`,
`AWF_NO_INTERACTIVE=1`) have no input: a conversation ends as if input ended.

In a kernel the run is drawn by the widget panel (`panel.py`) and reads messages from it
(`reader.py`); in a terminal IPython it prints like `awf run` and reads stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import keyword
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import MagicArgumentParser

from awf_nb.errors import AwfError

if TYPE_CHECKING:
    from awf_nb.api import RunResult
    from awf_nb.engine.run import Runner
    from awf_nb.engine.state import RunState
    from awf_nb.engine.summary import RunSummary
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.workflow.model import Workflow

__all__ = [
    "AwfCellError",
    "AwfMagics",
    "RunHandle",
    "choose_run_mode",
    "load_ipython_extension",
    "run_cell",
    "run_line",
    "unload_ipython_extension",
    "workflow_needs_input",
]

RunMode = Literal["await", "background"]
DEFAULT_HANDLE = "_awf"
AWAIT_WIDGETS_SINCE = (7, 4)  # ipykernel versions whose awaiting cells receive widget events
CANCEL_GRACE_SECONDS = 5.0  # how long an interrupted cell waits for the cancelled run
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_ENTRY = '__import__("awf_nb.frontends.notebook.magic", fromlist=["run_cell"])'
_CELL_MAGIC = re.compile(r"^%%awf(?:[ \t]|$)")
_RUN_LINE = re.compile(r"^%awf[ \t]+(?:run|resume)(?:[ \t]|$)")
_BRACED_NAME = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}(?!\})")
_YAML_NAME = re.compile(r"^name[ \t]*:[ \t]*(.*?)[ \t]*$", re.MULTILINE)

# Background runs: the event loop keeps only weak references to tasks.
_RUNNING: set[asyncio.Task[Any]] = set()


# --- errors --------------------------------------------------------------------------------


class AwfCellError(Exception):
    """A workflow or provider error, shown as one short red paragraph instead of a traceback.

    The cell still fails (so nbval, nbclient and papermill notice). `result` is the
    `RunResult` of a run that failed or was cancelled, when there is one.
    """

    def __init__(self, message: str, *, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result

    def _render_traceback_(self) -> list[str]:
        lines = self.message.splitlines() or [""]
        return [f"\x1b[0;31m{lines[0]}\x1b[0m", *lines[1:]]


def _cell_error(err: AwfError) -> AwfCellError:
    return AwfCellError(str(err))


# --- pure decisions ------------------------------------------------------------------------


def parse_version(text: str) -> tuple[int, ...]:
    """`"7.4.0"` -> (7, 4, 0); `"7.0.0a1"` -> (7, 0, 0); unparsable -> ()."""
    numbers: list[int] = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(numbers)


def choose_run_mode(
    *, needs_input: bool, kernel_version: tuple[int, ...] | None, wait: bool | None = None
) -> RunMode:
    """Whether the cell awaits the run ("await") or starts it in the background.

    `wait` is `--wait` (True) / `--no-wait` (False) / neither (None). A run that needs no
    input always awaits. One that needs the person awaits where an awaiting cell still gets
    widget events: ipykernel >= 7.4, or no kernel at all (a terminal IPython reads stdin).
    On older kernels it would deadlock, so it runs in the background.
    """
    if wait is not None:
        return "await" if wait else "background"
    if not needs_input or kernel_version is None:
        return "await"
    return "await" if kernel_version >= AWAIT_WIDGETS_SINCE else "background"


def workflow_needs_input(workflow: Workflow, *, _seen: set[str] | None = None) -> bool:
    """True when a run may ask the person for a message (a `mode: conversation` step here
    or in a called workflow)."""
    from awf_nb.workflow.loader import find_workflow, load_workflow
    from awf_nb.workflow.model import AgentStep, CallWorkflowStep

    seen = _seen if _seen is not None else set()
    seen.add(workflow.name)
    for step in workflow.steps.values():
        if isinstance(step, AgentStep) and step.mode == "conversation":
            return True
        if isinstance(step, CallWorkflowStep):
            if "{{" in step.workflow:  # chosen at run time: assume it may ask
                return True
            try:
                child = load_workflow(find_workflow(step.workflow, relative_to=workflow.base_dir))
            except AwfError:  # the run itself will report it
                continue
            if child.name not in seen and workflow_needs_input(child, _seen=seen):
                return True
    return False


def is_headless(flag: bool, env: Mapping[str, str] | None = None) -> bool:
    """`--no-interactive`, or `AWF_NO_INTERACTIVE` set to 1/true/yes/on."""
    value = (env if env is not None else os.environ).get("AWF_NO_INTERACTIVE", "")
    return flag or value.strip().lower() in _TRUE_WORDS


def expand_braces(value: str, namespace: Mapping[str, Any]) -> str:
    """`{name}` / `{obj.attr}` -> str(value of that Python variable); anything else (YAML or
    Go-template braces, names that are not defined) is left as written."""

    def replace(match: re.Match[str]) -> str:
        head, *attrs = match.group(1).split(".")
        if head not in namespace:
            return match.group(0)
        found: Any = namespace[head]
        for attr in attrs:
            if not hasattr(found, attr):
                return match.group(0)
            found = getattr(found, attr)
        return str(found)

    return _BRACED_NAME.sub(replace, value)


def kernel_version(shell: Any) -> tuple[int, ...] | None:
    """The ipykernel version when `shell` runs inside a kernel, else None."""
    if getattr(shell, "kernel", None) is None:
        return None
    module = sys.modules.get("ipykernel")
    return parse_version(str(getattr(module, "__version__", ""))) or (0,)


def uses_panel(shell: Any) -> bool:
    """Widgets need a frontend: a kernel. A terminal IPython gets the terminal output."""
    return getattr(shell, "kernel", None) is not None


# --- the run handle ------------------------------------------------------------------------


class RunHandle:
    """A run started from a cell. `await h` -> RunResult; `h.result()`, `h.cancel()`.

    A failed or cancelled run raises `AwfCellError` from `await h` and `h.result()` (its
    `result` attribute holds the RunResult); `h.state` is the live `RunState` at any time.
    """

    def __init__(self, runner: Runner, *, panel: RunPanel | None = None, name: str = "") -> None:
        self.runner = runner
        self.panel = panel
        self.name = name or DEFAULT_HANDLE
        self.task: asyncio.Task[RunResult] | None = None
        self._error: BaseException | None = None

    @property
    def run_id(self) -> str:
        return self.runner.run_id

    @property
    def workflow(self) -> str:
        return self.runner.workflow.name

    @property
    def state(self) -> RunState:
        return self.runner.state

    @property
    def status(self) -> str:
        return self.runner.state.status

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Schedule the run on `loop` (default: the running loop, else IPython's)."""
        if self.task is not None:
            return
        if loop is None:
            loop = _current_loop()
        self.task = loop.create_task(self._drive(), name=f"awf run {self.run_id}")
        _RUNNING.add(self.task)
        self.task.add_done_callback(_forget)

    async def _drive(self) -> RunResult:
        from awf_nb.api import RunResult
        from awf_nb.frontends.notebook.reader import WidgetReader

        loop = asyncio.get_running_loop()
        reader = self.runner.config.reader
        if isinstance(reader, WidgetReader):
            reader.bind(loop)
        if self.panel is not None:
            self.panel.attach(
                reader=reader if isinstance(reader, WidgetReader) else None,
                stop=self.runner.interrupt,
                loop=loop,
            )
        try:
            return RunResult(await self.runner.execute())
        except AwfError as exc:  # the run could not start (e.g. its storage is unwritable)
            self._show_failure(str(exc))
            raise
        except Exception as exc:
            self._show_failure(f"internal error: {type(exc).__name__}: {exc}")
            raise

    def _show_failure(self, message: str) -> None:
        if self.panel is not None:
            self.panel.abort(message)

    def done(self) -> bool:
        return self.task is not None and self.task.done()

    def cancel(self) -> bool:
        """Cancel the run (its state is kept: `%awf resume RUN_ID` continues it)."""
        if self.task is None or self.task.done():
            return False
        # The run executes inside this task, so cancelling it is `Runner.cancel()` — and also
        # works before the run has reached its first step.
        self.task.cancel()
        return True

    def interrupt(self) -> str:
        """Like the Stop button: interrupt the reply being streamed, else cancel the run."""
        return self.runner.interrupt()

    def result(self) -> RunResult:
        """The RunResult of a finished run; a clear error while it runs or when it failed."""
        task = self.task
        if task is None or not task.done():
            raise AwfCellError(
                f"run {self.run_id} of {self.workflow} is still running; "
                f"`await {self.name}` waits for it, `{self.name}.cancel()` stops it"
            )
        if task.cancelled():
            raise AwfCellError(
                f"run {self.run_id} of {self.workflow} was cancelled; "
                f"continue it with %awf resume {self.run_id}",
                result=self._partial_result(),
            )
        error = task.exception()
        if isinstance(error, AwfError):
            raise _cell_error(error) from error
        if error is not None:
            raise error
        result = task.result()
        if not result.ok:
            raise AwfCellError(_failure_message(result), result=result)
        return result

    def _partial_result(self) -> RunResult:
        from awf_nb.api import RunResult

        return RunResult(self.runner.state)

    async def wait(self) -> RunResult:
        """Wait for the end of the run (not cancelled if this wait is), then `result()`."""
        if self.task is None:
            raise AwfCellError(f"run {self.run_id} of {self.workflow} was never started")
        await asyncio.wait({self.task})
        return self.result()

    def __await__(self) -> Any:
        return self.wait().__await__()

    # --- display ------------------------------------------------------------------------------

    def summary(self) -> RunSummary:
        from awf_nb.engine.summary import RunSummary

        return RunSummary.from_state(self.runner.state)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        if not self.done():
            text = repr(self)
            return {"text/plain": text, "text/html": f"<code>{_html_escape(text)}</code>"}
        from awf_nb.frontends.notebook.summary import summary_html, summary_text

        summary = self.summary()
        return {"text/plain": summary_text(summary), "text/html": summary_html(summary)}

    def __repr__(self) -> str:
        step = self.runner.state.current_step
        where = f" at step {step}" if step and not self.done() else ""
        return f"<awf run {self.workflow}: {self.status}{where} (run {self.run_id})>"


def _html_escape(text: str) -> str:
    import html

    return html.escape(text)


def _forget(task: asyncio.Task[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved here; `result()` re-raises it for the person


def _failure_message(result: RunResult) -> str:
    state = result.state
    what = "was cancelled" if state.status == "cancelled" else f"failed: {state.error}"
    return (
        f"workflow {state.workflow_name} {what}\n"
        f"(run {state.run_id}; continue it with %awf resume {state.run_id})"
    )


def _current_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop()


# --- argument parsers ----------------------------------------------------------------------


class _HelpShown(Exception):
    """`-h` was given: the help has been printed, nothing else to do."""


class _HelpAction(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.print_help()
        raise _HelpShown


def _parser(prog: str, description: str) -> MagicArgumentParser:
    parser = MagicArgumentParser(prog=prog, description=description)
    parser.add_argument("-h", "--help", action=_HelpAction, help="show this help")
    return parser


def _add_run_flags(parser: argparse.ArgumentParser, *, dry_run: bool = True) -> None:
    parser.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a workflow input (repeatable); NAME=@path reads a file, {var} inserts a variable",
    )
    parser.add_argument(
        "--reply",
        action="append",
        default=None,
        metavar="TEXT",
        help="answer the next conversation turn with TEXT (repeatable; no text box)",
    )
    parser.add_argument(
        "--out", metavar="NAME", default=DEFAULT_HANDLE, help="bind the run handle to NAME"
    )
    parser.add_argument("--storage", metavar="DIR", help="where runs are stored")
    parser.add_argument(
        "--no-interactive",
        action="store_true",
        help="headless: a conversation ends instead of waiting for input",
    )
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="make the cell wait for the run to end (--wait) or return at once (--no-wait)",
    )
    if dry_run:
        parser.add_argument("--dry-run", action="store_true", help="show the plan; run nothing")


def build_cell_parser() -> MagicArgumentParser:
    parser = _parser("%%awf", "Run the workflow written (as YAML) in the cell body.")
    parser.add_argument(
        "workflow",
        nargs="?",
        metavar="WORKFLOW_NAME",
        help="the workflow's name when the YAML has none; with an empty body, the workflow "
        "to run from the search path",
    )
    _add_run_flags(parser)
    parser.add_argument(
        "--diagram", action="store_true", help="show the workflow as a diagram; do not run it"
    )
    return parser


RUN_ID_HELP = "the run (a unique prefix is enough; {handle.run_id} inserts a Python value)"


def build_line_parser() -> MagicArgumentParser:
    parser = _parser("%awf", "Run, validate and list workflows; see past runs.")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=MagicArgumentParser
    )

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.add_argument("-h", "--help", action=_HelpAction, help="show this help")
        return sub

    run = command("run", "run a workflow file or name")
    run.add_argument("workflow", metavar="NAME_OR_FILE")
    _add_run_flags(run)
    resume = command("resume", "continue a failed or cancelled run")
    resume.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    resume.add_argument("--from", dest="from_step", metavar="STEP", help="start at this step")
    _add_run_flags(resume, dry_run=False)
    validate = command("validate", "check workflow files without running them")
    validate.add_argument("workflows", nargs="+", metavar="FILE")
    validate.add_argument("--strict", action="store_true", help="treat warnings as errors")
    command("list", "list the workflows on the search path")
    history = command("history", "list recent runs")
    history.add_argument("-w", "--workflow", metavar="NAME", help="only runs of this workflow")
    history.add_argument("-s", "--status", metavar="STATUS", help="only runs with this status")
    history.add_argument("-n", type=int, default=20, metavar="N", help="how many (default 20)")
    history.add_argument("--storage", metavar="DIR", help="where runs are stored")
    status = command("status", "show one run: steps, outputs, conversations")
    status.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    status.add_argument("--storage", metavar="DIR", help="where runs are stored")
    diagram = command("diagram", "show a workflow as a diagram (Mermaid, rendered by JupyterLab)")
    diagram.add_argument("workflow", metavar="NAME_OR_FILE")
    diagram.add_argument("--format", choices=("mermaid", "svg", "dot"), default="mermaid")
    diagram.add_argument(
        "--direction", default="TB", type=str.upper, choices=("TB", "LR", "BT", "RL")
    )
    diagram.add_argument("--highlight", nargs="+", default=[], metavar="STEP")
    return parser


def parse_line(parser: MagicArgumentParser, line: str) -> argparse.Namespace:
    """Split like a POSIX shell (`-i topic="Go channels"` is one value) and parse."""
    try:
        argv = shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(f"{parser.prog}: cannot split the line: {exc}") from None
    return parser.parse_args(argv)


# --- what a run command asked for ----------------------------------------------------------


@dataclass
class RunOptions:
    inputs: dict[str, str]
    replies: list[str] | None
    out: str
    storage: str | None
    headless: bool
    wait: bool | None


def run_options(args: argparse.Namespace, namespace: Mapping[str, Any]) -> RunOptions:
    from awf_nb.engine.inputs import parse_input_args

    if not args.out.isidentifier() or keyword.iskeyword(args.out):
        raise UsageError(f"--out {args.out}: not a Python variable name")
    given = [expand_braces(pair, namespace) for pair in args.input]
    try:
        inputs = parse_input_args(given, cwd=Path.cwd())
    except AwfError as exc:
        raise _cell_error(exc) from None
    return RunOptions(
        inputs=inputs,
        replies=args.reply,
        out=args.out,
        storage=args.storage,
        headless=is_headless(args.no_interactive),
        wait=args.wait,
    )


def cell_workflow(name: str | None, body: str) -> Workflow:
    """The workflow of a `%%awf` cell: the YAML body (named `name` when it has no `name:`),
    or the workflow `name` from the search path when the body is empty."""
    from awf_nb.workflow.loader import load_text, load_workflow

    if not body.strip():
        if not name:
            raise UsageError(
                "%%awf needs a workflow: YAML in the cell body, or a workflow name on the line"
            )
        return load_workflow(name, cwd=Path.cwd())
    # A leading newline makes YAML line N the cell's line N (line 1 is the %%awf line).
    text = "\n" + body
    if name:
        declared = _YAML_NAME.search(body)
        if declared is None:
            text = text.rstrip("\n") + f"\nname: {json.dumps(name)}\n"
        elif declared.group(1).strip("\"'") != name:
            raise UsageError(
                f'%%awf {name}: the YAML names the workflow "{declared.group(1).strip()}"; '
                "use one name (or drop it from the line)"
            )
    return load_text(text, file="<cell>", base_dir=Path.cwd())


# --- the magics ----------------------------------------------------------------------------


@magics_class
class AwfMagics(Magics):
    """`%%awf` and `%awf`. See the module docstring for flags and run modes."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.cell_parser = build_cell_parser()
        self.line_parser = build_line_parser()

    # --- entry points -----------------------------------------------------------------------

    @no_var_expand
    @cell_magic("awf")
    def awf_cell(self, line: str, cell: str) -> None:
        """Run the workflow in the cell (used when the cell could not be rewritten to await)."""
        launch = self._cell_launch(line, cell)
        if launch is not None:
            self._run_sync(*launch)

    @no_var_expand
    @line_magic("awf")
    def awf_line(self, line: str) -> None:
        """%awf run|resume|validate|list|history|status …"""
        args = self._parse(self.line_parser, line)
        if args is None:
            return
        if args.command in ("run", "resume"):
            launch = self._line_launch(args)
            if launch is not None:
                self._run_sync(*launch)
            return
        self._command(args)

    async def cell_async(self, line: str, body: str) -> None:
        launch = self._cell_launch(line, body)
        if launch is not None:
            await self._run_async(*launch)

    async def line_async(self, line: str) -> None:
        args = self._parse(self.line_parser, line)
        if args is None:
            return
        if args.command not in ("run", "resume"):
            self._command(args)
            return
        launch = self._line_launch(args)
        if launch is not None:
            await self._run_async(*launch)

    # --- parsing and preparing --------------------------------------------------------------

    def _parse(self, parser: MagicArgumentParser, line: str) -> argparse.Namespace | None:
        try:
            args = parse_line(parser, line)
        except _HelpShown:
            return None
        if parser is self.line_parser and args.command is None:
            raise UsageError(
                "%awf: choose a command: run, resume, validate, list, history, status, diagram"
            )
        return args

    def _cell_launch(self, line: str, body: str) -> tuple[RunHandle, RunMode] | None:
        args = self._parse(self.cell_parser, line)
        if args is None:
            return None
        options = run_options(args, self.shell.user_ns)
        try:
            workflow = cell_workflow(args.workflow, body)
            if args.diagram:
                from awf_nb.frontends.notebook.diagram import show_diagram

                show_diagram(workflow)
                return None
            if args.dry_run:
                self._dry_run(workflow, options)
                return None
            return self._prepare(options, workflow=workflow)
        except AwfError as exc:
            raise _cell_error(exc) from None

    def _line_launch(self, args: argparse.Namespace) -> tuple[RunHandle, RunMode] | None:
        from awf_nb.workflow.loader import load_workflow

        options = run_options(args, self.shell.user_ns)
        try:
            if args.command == "resume":
                run_id = expand_braces(args.run_id, self.shell.user_ns)
                return self._prepare(options, resume=(run_id, args.from_step))
            workflow = load_workflow(args.workflow, cwd=Path.cwd())
            if args.dry_run:
                self._dry_run(workflow, options)
                return None
            return self._prepare(options, workflow=workflow)
        except AwfError as exc:
            raise _cell_error(exc) from None

    def _dry_run(self, workflow: Workflow, options: RunOptions) -> None:
        from awf_nb.engine.plan import describe_plan

        print(describe_plan(workflow, options.inputs, cwd=Path.cwd()))

    def _prepare(
        self,
        options: RunOptions,
        *,
        workflow: Workflow | None = None,
        resume: tuple[str, str | None] | None = None,
    ) -> tuple[RunHandle, RunMode]:
        """Build the runner, its frontend and its handle (bound in the user namespace)."""
        from awf_nb.api import prepare_resume, prepare_run
        from awf_nb.store import Store

        store = Store(options.storage)
        if resume is not None:
            run_id, from_step = resume
            runner = prepare_resume(run_id, store=store, from_step=from_step, inputs=options.inputs)
        else:
            assert workflow is not None
            runner = prepare_run(workflow, options.inputs, store=store)
        interactive = (
            options.replies is None
            and not options.headless
            and workflow_needs_input(runner.workflow)
        )
        panel = self._connect_frontend(runner, options, interactive, store)
        mode = choose_run_mode(
            needs_input=interactive, kernel_version=kernel_version(self.shell), wait=options.wait
        )
        handle = RunHandle(runner, panel=panel, name=options.out)
        self.shell.user_ns[options.out] = handle
        return handle, mode

    def _connect_frontend(
        self, runner: Runner, options: RunOptions, interactive: bool, store: Any
    ) -> RunPanel | None:
        """Give the runner its reader and event sink: the widget panel in a kernel, the
        terminal output elsewhere."""
        from awf_nb.frontends.scripted import ScriptedReader

        config = runner.config
        if options.replies is not None:
            config.reader = ScriptedReader(options.replies)
        elif options.headless:
            config.reader = None
        if not uses_panel(self.shell):
            from awf_nb.frontends.terminal import TerminalReader, TerminalSink

            if options.replies is None and not options.headless:
                config.reader = TerminalReader(history_path=store.input_history_path)
            typed_on_tty = isinstance(config.reader, TerminalReader) and config.reader.is_tty
            config.sink = TerminalSink("streaming", echo_input=not typed_on_tty)
            return None
        try:
            from awf_nb.frontends.notebook.panel import RunPanel
            from awf_nb.frontends.notebook.reader import WidgetReader
        except ImportError as exc:
            raise AwfCellError(
                f"the run panel needs {exc.name}: pip install 'awf-nb[notebook]'"
            ) from None
        if interactive:
            config.reader = WidgetReader()
        panel = RunPanel(runner.workflow.name, interactive=interactive, workflow=runner.workflow)
        config.sink = panel
        return panel

    # --- running ----------------------------------------------------------------------------

    async def _run_async(self, handle: RunHandle, mode: RunMode) -> None:
        """The awaiting cell: show the panel, start the run, wait for it unless background."""
        self._show(handle)
        handle.start(asyncio.get_running_loop())
        if mode == "background":
            self._announce_background(handle)
            return
        assert handle.task is not None
        stop_on_sigint = handle.panel is None and _install_sigint(handle)
        try:
            await asyncio.wait({handle.task})
        except (asyncio.CancelledError, KeyboardInterrupt):
            # The kernel interrupted this cell (ipykernel cancels an awaiting cell on SIGINT):
            # cancel the run too, let it record that, and fail the cell in one paragraph.
            handle.cancel()
            with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
                await asyncio.wait({handle.task}, timeout=CANCEL_GRACE_SECONDS)
            raise AwfCellError(
                f"interrupted: run {handle.run_id} of {handle.workflow} was cancelled; "
                f"continue it with %awf resume {handle.run_id}"
            ) from None
        finally:
            if stop_on_sigint:
                _remove_sigint()
        handle.result()

    def _run_sync(self, handle: RunHandle, mode: RunMode) -> None:
        """The magic itself (not rewritten to await): run on IPython's loop when no loop is
        running; inside a running loop (a kernel with autoawait off) the cell cannot wait."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from IPython.core.async_helpers import get_asyncio_loop

            get_asyncio_loop().run_until_complete(self._run_async(handle, "await"))
            return
        self._show(handle)
        handle.start()
        self._announce_background(handle)

    def _show(self, handle: RunHandle) -> None:
        panel = handle.panel
        if panel is None:
            return
        from IPython.display import display

        from awf_nb.frontends.notebook.panel import ENTER_TO_SEND_JS

        if panel.interactive:
            display({"application/javascript": ENTER_TO_SEND_JS, "text/plain": ""}, raw=True)
        display(panel.widget)

    def _announce_background(self, handle: RunHandle) -> None:
        name = handle.name
        text = (
            f"running in the background: `await {name}` (in a later cell) gives the result, "
            f"`{name}.cancel()` stops it"
        )
        if handle.panel is not None:
            handle.panel.note(text)
        else:
            print(f"{handle.workflow} (run {handle.run_id}) is {text}")

    # --- the other commands -----------------------------------------------------------------

    def _command(self, args: argparse.Namespace) -> None:
        from awf_nb import cli

        if args.command == "diagram":
            from awf_nb.frontends.notebook.diagram import show_diagram
            from awf_nb.workflow.loader import load_workflow

            try:
                workflow = load_workflow(args.workflow, cwd=Path.cwd())
                show_diagram(
                    workflow,
                    format=args.format,
                    direction=args.direction,
                    highlight=args.highlight,
                )
            except AwfError as exc:
                raise _cell_error(exc) from None
            return
        namespace = argparse.Namespace(**vars(args), json=False)
        if args.command == "status":
            namespace.run_id = expand_braces(args.run_id, self.shell.user_ns)
        handlers: dict[str, Callable[[argparse.Namespace], int]] = {
            "validate": cli.cmd_validate,
            "list": cli.cmd_list,
            "history": cli.cmd_history,
            "status": cli.cmd_status,
        }
        try:
            code = handlers[args.command](namespace)
        except AwfError as exc:
            raise _cell_error(exc) from None
        if code != 0 and args.command == "validate":
            raise AwfCellError("awf validate: some workflows are invalid (see above)")


# --- Ctrl-C in a terminal IPython ------------------------------------------------------------


def _install_sigint(handle: RunHandle, double_press: float = 1.0) -> bool:
    """Ctrl-C interrupts the streaming reply, at the prompt (or twice) cancels the run — like
    `awf run`. Only possible on the main thread of a Unix loop; returns whether installed."""
    loop = asyncio.get_running_loop()
    last = [float("-inf")]

    def on_sigint() -> None:
        pressed = time.monotonic()
        twice, last[0] = pressed - last[0] < double_press, pressed
        if twice:
            handle.cancel()
        elif handle.interrupt() == "turn":
            sys.stderr.write("\n^C — reply interrupted\n")

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


def _remove_sigint() -> None:
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)


# --- cell rewriting and registration ---------------------------------------------------------


def _magics(shell: Any) -> AwfMagics:
    magics = shell.magics_manager.registry.get(AwfMagics.__name__)
    if magics is None:
        raise UsageError("the awf extension is not loaded: run %load_ext awf_nb")
    return magics


async def run_cell(line: str, body: str) -> None:
    """What a rewritten `%%awf` cell awaits."""
    from IPython import get_ipython

    await _magics(get_ipython()).cell_async(line, body)


async def run_line(line: str) -> None:
    """What a rewritten `%awf run|resume …` cell awaits."""
    from IPython import get_ipython

    await _magics(get_ipython()).line_async(line)


def can_await(shell: Any) -> bool:
    """Top-level `await` works in this shell with asyncio (autoawait on, asyncio runner)."""
    from IPython.core.async_helpers import _asyncio_runner

    return bool(getattr(shell, "autoawait", False)) and shell.loop_runner is _asyncio_runner


def make_transformer(shell: Any) -> Callable[[list[str]], list[str]]:
    """The cleanup input transformer that turns a `%%awf` cell (or a cell that is one
    `%awf run|resume` line) into one top-level `await`."""

    def awf_await_cell(lines: list[str]) -> list[str]:
        if not lines or not can_await(shell):
            return lines
        first = lines[0].rstrip("\r\n")
        if _CELL_MAGIC.match(first):
            line = first[len("%%awf") :].strip()
            body = "".join(lines[1:])
            return [f"await {_ENTRY}.run_cell({line!r}, {body!r})\n"]
        code = [text for text in lines if text.strip() and not text.lstrip().startswith("#")]
        if len(code) == 1 and _RUN_LINE.match(code[0].strip()):
            line = code[0].strip()[len("%awf") :].strip()
            return [f"await {_ENTRY}.run_line({line!r})\n"]
        return lines

    awf_await_cell._awf_transformer = True  # type: ignore[attr-defined]
    return awf_await_cell


def _remove_transformers(shell: Any) -> None:
    transforms = shell.input_transformer_manager.cleanup_transforms
    transforms[:] = [t for t in transforms if not getattr(t, "_awf_transformer", False)]


def load_ipython_extension(ipython: Any) -> None:
    """Register `%%awf` / `%awf` and the cell transformer that makes `%%awf` cells await."""
    ipython.register_magics(AwfMagics)
    _remove_transformers(ipython)
    ipython.input_transformer_manager.cleanup_transforms.append(make_transformer(ipython))


def unload_ipython_extension(ipython: Any) -> None:
    _remove_transformers(ipython)


AwfMagics.awf_cell.__doc__ = build_cell_parser().format_help()
AwfMagics.awf_line.__doc__ = build_line_parser().format_help()
