"""The commands about runs: `awf run`, `awf resume` (in this terminal), `awf status`,
`awf history`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import EXIT_CANCELLED, EXIT_EXECUTION
from awf_nb.frontends.commands.flags import (
    configure_dry_run,
    configure_run_io,
    configure_storage,
    run_flags,
    utf8,
)
from awf_nb.frontends.commands.table import command
from awf_nb.frontends.commands.workflows import one_line

if TYPE_CHECKING:
    from awf_nb.frontends.run_tree import TreeRow
    from awf_nb.frontends.terminal import OutputMode
    from awf_nb.runs.options import RunOptions
    from awf_nb.runs.setup import PreparedRun


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workflow", metavar="WORKFLOW", help="file path or workflow name")
    configure_run_io(parser)
    configure_dry_run(parser)


def _in_terminal(args: argparse.Namespace, **fields: Any) -> RunOptions:
    """The `RunOptions` of `awf run` / `awf resume`: the flags, shown in this terminal."""
    from awf_nb.frontends.terminal.frontend import TerminalFrontend
    from awf_nb.runs.options import RunOptions

    replies = None
    if args.reply is not None:  # argv bytes that are not UTF-8 are shown as U+FFFD
        replies = [utf8(reply) for reply in args.reply]
    output: OutputMode = args.output or ("silent" if args.json else "streaming")
    return RunOptions(
        replies=replies,
        frontend=TerminalFrontend(output),
        **run_flags(args),
        **fields,
    )


def _run_here(prepared: PreparedRun, args: argparse.Namespace) -> int:
    """Run in this terminal: its session owns the event loop, Ctrl-C and SIGTERM."""
    return _run_outcome(prepared.run_sync().state, args)


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
    from awf_nb.engine.inputs import parse_input_args
    from awf_nb.engine.plan import describe_plan
    from awf_nb.runs.setup import prepare_run
    from awf_nb.workflow.loader import load_workflow

    workflow = load_workflow(args.workflow)
    given = parse_input_args(args.input, cwd=Path.cwd())
    if args.dry_run:
        print(describe_plan(workflow, given, user=run_flags(args)["user"]))
        return 0
    prepared = prepare_run(workflow, _in_terminal(args, inputs=given, ask=_ask_on_tty))
    return _run_here(prepared, args)


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
    from awf_nb.engine.inputs import parse_input_args
    from awf_nb.runs.options import Resume
    from awf_nb.runs.setup import prepare_run

    given = parse_input_args(args.input, cwd=Path.cwd())
    prepared = prepare_run(Resume(args.run_id, args.from_step), _in_terminal(args, inputs=given))
    return _run_here(prepared, args)


def _configure_fork(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run (a unique prefix is enough)")
    parser.add_argument(
        "--at",
        required=True,
        metavar="STEP[#TURN]",
        help="branch at this step (in a conversation, at its TURN-th message; LOOP#N at a "
        "loop's N-th iteration; a parallel step's branch; CALL/STEP inside a called workflow)",
    )
    parser.add_argument(
        "--edit",
        metavar="TEXT|@FILE",
        help="replace the message at --at STEP#TURN with this text (or a file's); at --at "
        "STEP, the step does not run and this is its output",
    )
    configure_run_io(parser)


@command("fork", "a new run from a run's history up to a step or message, then on", _configure_fork)
def cmd_fork(args: argparse.Namespace) -> int:
    """Branch from here: copy RUN_ID's history up to --at into a new run (the message there
    replaced by --edit), then continue it. The original run is not changed."""
    from awf_nb.engine.inputs import parse_input_args
    from awf_nb.runs.fork import fork_run, read_edit
    from awf_nb.runs.options import Resume
    from awf_nb.runs.setup import prepare_run
    from awf_nb.store import Store

    given = parse_input_args(args.input, cwd=Path.cwd())
    store = Store(args.storage)
    edit = None if args.edit is None else read_edit(utf8(args.edit))
    new_id, point = fork_run(store, args.run_id, args.at, edit)
    print(f"forked {args.run_id} at {args.at} as run {new_id}", file=sys.stderr)
    options = _in_terminal(args, inputs=given)
    prepared = prepare_run(Resume(new_id, from_step=point.resume_step), options, storage=store)
    return _run_here(prepared, args)


def _configure_runs_diff(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="a run (a unique prefix is enough)")
    parser.add_argument("run_b", metavar="RUN_B", help="the run to compare it with")
    parser.add_argument("--json", action="store_true", help="print the differences as JSON")
    configure_storage(parser)


@command("runs-diff", "two runs side by side from where they diverge", _configure_runs_diff)
def cmd_runs_diff(args: argparse.Namespace) -> int:
    """Step outputs, conversation messages and tool calls of two runs, from the first
    difference on (marked >>). Exit 0 either way."""
    import shutil

    from awf_nb.runs.diff import diff_runs
    from awf_nb.safe_text import terminal_safe
    from awf_nb.store import Store

    store = Store(args.storage)
    diff = diff_runs(store.load_state(args.run_a), store.load_state(args.run_b))
    if args.json:
        print(json.dumps(diff.to_json(), indent=2, ensure_ascii=False))
    else:
        print(terminal_safe(diff.to_text(shutil.get_terminal_size().columns)))
    return 0


def _configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run (a unique prefix is enough)")
    parser.add_argument("--json", action="store_true", help="print the state file as JSON")
    configure_storage(parser)


@command("status", "show a run: status, steps, outputs, conversations", _configure_status)
def cmd_status(args: argparse.Namespace) -> int:
    from awf_nb.frontends.terminal.text import describe_state
    from awf_nb.store import Store

    store = Store(args.storage)
    state = store.load_state(args.run_id)
    if args.json:
        from awf_nb.runs.results import status_json

        print(status_json(state, store))
    else:
        print(describe_state(state))
    return 0


def _configure_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-w", "--workflow", metavar="NAME", help="only runs of this workflow")
    parser.add_argument("-s", "--status", metavar="STATUS", help="only runs with this status")
    parser.add_argument("-n", type=int, default=20, metavar="N", help="how many (default 20)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    parser.add_argument(
        "--tree", action="store_true", help="show each fork under the run it was forked from"
    )
    configure_storage(parser)


@command("history", "list recent runs", _configure_history)
def cmd_history(args: argparse.Namespace) -> int:
    from awf_nb.engine.summary import format_duration
    from awf_nb.frontends.run_tree import fork_tree
    from awf_nb.store import Store

    store = Store(args.storage)
    entries = store.history(workflow=args.workflow, status=args.status, limit=args.n)
    origins = _fork_origins(store, entries) if args.tree else {}
    if args.json:
        rows = [e.as_dict() for e in entries]
        if args.tree:
            for row in rows:
                parent, at = origins.get(row["run_id"], ("", ""))
                row["forked_from"] = {"run": parent, "at": at} if parent else None
        print(json.dumps(rows, indent=2))
        return 0
    if not entries:
        print("no runs yet", file=sys.stderr)
        return 0
    tree = fork_tree(entries, origins) if args.tree else None
    width = max([23, *(len(r.prefix) + len(r.entry.run_id) for r in tree or [])])
    print(
        f"{'RUN ID':<{width}}  {'WORKFLOW':<20}  {'STATUS':<9}  {'STARTED (UTC)':<19}  "
        f"{'TIME':>10}  {'TOKENS':>6}" + ("  FORKED AT" if tree else "")
    )
    shown: list[TreeRow | None] = [*tree] if tree else [None for _ in entries]
    for node, plain in zip(shown, entries, strict=True):
        entry = node.entry if node is not None else plain
        first = f"{node.prefix}{entry.run_id}" if node is not None else entry.run_id
        started = entry.started_at.strftime("%Y-%m-%d %H:%M:%S")
        line = (
            f"{first:<{width}}  {one_line(entry.workflow, 20):<20}  {entry.status:<9}  "
            f"{started:<19}  {format_duration(entry.duration):>10}  {entry.tokens:>6}"
        )
        if node is not None and node.forked_at:
            origin = "" if node.depth else f" of {node.forked_from}"  # its original not listed
            line += f"  {node.forked_at}{origin}"
        print(line.rstrip())
    return 0


def _fork_origins(store: Any, entries: Any) -> dict[str, tuple[str, str]]:
    """run id -> (the run it was forked from, `STEP[#TURN]`) for the forks among `entries`
    (read from their states: as many as the history lists)."""
    from awf_nb.errors import AwfError
    from awf_nb.frontends.run_tree import forked_from

    origins: dict[str, tuple[str, str]] = {}
    for entry in entries:
        try:
            state = store.load_state(entry.run_id)
        except (AwfError, OSError, ValueError):  # a damaged or removed run: shown as a root
            continue
        parent, at = forked_from(state)
        if parent:
            origins[entry.run_id] = (parent, at)
    return origins
