"""The eval commands of the `awf` command line: `awf eval`, `awf evals`, `awf eval-show`,
`awf eval-report`, `awf eval-export`.

Each registers itself with `@command(...)`, as every command does (`table.py`). Heavy
modules are imported inside the handlers: `awf --help` stays instant.

Exit status of `awf eval`: 0 when every run passed, 3 when a run failed or errored (the
results are printed either way), 130 when cancelled (resume it with `--resume EVAL_ID`),
1 / 2 for a bad command line or eval file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from awf_nb.errors import EXIT_CANCELLED, EXIT_EXECUTION, EXIT_USER, UserError
from awf_nb.frontends.commands.table import command


def _storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="DIR", help="where runs and evals are stored")


def _configure_eval(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="the eval file (*.eval.yaml)")
    parser.add_argument("--epochs", type=int, metavar="N", help="runs per case (pass^k over them)")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N cases")
    parser.add_argument("--concurrency", type=int, metavar="N", help="runs in flight at once")
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument(
        "--record", metavar="DIR", help="write DIR/<case>-<epoch>.cassette.jsonl for every run"
    )
    cassette.add_argument(
        "--replay", metavar="DIR", help="serve every run from its cassette in DIR (no model)"
    )
    cassette.add_argument(
        "--record-missing", metavar="DIR", help="replay the cassettes DIR has, record the rest"
    )
    parser.add_argument(
        "--resume", metavar="EVAL_ID", help="finish an interrupted eval: only the runs not done"
    )
    parser.add_argument("--seed", type=int, metavar="N", help="the eval's sampling seed")
    parser.add_argument(
        "--budget",
        type=float,
        metavar="USD",
        help="stop starting runs once the eval has cost this much (with pricing:); "
        "with --resume, a larger budget continues an eval stopped at its budget",
    )
    parser.add_argument(
        "--executor", default="local", choices=["local", "ray"], help="where runs execute"
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="--executor ray: the Ray cluster (HOST:PORT, ray://HOST:PORT; default: Ray's own)",
    )
    parser.add_argument(
        "--workers", type=int, metavar="N", help="--executor ray: worker processes (default: CPUs)"
    )
    parser.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="RULE",
        help="a gate to hold (repeatable): 'passed >= 80%%', 'SCORER.mean >= 3.5'; "
        "exit 3 when one fails",
    )
    parser.add_argument(
        "--variant",
        action="append",
        metavar="NAME",
        help="of the eval file's variants, run this one (repeatable; default: every variant)",
    )
    parser.add_argument(
        "--vs-eval",
        metavar="EVAL_ID",
        help="compare with an earlier eval of the same cases, epochs and seed (the baseline)",
    )
    parser.add_argument("--json", action="store_true", help="print only the results, as JSON")
    parser.add_argument(
        "--otlp",
        metavar="ENDPOINT",
        help="send every run's trace to this OpenTelemetry collector over OTLP/HTTP "
        "(default: $AWF_OTLP_ENDPOINT)",
    )
    parser.add_argument(
        "--trace-content", action="store_true", help="put message contents (masked) on the spans"
    )
    _storage(parser)


@command("eval", "run an eval: a workflow over a dataset of cases, scored", _configure_eval)
def cmd_eval(args: argparse.Namespace) -> int:
    """Run a workflow over every case of a dataset, score each run, print the results.

    FILE is an eval file: the workflow, the dataset, the inputs and simulated user of a
    case, the scorers, the epochs. Each (case, epoch) is an ordinary run (`awf status
    RUN_ID`); the eval keeps its rows in the store, so `--resume EVAL_ID` finishes an
    interrupted eval and `awf eval-show EVAL_ID` shows it again.
    """
    from awf_nb.evals.api import prepare_eval, prepare_resume

    # Ctrl-C / SIGTERM while the eval is read and its folder written: kept, and the eval
    # is cancelled as soon as it exists (exit 130, resumable), not killed half written.
    # The eval's own handlers take over from these while they are still in place, so no
    # signal falls between the two.
    from awf_nb.evals.gates import parse_gates

    extra = parse_gates(args.gate)
    with _held_signals() as held:
        run = _prepare(args, prepare_eval, prepare_resume)
        baseline = _baseline(args, run)
        return _execute(run, json_only=args.json, held=held, gates=extra, baseline=baseline)


def _prepare(args: argparse.Namespace, prepare_eval: Any, prepare_resume: Any) -> Any:
    if args.resume is not None:
        given = [flag for flag, value in (("FILE", args.file), ("--epochs", args.epochs),
                 ("--limit", args.limit), ("--seed", args.seed), ("--record", args.record),
                 ("--replay", args.replay), ("--record-missing", args.record_missing),
                 ("--variant", args.variant))
                 if value is not None]  # fmt: skip
        if given:
            raise UserError(
                f"--resume continues an eval as it was started: {', '.join(given)} cannot "
                "change it (only --concurrency can)"
            )
        run = prepare_resume(
            args.resume, concurrency=args.concurrency, storage=args.storage,
            ray_address=args.ray_address, workers=args.workers, budget=args.budget,
        )  # fmt: skip
    else:
        if args.file is None:
            raise UserError("awf eval needs an eval FILE (or --resume EVAL_ID)")
        run = prepare_eval(
            args.file,
            epochs=args.epochs,
            limit=args.limit,
            concurrency=args.concurrency,
            seed=args.seed,
            record=args.record,
            replay=args.replay,
            record_missing=args.record_missing,
            executor=args.executor,
            ray_address=args.ray_address,
            workers=args.workers,
            storage=args.storage,
            budget=args.budget,
            variants=args.variant,
        )
    run.otlp, run.trace_content = args.otlp, args.trace_content
    return run


@contextlib.contextmanager
def _held_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM noted (the list of those received), not acted on, inside."""
    held: list[int] = []
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, lambda n, _f: held.append(n))
    try:
        yield held
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def _baseline(args: argparse.Namespace, run: Any) -> Any:
    """`--vs-eval EVAL_ID`: the earlier eval, checked to pair with this one."""
    if args.vs_eval is None:
        return None
    from awf_nb.evals.api import open_eval
    from awf_nb.evals.compare import check_pairing

    try:
        baseline = open_eval(args.vs_eval, storage=args.storage)
        check_pairing(baseline, run)
    except UserError:
        if args.resume is None and not run.done:  # the eval just made, nothing run: gone
            import shutil

            run.folder.unlock()
            shutil.rmtree(run.folder.path, ignore_errors=True)
        raise
    return baseline


def _execute(
    run: Any,
    *,
    json_only: bool,
    held: list[int] | None = None,
    gates: list[Any] | None = None,
    baseline: Any = None,
) -> int:
    from awf_nb.evals.compare import compare_results
    from awf_nb.evals.gates import check_result_gates, parse_gates
    from awf_nb.frontends.terminal.eval_progress import TerminalEvalProgress, run_eval_in_terminal

    all_gates = [*parse_gates(run.spec.file.gate, "gate"), *(gates or [])]
    progress = _Silent() if json_only else TerminalEvalProgress()
    result = run_eval_in_terminal(run, progress, held)
    comparison = None if baseline is None else compare_results(baseline, result)
    comparisons = variant_comparisons(result, all_gates)
    if comparison is not None:
        comparisons.update({"baseline": [comparison], baseline.eval_id: [comparison]})
    checked = check_result_gates(all_gates, result, comparisons)
    if json_only:
        data = result.as_dict()
        if result.variants and len(result.variants) > 1:
            data["comparisons"] = [c.as_dict() for c in comparisons[result.variants[0]]]
        if comparison is not None:
            data["comparison"] = comparison.as_dict()
        if checked:
            data["gates"] = [{"gate": g.gate.text, "holds": g.holds, "detail": g.detail}
                             for g in checked]  # fmt: skip
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        if comparison is not None:
            print(comparison.to_text())
        for one in checked:
            mark = {True: "gate holds ", False: "GATE FAILS ", None: "GATE UNDECIDED "}[one.holds]
            print(f"{mark} {one.gate.text}: {one.detail}")
    if result.status == "cancelled":
        return EXIT_CANCELLED
    if result.status == "stopped":
        if not json_only:
            print(stopped_line(result), file=sys.stderr)
        return EXIT_EXECUTION
    if not checked:  # no gate: every run passed
        return 0 if all(row.passed is True for row in result.rows) else EXIT_EXECUTION
    if any(one.holds is None for one in checked):
        return EXIT_USER
    return 0 if all(one.holds for one in checked) else EXIT_EXECUTION


def variant_comparisons(result: Any, gates: Sequence[Any] = ()) -> dict[str, list[Any]]:
    """The comparisons of an eval with variants, by baseline: every other variant against
    the first (what the table shows) and against each variant a `no_regression` gate
    names. Each computed once; {} for an eval without two variants."""
    if len(result.variants) < 2:
        return {}
    found = {result.variants[0]: result.comparisons()}
    for gate in gates:
        name = getattr(gate, "no_regression", "")
        if name and name in result.variants and name not in found:
            found[name] = result.comparisons(name)
    return found


def stopped_line(result: Any) -> str:
    """What a person is told of an eval stopped at its budget."""
    from awf_nb.evals.pricing import usd

    spent = result.summary.total_cost
    return (
        f"stopped: budget: eval {result.eval_id} spent {usd(spent)} of its budget of "
        f"{usd(result.budget)}; {len(result.rows)} of {result.total} runs done. Finish it "
        f"with: awf eval --resume {result.eval_id} --budget USD (a larger budget)"
    )


def _configure_evals(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", type=int, default=20, metavar="N", help="how many (default 20)")
    parser.add_argument("--json", action="store_true", help="print the evals as JSON")
    _storage(parser)


@command("evals", "list past evals", _configure_evals)
def cmd_evals(args: argparse.Namespace) -> int:
    """List past evals, newest first: id, workflow, when it started, status, runs done,
    pass rate and pass^k (--json: also each scorer's pass rate and when it stopped)."""
    from awf_nb.evals.api import list_evals
    from awf_nb.safe_text import terminal_safe
    from awf_nb.store import Store

    if args.n < 1:
        raise UserError(f"-n must be at least 1, got {args.n}")
    problems: list[str] = []
    results = list(list_evals(Store(args.storage), limit=args.n, problems=problems))
    for problem in problems:  # an unreadable eval is listed, and why is said here
        print(f"warning: {terminal_safe(problem)}", file=sys.stderr)
    if args.json:
        print(json.dumps([_listed(r) for r in results], indent=2))
        return 0
    if not results:
        print("no evals yet", file=sys.stderr)
        return 0
    from awf_nb.evals.results import percent

    print(
        f"{'EVAL ID':<23}  {'WORKFLOW':<20}  {'STARTED (UTC)':<19}  {'STATUS':<11}  "
        f"{'RUNS':>9}  {'PASSED':>6}  PASS^k"
    )
    for result in results:
        s = result.summary
        pass_k = " ".join(percent(s.pass_hat.get(k)) for k in range(1, s.epochs + 1))
        print(
            f"{result.eval_id:<23}  {terminal_safe(result.workflow)[:20]:<20}  "
            f"{_started(result.created_at):<19}  {result.status:<11}  "
            f"{f'{len(result.rows)}/{result.total}':>9}  {percent(s.pass_rate):>6}  {pass_k}"
        )
    return 0


def _configure_rescore(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("eval_id", metavar="EVAL_ID", help="the eval (a unique prefix is enough)")
    parser.add_argument(
        "--scorers", metavar="FILE", help="score with these scorers (a YAML file: scorers: [...])"
    )
    parser.add_argument("--json", action="store_true", help="print only the results, as JSON")
    _storage(parser)


@command(
    "eval-rescore",
    "score an eval's stored runs again (a new eval, no run started)",
    _configure_rescore,
)
def cmd_eval_rescore(args: argparse.Namespace) -> int:
    """Score the stored runs of EVAL_ID again, as a new eval over the same runs.

    No run is started and no model is called, except by judges. The new eval names the
    one it rescored (`rescored_from`); `awf eval-show NEW_ID` shows it. Exit 0 when every
    row passed, 3 otherwise.
    """
    import asyncio

    from awf_nb.evals.api import rescore

    result = asyncio.run(rescore(args.eval_id, scorers=args.scorers, storage=args.storage))
    if args.json:
        print(result.to_json())
    else:
        print(f"eval {result.eval_id}: the runs of eval {result.rescored_from} scored again")
        print(result.summary.to_text())
    return 0 if all(row.passed is True for row in result.rows) else EXIT_EXECUTION


class _Silent:
    """`--json`: nothing but the JSON at the end."""

    def eval_started(self, run: Any) -> None: ...

    def run_started(self, case: str, epoch: int, run_id: str, variant: str = "") -> None: ...

    def run_finished(self, row: Any) -> None: ...

    def eval_finished(self, result: Any) -> None: ...


def _started(created_at: str) -> str:
    """`2026-11-25T09:15:00.123456Z` as `2026-11-25 09:15:00` (as `awf history` shows)."""
    return created_at[:19].replace("T", " ")


def _listed(result: Any) -> dict[str, Any]:
    s = result.summary
    return {
        "eval_id": result.eval_id,
        "workflow": result.workflow,
        "created_at": result.created_at,
        "finished_at": result.finished_at,
        "status": result.status,
        "runs": len(result.rows),
        "total": result.total,
        "pass_rate": s.pass_rate,
        "pass_hat_k": {str(k): v for k, v in s.pass_hat.items()},
        "scorers": {name: scorer.pass_rate for name, scorer in s.scorers.items()},
    }


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("eval_id", metavar="EVAL_ID", help="the eval (a unique prefix is enough)")
    parser.add_argument("--case", metavar="ID", help="show this case's runs, conversation included")
    parser.add_argument("--failed", action="store_true", help="only runs that did not pass")
    parser.add_argument(
        "--vs",
        metavar="OTHER_EVAL",
        help="compare with another eval: flipped cases, differences with 95%% intervals",
    )
    parser.add_argument("--json", action="store_true", help="print as JSON")
    _storage(parser)


@command("eval-show", "show a past eval, one case's runs, or two evals compared", _configure_show)
def cmd_eval_show(args: argparse.Namespace) -> int:
    """Show a past eval: its summary and rows (failed first), one case's runs with their
    conversations (--case), or which cases flipped against another eval (--vs)."""
    from awf_nb.evals.api import open_eval
    from awf_nb.frontends.terminal.eval_progress import console as make_console
    from awf_nb.frontends.terminal.eval_progress import print_rows, print_summary
    from awf_nb.store import Store

    store = Store(args.storage)
    result = open_eval(args.eval_id, storage=store)
    if args.vs is not None:
        return _show_comparison(result, open_eval(args.vs, storage=store), args.json)
    rows = result.rows
    if args.case is not None:
        rows = [row for row in rows if row.case == args.case]
        if not rows:
            known = sorted({row.case for row in result.rows})
            from awf_nb.workflow.suggest import did_you_mean

            raise UserError(
                f'eval {result.eval_id} has no finished run of case "{args.case}"',
                hint=did_you_mean(args.case, known) or f"its cases: {', '.join(known[:20])}",
            )
    if args.failed:
        rows = [row for row in rows if row.passed is not True]
    if args.json:
        data = result.as_dict()
        data["rows"] = [row.as_dict() for row in rows]
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    console = make_console(sys.stdout)
    if args.case is not None:
        _show_case(rows, store, console)
        return 0
    print_rows(result, rows, console)
    print_summary(result, console)
    return 0


def _show_case(rows: list[Any], store: Any, console: Any) -> None:
    from rich.text import Text

    from awf_nb.evals.scorers import conversation_messages
    from awf_nb.frontends.terminal.eval_progress import failure_line
    from awf_nb.safe_text import terminal_safe

    for row in sorted(rows, key=lambda r: r.epoch):
        console.print(Text(f"── case {terminal_safe(row.case)} epoch {row.epoch}: {row.outcome}",
                           style="bold"))  # fmt: skip
        if row.passed is not True:
            console.print(failure_line(row))
        for name, value in row.scores.items():
            text = f"  {name}: {value.outcome}"
            if value.score is not None:
                text += f" (score {value.score:g})"
            if value.error or value.detail:
                text += f" — {value.error or value.detail}"
            console.print(Text(terminal_safe(text)))
        if not row.run_id:
            continue
        console.print(Text(f"  run {row.run_id} (awf status {row.run_id})", style="dim"))
        try:
            state = store.load_state(row.run_id)
        except UserError as exc:
            console.print(Text(f"  (its run cannot be read: {exc.message})", style="dim"))
            continue
        for message in conversation_messages(state):
            who = message["speaker"] or message["role"]
            console.print(Text(f"  {who}: ", style="bold"), end="")
            console.print(Text(terminal_safe(message["content"])))


def _show_comparison(before: Any, after: Any, json_only: bool) -> int:
    from awf_nb.evals.compare import compare, compare_results
    from awf_nb.evals.results import percent
    from awf_nb.safe_text import terminal_safe

    found = compare(before, after)
    statistics = compare_results(before, after)
    if json_only:
        print(json.dumps(
            {"before": before.eval_id, "after": after.eval_id,
             "comparison": statistics.as_dict(),
             "cases": [{"case": c.case, "before": c.before, "after": c.after,
                        "before_passed": c.before_passed, "after_passed": c.after_passed,
                        "flipped": c.flipped, "direction": c.direction} for c in found]},
            indent=2))  # fmt: skip
        return 0
    flipped = [c for c in found if c.flipped]
    a, b = before.summary, after.summary
    print(f"{before.eval_id} → {after.eval_id}: pass rate {percent(a.pass_rate)} → "
          f"{percent(b.pass_rate)}; {len(flipped)} cases flipped")  # fmt: skip
    if found:
        width = max(len(c.case) for c in found)
        for c in found:
            mark = {"better": "+", "worse": "-"}.get(c.direction, " ")
            print(
                f"{mark} {terminal_safe(c.case):<{width}}  {c.before or 'absent':<6} "
                f"{c.before_passed:>5}  →  {c.after or 'absent':<6} {c.after_passed:>5}"
            )
    for line in statistics.lines()[1:]:
        print(terminal_safe(line))
    return 0


def _configure_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("eval_id", metavar="EVAL_ID", help="the eval (a unique prefix is enough)")
    parser.add_argument(
        "--format", default="html", choices=["html", "markdown", "md", "junit"],
        help="html (one offline file, the default), markdown (a pull-request comment), "
        "junit (XML for CI)",
    )  # fmt: skip
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    _storage(parser)


@command(
    "eval-report",
    "a past eval as one HTML file, a Markdown comment or JUnit XML",
    _configure_report,
)
def cmd_eval_report(args: argparse.Namespace) -> int:
    """Write a past eval as a report: one self-contained HTML file (summary, every case,
    failures with their reasons, the variants' conversations side by side where they
    differ; it fetches nothing), a Markdown pull-request comment, or JUnit XML for CI."""
    from awf_nb.evals.report import load_report, render

    text = render(load_report(args.eval_id, storage=args.storage), args.format)
    _write_out(text, args.output)
    return 0


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("eval_id", metavar="EVAL_ID", help="the eval (a unique prefix is enough)")
    parser.add_argument("--format", default="inspect", choices=["inspect"], help="inspect")
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="FILE.eval or FILE.json"
    )
    _storage(parser)


@command(
    "eval-export", "a past eval as an Inspect AI log (inspect view opens it)", _configure_export
)
def cmd_eval_export(args: argparse.Namespace) -> int:
    """Export a past eval as an Inspect AI log (`.eval` or `.json`): its samples, scores,
    conversations and token usage; `inspect view` opens it."""
    from awf_nb.evals.report import load_report
    from awf_nb.evals.report.inspect_log import write_inspect_log

    data = load_report(args.eval_id, storage=args.storage)
    try:
        path = write_inspect_log(data, args.output)
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _write_out(text: str, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.write(text)
        return
    from pathlib import Path

    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
    print(f"wrote {output}", file=sys.stderr)


def validate_eval_file(name: str, *, strict: bool) -> tuple[str, list[Any], int] | None:
    """`awf validate` of an eval file: (path, problems, exit code); None when `name` is no
    eval file (by its suffix `.eval.yaml`, or a top-level `workflow:` and `dataset:`)."""
    from dataclasses import replace
    from pathlib import Path

    from awf_nb.errors import DefinitionError, Problem
    from awf_nb.evals.loader import is_eval_file, load_eval

    path = Path(name)
    if not path.is_file():
        return None
    if not is_eval_file(name):
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:65536]
        except OSError:
            return None
        if not is_eval_file(name, head):
            return None
    try:
        spec = load_eval(path)
        problems = list(spec.warnings)
    except DefinitionError as err:
        problems = err.problems
    except UserError as err:
        return name, [Problem(err.message, file=name, hint=err.hint)], err.exit_code
    if strict:
        problems = [replace(p, severity="error") for p in problems]
    code = DefinitionError.exit_code if any(p.severity == "error" for p in problems) else 0
    return name, problems, code
