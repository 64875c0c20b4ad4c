"""The `%%awf` cell magic and `%awf` line magic: run workflows in a notebook.

    %load_ext awf_nb

    %%awf -i topic="Go channels" --out chat
    name: clarify
    ...

`%%awf [WORKFLOW_NAME] [flags]` runs the YAML in the cell body; `%%awf chat [flags]` starts a
conversation whose first message is the cell body (chat_cell.py); `%awf COMMAND …` is any
`awf` command (`run`, `resume`, `validate`, `list`, `history`, `status`, `diagram`,
`schema`) with the same flags (parsers.py builds both from the CLI's command registry).

The pieces: `parsers.py` (the command lines), `run_mode.py` (whether a cell waits for its
run), `transformer.py` (rewriting a `%%awf` cell to `await` its run), `handle.py`
(`RunHandle`, `AwfCellError`). The run is prepared like every other run
(`awf_nb.runs.prepare_run`), with the frontend `frontends/auto.py` picks: the widget
panel in a kernel, the terminal in a terminal IPython.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import MagicArgumentParser

from awf_nb.errors import AwfError
from awf_nb.frontends.notebook.handle import AwfCellError, RunHandle, cell_error
from awf_nb.frontends.notebook.parsers import (
    CellOptions,
    HelpShown,
    build_cell_parser,
    build_chat_parser,
    build_line_parser,
    cell_options,
    cell_workflow,
    expand_braces,
    parse_line,
)
from awf_nb.frontends.notebook.run_mode import (
    RunMode,
    choose_run_mode,
    kernel_version,
    workflow_needs_input,
)
from awf_nb.frontends.notebook.transformer import make_transformer, remove_transformers

if TYPE_CHECKING:
    from awf_nb.workflow.model import Workflow

__all__ = ["AwfCellError", "AwfMagics", "RunHandle", "load_ipython_extension"]

CANCEL_GRACE_SECONDS = 5.0  # how long an interrupted cell waits for the cancelled run
_RUN_COMMANDS = ("run", "resume")


@magics_class
class AwfMagics(Magics):
    """`%%awf` and `%awf`. See the module docstring for flags and run modes."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.cell_parser = build_cell_parser()
        self.chat_parser = build_chat_parser()
        self.line_parser = build_line_parser()

    @property
    def _user_ns(self) -> dict[str, Any]:
        """The notebook's variables (a registered magic always has its shell)."""
        assert self.shell is not None
        return self.shell.user_ns

    # --- entry points -----------------------------------------------------------------------

    # IPython types no_var_expand's argument as Never (its stub), so mypy refuses any method.
    @no_var_expand
    @cell_magic("awf")  # type: ignore[arg-type]
    def awf_cell(self, line: str, cell: str) -> None:
        """Run the workflow in the cell (used when the cell could not be rewritten to await)."""
        if _is_eval(line):
            self._run_eval_sync(line, cell)
            return
        launch = self._cell_launch(line, cell)
        if launch is not None:
            self._run_sync(*launch)

    @no_var_expand
    @line_magic("awf")  # type: ignore[arg-type]
    def awf_line(self, line: str) -> None:
        """%awf run|resume|validate|list|history|status|diagram|schema …"""
        launch = self._line(line)
        if launch is not None:
            self._run_sync(*launch)

    async def cell_async(self, line: str, body: str) -> None:
        if _is_eval(line):  # `%%awf eval …`: eval_magic.py
            from awf_nb.frontends.notebook.eval_magic import run_eval_cell

            await run_eval_cell(
                self.shell, line.split(None, 1)[1] if " " in line.strip() else "", body
            )
            return
        launch = self._cell_launch(line, body)
        if launch is not None:
            await self._run_async(*launch)

    async def line_async(self, line: str) -> None:
        launch = self._line(line)
        if launch is not None:
            await self._run_async(*launch)

    def _run_eval_sync(self, line: str, body: str) -> None:
        """`%%awf eval` where the cell could not be rewritten to await: on IPython's loop."""
        from IPython.core.async_helpers import get_asyncio_loop

        from awf_nb.frontends.notebook.eval_magic import run_eval_cell

        rest = line.split(None, 1)[1] if " " in line.strip() else ""
        get_asyncio_loop().run_until_complete(run_eval_cell(self.shell, rest, body))

    # --- parsing and preparing --------------------------------------------------------------

    def _line(self, line: str) -> tuple[RunHandle, RunMode, CellOptions] | None:
        """Run a `%awf` command that is not a run; for `run`/`resume`, what to launch."""
        args = self._parse(self.line_parser, line)
        if args is None:
            return None
        if args.command not in _RUN_COMMANDS:
            self._command(args)
            return None
        return self._line_launch(args)

    def _parse(self, parser: MagicArgumentParser, line: str) -> argparse.Namespace | None:
        try:
            args = parse_line(parser, line)
        except HelpShown:
            return None
        if parser is self.line_parser and args.command is None:
            from awf_nb.frontends.commands import COMMANDS

            raise UsageError(f"%awf: choose a command: {', '.join(COMMANDS)}")
        return args

    def _cell_launch(self, line: str, body: str) -> tuple[RunHandle, RunMode, CellOptions] | None:
        from awf_nb.frontends.notebook.chat_cell import chat_line

        if (flags := chat_line(line, body)) is not None:
            return self._chat_launch(flags, body)
        args = self._parse(self.cell_parser, line)
        if args is None:
            return None
        options = cell_options(args, self._user_ns)
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
            raise cell_error(exc) from None

    def _chat_launch(self, line: str, body: str) -> tuple[RunHandle, RunMode, CellOptions] | None:
        """`%%awf chat`: the body is the first message of a one-step conversation."""
        from awf_nb.frontends.notebook.chat_cell import MESSAGE_INPUT, chat_workflow

        args = self._parse(self.chat_parser, line)
        if args is None:
            return None
        options = cell_options(args, self._user_ns)
        if args.provider:  # --model is that provider's model (chat_workflow), not the switch
            options.flags["model"] = None
        options.inputs[MESSAGE_INPUT] = body.strip("\n")
        try:
            return self._prepare(options, workflow=chat_workflow(args))
        except AwfError as exc:
            raise cell_error(exc) from None

    def _line_launch(
        self, args: argparse.Namespace
    ) -> tuple[RunHandle, RunMode, CellOptions] | None:
        from awf_nb.workflow.loader import load_workflow

        options = cell_options(args, self._user_ns)
        try:
            if args.command == "resume":
                run_id = expand_braces(args.run_id, self._user_ns)
                return self._prepare(options, resume=(run_id, args.from_step))
            workflow = load_workflow(args.workflow, cwd=Path.cwd())
            if args.dry_run:
                self._dry_run(workflow, options)
                return None
            return self._prepare(options, workflow=workflow)
        except AwfError as exc:
            raise cell_error(exc) from None

    def _dry_run(self, workflow: Workflow, options: CellOptions) -> None:
        from awf_nb.engine.plan import describe_plan

        print(describe_plan(workflow, options.inputs, cwd=Path.cwd(), user=options.user))

    def _prepare(
        self,
        options: CellOptions,
        *,
        workflow: Workflow | None = None,
        resume: tuple[str, str | None] | None = None,
    ) -> tuple[RunHandle, RunMode, CellOptions]:
        """Prepare the run (its frontend included), bind its handle in the user namespace."""
        from awf_nb.frontends.auto import pick_frontend
        from awf_nb.runs.options import Resume, RunOptions
        from awf_nb.runs.setup import prepare_run

        # A kernel draws the panel, a terminal IPython prints like `awf run`; --output silent
        # shows nothing (and so cannot ask anything either). The person is asked only when
        # the workflow has a conversation, and not on a replay: a replayed conversation takes
        # its messages from the cassette, and the cell waits for it like a headless run
        # instead of offering a text box (add --reply to go on).
        frontend = pick_frontend(
            options.output != "silent",
            shell=self.shell,
            output=options.output or "streaming",  # type: ignore[arg-type]
            asks_if=workflow_needs_input,
            asks_when_replayed=False,
        )
        run_options = RunOptions(
            inputs=options.inputs,
            replies=options.replies,
            interactive=options.user is None and not options.headless,
            frontend=frontend,
            **options.flags,
        )
        target = Resume(*resume) if resume is not None else workflow
        assert target is not None
        try:
            prepared = prepare_run(target, run_options)
        except ImportError as exc:
            raise AwfCellError(
                f"the run panel needs {exc.name}: pip install 'awf-nb[notebook]'"
            ) from None
        mode = choose_run_mode(
            needs_input=prepared.session.asks or prepared.runner.pauses.may_pause(),
            kernel_version=kernel_version(self.shell),
            wait=options.wait,
        )
        handle = RunHandle(prepared, name=options.out)
        self._user_ns[options.out] = handle
        return handle, mode, options

    # --- running ----------------------------------------------------------------------------

    async def _run_async(
        self, handle: RunHandle, mode: RunMode, options: CellOptions | None = None
    ) -> None:
        """The awaiting cell: show the panel, start the run, wait for it unless background."""
        self._show(handle)
        handle.start(asyncio.get_running_loop())
        if mode == "background":
            self._announce_background(handle)
            return
        assert handle.task is not None
        stop_on_sigint = handle.panel is None and _install_ctrl_c(handle)
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
                _remove_ctrl_c()
        if options is not None and options.json:
            print(handle.state.to_json())
        handle.result()

    def _run_sync(self, handle: RunHandle, mode: RunMode, options: CellOptions) -> None:
        """The magic itself (not rewritten to await): run on IPython's loop when no loop is
        running; inside a running loop (a kernel with autoawait off) the cell cannot wait."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from IPython.core.async_helpers import get_asyncio_loop

            get_asyncio_loop().run_until_complete(self._run_async(handle, "await", options))
            return
        self._show(handle)
        handle.start()
        self._announce_background(handle)

    def _show(self, handle: RunHandle) -> None:
        """The panel in this cell, before the run starts (a background run's cell returns)."""
        handle.session.show()

    def _announce_background(self, handle: RunHandle) -> None:
        name = handle.name
        text = (
            f"running in the background: `await {name}` (in a later cell) gives the result, "
            f"`{name}.cancel()` stops it"
        )
        if handle.panel is not None:
            handle.panel.static_in_place = True  # this cell returns: no output added later
            handle.panel.note(text)
        else:
            print(f"{handle.workflow} (run {handle.run_id}) is {text}")

    # --- the other commands -----------------------------------------------------------------

    def _command(self, args: argparse.Namespace) -> None:
        """Any other `awf` command, run by the CLI's own handler (output into the cell)."""
        from awf_nb.frontends.commands import COMMANDS

        if args.command == "eval":  # it runs on the kernel's loop, with the live table
            raise AwfCellError(
                "in a notebook, run an eval with a %%awf eval cell (%%awf eval FILE)"
            )
        if args.command == "diagram" and not args.output:
            self._diagram(args)
            return
        if args.command == "eval-report" and not args.output and args.format == "html":
            self._eval_report(args)
            return
        if args.command == "status":
            args.run_id = expand_braces(args.run_id, self._user_ns)
        try:
            code = COMMANDS[args.command].handler(args)
        except AwfError as exc:
            raise cell_error(exc) from None
        if code == 0:
            return
        if args.command == "validate":
            raise AwfCellError("awf validate: some workflows are invalid (see above)")
        raise AwfCellError(f"awf {args.command} failed (exit code {code})")

    def _eval_report(self, args: argparse.Namespace) -> None:
        """`%awf eval-report EVAL_ID` without -o: the HTML report in the cell, in a sandboxed
        frame (its own page: its styles do not reach the notebook's, its script runs in the
        frame only, and it still fetches nothing)."""
        from html import escape

        from IPython.display import HTML, display

        from awf_nb.evals.report import load_report, render

        try:
            page = render(load_report(args.eval_id, storage=args.storage), "html")
        except AwfError as exc:
            raise cell_error(exc) from None
        display(
            HTML(
                f'<div><iframe class="awf-eval-report" sandbox="allow-scripts" '
                f'srcdoc="{escape(page)}" style="width:100%;height:600px;border:1px solid #ccc">'
                "</iframe></div>"
            )
        )

    def _diagram(self, args: argparse.Namespace) -> None:
        """`%awf diagram` without -o: the picture in the cell (Mermaid unless --format)."""
        from awf_nb.frontends.notebook.diagram import show_diagram
        from awf_nb.workflow.loader import load_workflow

        try:
            show_diagram(
                load_workflow(args.workflow, cwd=Path.cwd()),
                format=args.format or "mermaid",
                direction=args.direction,
                highlight=args.highlight,
            )
        except AwfError as exc:
            raise cell_error(exc) from None


def _is_eval(line: str) -> bool:
    return line.split(None, 1)[:1] == ["eval"]


# --- Ctrl-C in a terminal IPython ------------------------------------------------------------


def _install_ctrl_c(handle: RunHandle) -> bool:
    """Ctrl-C acts as in `awf run` (`terminal.CtrlC`). Only possible on the main thread of a
    Unix loop; returns whether installed."""
    from awf_nb.frontends.terminal import CtrlC
    from awf_nb.frontends.terminal.frontend import TerminalSession

    session = handle.session
    if not isinstance(session, TerminalSession):  # --output silent: nothing shows it
        return False
    try:
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGINT, CtrlC(handle, session.sink.interrupted_turn)
        )
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


def _remove_ctrl_c() -> None:
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)


# --- registration ----------------------------------------------------------------------------


def load_ipython_extension(ipython: Any) -> None:
    """Register `%%awf` / `%awf` and the cell transformer that makes `%%awf` cells await.
    `AWF_LOG` (debug, info, warning, error) shows awf's log messages in the cells."""
    import sys

    from awf_nb import logs

    try:
        logs.configure_from_env()
    except AwfError as exc:  # a bad AWF_LOG must not keep the magics away
        print(f"awf: {exc}", file=sys.stderr)
    ipython.register_magics(AwfMagics)
    remove_transformers(ipython)
    ipython.input_transformer_manager.cleanup_transforms.append(make_transformer(ipython))


def unload_ipython_extension(ipython: Any) -> None:
    remove_transformers(ipython)


# `%%awf?` shows the flags. (mypy sees the decorated methods as Never: see above.)
_CELL_HELP = build_cell_parser().format_help() + "\n" + build_chat_parser().format_help()
AwfMagics.awf_cell.__doc__ = _CELL_HELP  # type: ignore[assignment]
AwfMagics.awf_line.__doc__ = build_line_parser().format_help()  # type: ignore[assignment]
