"""`%%awf eval`: run an eval from a notebook cell, with the live table.

    %%awf eval --epochs 2 --replay cassettes/
    workflow: ../workflows/chat.yaml
    dataset: personas.jsonl
    ...

The cell body is the eval file's YAML (paths relative to the working directory), or empty
with the eval file named on the line (`%%awf eval evals/chat.eval.yaml`). `--resume
EVAL_ID` finishes an interrupted eval. The result (`EvalResult`) is bound to `--out NAME`
(default `evaluation`). Like a `%%awf` run, the cell waits for the eval where an awaiting
cell still receives widget events (ipykernel >= 7.4: Stop and row clicks work while it
runs), else it starts the eval in the background (`await evaluation_task` waits for it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import keyword
import shlex
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser

from awf_nb.errors import AwfError
from awf_nb.frontends.notebook.handle import cell_error

DEFAULT_OUT = "evaluation"
CANCEL_GRACE_SECONDS = 10.0


def build_parser() -> MagicArgumentParser:
    parser = MagicArgumentParser(
        prog="%%awf eval",
        description="Run the eval in the cell body (its YAML), or the eval FILE.",
        add_help=True,
    )
    parser.add_argument("file", nargs="?", metavar="FILE", help="an eval file (empty body)")
    parser.add_argument("--epochs", type=int, metavar="N")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N cases")
    parser.add_argument("--concurrency", type=int, metavar="N")
    parser.add_argument("--seed", type=int, metavar="N")
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="DIR")
    cassette.add_argument("--replay", metavar="DIR")
    cassette.add_argument("--record-missing", metavar="DIR")
    parser.add_argument("--resume", metavar="EVAL_ID")
    parser.add_argument("--budget", type=float, metavar="USD", help="stop new runs past it")
    parser.add_argument(
        "--variant", action="append", metavar="NAME", help="of the eval's variants, this one"
    )
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    parser.add_argument("--ray-address", metavar="ADDR")
    parser.add_argument("--workers", type=int, metavar="N")
    parser.add_argument("--storage", metavar="DIR")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="NAME", help="bind the result")
    parser.add_argument("--wait", action=argparse.BooleanOptionalAction, default=None)
    return parser


async def run_eval_cell(shell: Any, line: str, body: str) -> None:
    """What a `%%awf eval …` cell does (after the transformer made it await)."""
    from awf_nb.frontends.notebook.eval_table import EvalTable
    from awf_nb.frontends.notebook.run_mode import choose_run_mode, kernel_version

    args = _parse(line)
    run = _prepare(args, body)
    table = EvalTable()
    table.display()
    task = asyncio.ensure_future(run.execute(table))
    table.attach(stop=task.cancel)
    shell.user_ns[f"{args.out}_task"] = task
    mode = choose_run_mode(needs_input=True, kernel_version=kernel_version(shell), wait=args.wait)
    if mode == "background":
        table.in_background = True
        task.add_done_callback(lambda t: _bind(shell, args.out, t, run))
        table.progress.value += f" (in the background: <code>await {args.out}_task</code>)"
        return
    try:
        await asyncio.wait({task})
    except (asyncio.CancelledError, KeyboardInterrupt):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
            await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
        raise UsageError(
            f"interrupted: eval {run.eval_id} was cancelled; finish it with "
            f"%%awf eval --resume {run.eval_id}"
        ) from None
    _bind(shell, args.out, task, run)


def _bind(shell: Any, out: str, task: asyncio.Future[Any], run: Any) -> None:
    if task.cancelled():
        shell.user_ns[out] = run.result()
        return
    error = task.exception()
    if error is not None:
        if isinstance(error, AwfError):
            raise cell_error(error)
        raise error
    shell.user_ns[out] = task.result()


def _parse(line: str) -> argparse.Namespace:
    try:
        argv = shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(f"%%awf eval: cannot split the line: {exc}") from None
    args = build_parser().parse_args(argv)
    if not args.out.isidentifier() or keyword.iskeyword(args.out):
        raise UsageError(f"--out {args.out}: not a Python variable name")
    return args


def _prepare(args: argparse.Namespace, body: str) -> Any:
    from awf_nb.evals.api import load_eval, load_eval_text, prepare_eval, prepare_resume

    try:
        if args.resume is not None:
            if body.strip() or args.file:
                raise UsageError("%%awf eval --resume EVAL_ID takes no eval (it continues one)")
            return prepare_resume(
                args.resume, concurrency=args.concurrency, storage=args.storage,
                ray_address=args.ray_address, workers=args.workers, budget=args.budget,
            )  # fmt: skip
        if body.strip():
            if args.file:
                raise UsageError("%%awf eval: give the eval in the cell body or as FILE, not both")
            # A leading newline makes YAML line N the cell's line N (line 1 is the magic).
            spec = load_eval_text("\n" + body, file="<cell>", base_dir=Path.cwd())
        elif args.file:
            spec = load_eval(args.file)
        else:
            raise UsageError("%%awf eval needs an eval: its YAML in the cell body, or a FILE")
        return prepare_eval(
            spec, epochs=args.epochs, limit=args.limit, concurrency=args.concurrency,
            seed=args.seed, record=args.record, replay=args.replay,
            record_missing=args.record_missing, executor=args.executor,
            ray_address=args.ray_address, workers=args.workers, storage=args.storage,
            budget=args.budget, variants=args.variant,
        )  # fmt: skip
    except AwfError as exc:
        raise cell_error(exc) from None
