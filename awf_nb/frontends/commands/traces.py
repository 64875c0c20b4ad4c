"""`awf trace RUN_ID|EVAL_ID`: a stored run's trace, or an eval's runs' traces
(docs/observability.md) — printed or written as OTLP/JSON lines (`--export otlp-json
[-o FILE]`), or sent to a collector (`--send`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from awf_nb.errors import UserError
from awf_nb.frontends.commands.flags import configure_storage
from awf_nb.frontends.commands.table import command


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_id",
        metavar="RUN_ID|EVAL_ID",
        help="the run, or an eval (its runs' traces); a unique prefix is enough",
    )
    parser.add_argument(
        "--export",
        choices=["otlp-json"],
        default="otlp-json",
        help="the format: OTLP/JSON, an ExportTraceServiceRequest per line (default)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    parser.add_argument(
        "--send",
        metavar="ENDPOINT",
        help="send the trace to this OpenTelemetry collector over OTLP/HTTP instead",
    )
    configure_storage(parser)


@command("trace", "print, write or send a stored run's trace (OpenTelemetry)", _configure)
def cmd_trace(args: argparse.Namespace) -> int:
    from awf_nb.store import Store
    from awf_nb.traces import TRACE_FILE

    store = Store(args.storage)
    run_ids, what = _runs(store, args.run_id)
    paths = [store.run_dir(run_id) / TRACE_FILE for run_id in run_ids]
    missing = [path for path in paths if not path.is_file()]
    if missing:
        raise UserError(
            f"{what}: no trace file {missing[0]}: the run was made with --no-trace-file, "
            "AWF_TRACE_FILE=0 or an awf without traces"
        )
    text = "".join(path.read_text(encoding="utf-8") for path in paths)
    run_id = what
    if args.send:
        import os

        from awf_nb.traces.live import headers_from, send, traces_url
        from awf_nb.traces.otlp_json import decode

        spans = list(decode(text.splitlines()))
        url = traces_url(args.send)
        failed = send(spans, url, headers_from(os.environ))
        if failed:
            raise UserError(f"{failed} of {len(spans)} spans did not reach {url}")
        print(f"sent {len(spans)} spans of {run_id} to {url}", file=sys.stderr)
        return 0
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _runs(store: Any, given: str) -> tuple[list[str], str]:
    """The runs `given` names (a run id, or an eval id: its runs), and how to say it."""
    try:
        return [store.resolve_run_id(given)], f"run {store.resolve_run_id(given)}"
    except UserError as not_a_run:
        from awf_nb.evals.storage import EvalFolder

        try:
            folder = EvalFolder.open(store, given)
        except UserError:
            raise not_a_run from None
        return [row.run_id for row in folder.rows() if row.run_id], f"eval {folder.eval_id}"
