"""The eval as an Inspect AI log (its documented log format), so `inspect view` opens it.

Written without Inspect installed: a `.json` file is one `EvalLog` object; a `.eval` file
is Inspect's zip of `header.json` (the log without its samples) and one
`samples/<id>_epoch_<n>.json` per sample. Each (case, epoch) is a sample — with variants,
its id is `<variant>/<case>` — holding the conversation as messages, each scorer's score
(pass `C`, fail `I`, the number when there is one, as `value`; the judge's reason as
`explanation`), the run's tokens as model usage, and the run's id and status as metadata.
Per scorer, the results hold its accuracy (pass rate) and mean score.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

from awf_nb.errors import UserError
from awf_nb.evals.report.load import ReportData, ReportRow

LOG_VERSION = 2
MODEL = "awf/workflow"


def _time(text: str) -> str:
    # Inspect reads ISO 8601 with an offset.
    return text.replace("Z", "+00:00") if text else ""


def _usage(tokens: int) -> dict[str, Any]:
    # awf counts a run's tokens as one total: Inspect's input/output split is unknown (0).
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": tokens}


def sample_id(r: ReportRow, data: ReportData) -> str:
    return f"{r.variant}/{r.case}" if data.has_variants else r.case


def _score(value: Any) -> dict[str, Any]:
    verdict = {True: "C", False: "I", None: "E"}[value.passed]
    score: dict[str, Any] = {"value": verdict, "answer": None}
    if value.score is not None:
        score["metadata"] = {"score": value.score}
    if value.error or value.detail:
        score["explanation"] = value.error or value.detail
    return score


def _sample(r: ReportRow, data: ReportData) -> dict[str, Any]:
    messages = [
        {
            "role": m.role,
            "content": m.content,
            "source": "generate" if m.role == "assistant" else "input",
        }
        for m in r.messages
    ]
    first_user = next((m.content for m in r.messages if m.role == "user"), "")
    sample: dict[str, Any] = {
        "id": sample_id(r, data),
        "epoch": r.epoch,
        "input": first_user or json.dumps(data.cases.get(r.case, {}), ensure_ascii=False),
        "target": "",
        "messages": messages,
        "output": {
            "model": MODEL,
            "choices": [],
            "completion": next(
                (m.content for m in reversed(r.messages) if m.role == "assistant"), ""
            ),
            "usage": _usage(r.row.tokens),
        },
        "scores": {name: _score(v) for name, v in r.row.scores.items()},
        "metadata": {
            "case": r.case,
            "variant": r.variant,
            "run_id": r.row.run_id,
            "status": r.row.status,
            "stopped_by": r.row.stopped_by,
            "turns": r.row.turns,
            "passed": r.row.passed,
            "judge_tokens": r.row.judge_tokens,
        },
        "model_usage": {MODEL: _usage(r.row.tokens)},
        "total_time": r.row.seconds,
    }
    if r.row.error:
        sample["error"] = {"message": r.row.error, "traceback": "", "traceback_ansi": ""}
    return sample


def inspect_log(data: ReportData) -> dict[str, Any]:
    """The eval as Inspect's `EvalLog`, a JSON-ready dict (samples included)."""
    result = data.result
    summary = data.summary()
    case_ids = list(dict.fromkeys(sample_id(r, data) for r in data.rows))
    scores = []
    for name, _kind in result.scorers:
        s = summary.scorers[name]
        metrics = {"accuracy": {"name": "accuracy", "value": s.pass_rate or 0.0}}
        if s.mean_score is not None:
            metrics["mean"] = {"name": "mean", "value": s.mean_score}
        scores.append({"name": name, "scorer": name, "scored_samples": s.passed + s.failed,
                       "unscored_samples": s.errors, "params": {}, "metrics": metrics})  # fmt: skip
    status = {"completed": "success", "cancelled": "cancelled", "running": "started"}.get(
        result.status, "error"
    )
    created = _time(result.created_at)
    return {
        "version": LOG_VERSION,
        "status": status,
        "eval": {
            "eval_id": result.eval_id,
            "run_id": result.eval_id,
            "created": created,
            "task": result.workflow,
            "task_id": result.eval_id,
            "task_version": 0,
            "task_attribs": {},
            "task_args": {},
            "dataset": {
                "name": "cases",
                "samples": len(case_ids),
                "sample_ids": case_ids,
                "shuffled": False,
            },
            "model": MODEL,
            "model_args": {},
            "config": {"epochs": result.epochs},
            "packages": {"awf-nb": _version()},
            "metadata": {"awf_eval_id": result.eval_id, "variants": data.variants},
        },
        "plan": {"name": "plan", "steps": [], "config": {}},
        "results": {
            "total_samples": len(data.rows),
            "completed_samples": sum(1 for r in data.rows if r.row.passed is not None),
            "scores": scores,
        },
        "stats": {
            "started_at": created,
            "completed_at": _time(result.finished_at),
            "model_usage": {MODEL: _usage(summary.tokens)},
        },
        "samples": [_sample(r, data) for r in data.rows],
    }


def _version() -> str:
    from awf_nb._version import __version__

    return __version__


def write_inspect_log(data: ReportData, path: str | os.PathLike[str]) -> Path:
    """Write the log to `path`: `.json` one JSON object, `.eval` Inspect's zip."""
    target = Path(path)
    log = inspect_log(data)
    if target.suffix == ".json":
        target.write_text(json.dumps(log, ensure_ascii=False, indent=2), encoding="utf-8")
        return target
    if target.suffix != ".eval":
        raise UserError(
            f"{target}: an Inspect log is a .eval or .json file",
            hint="name the output FILE.eval or FILE.json",
        )
    samples = log.pop("samples")
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", json.dumps(log, ensure_ascii=False))
        for number, sample in enumerate(samples, start=1):
            # numbered: two ids that differ only in characters `_safe` replaces stay apart
            name = f"samples/{number}_{_safe(str(sample['id']))}_epoch_{sample['epoch']}.json"
            zf.writestr(name, json.dumps(sample, ensure_ascii=False))
    return target


def _safe(text: str) -> str:
    # A member name, not a path: no folders, no dots climbing out.
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
