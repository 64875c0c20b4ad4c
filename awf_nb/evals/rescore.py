"""`awf eval-rescore EVAL_ID [--scorers FILE]`: score an eval's stored runs again.

A new eval (its own id and folder) over the same runs: no run is started and no model is
called except by judges. Its manifest names the eval it scores (`rescored_from`), its rows
point at the same run ids; each row keeps the run's own figures (status, turns, tokens,
time, cost) and gets new scores from the scorers: those of `--scorers FILE` (a YAML file
holding `scorers:` as an eval file does, or just the list), else the eval's own. A
(case, epoch) whose run never started (a set-up error) or whose run is no longer in the
store keeps its error row.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from awf_nb.errors import DefinitionError, UserError
from awf_nb.evals.model import EvalFile, ScorerSpec
from awf_nb.evals.results import EvalResult, EvalRow
from awf_nb.evals.storage import EvalFolder, Manifest, now_text
from awf_nb.store import Store

MAX_SCORERS_FILE_BYTES = 1 << 20


def load_scorers(source: str | os.PathLike[str], *, cwd: Path | None = None) -> list[ScorerSpec]:
    """The scorers of a YAML file: `scorers: [...]` (as in an eval file) or the list
    alone; checked as an eval file's are (located errors)."""
    from awf_nb.evals.loader import _check_model, _unknown_keys, read_capped
    from awf_nb.workflow.loader import validate_model
    from awf_nb.workflow.yaml_locations import YamlDocument, parse_yaml, problem_at

    given = Path(os.fspath(source))
    path = given if given.is_absolute() else (cwd or Path.cwd()) / given
    label = os.fspath(given)
    data = read_capped(path, label, "scorers file", MAX_SCORERS_FILE_BYTES)
    doc = YamlDocument(file=label)
    parsed, root = parse_yaml(data.decode("utf-8", "replace"), doc)
    if not parsed:
        raise DefinitionError(doc.problems or [doc.problem("invalid scorers file", "")])
    if isinstance(root, list):
        root = {"scorers": root}
    if not isinstance(root, dict) or set(root) != {"scorers"}:
        doc.problems.append(
            problem_at(doc, None, "a scorers file holds `scorers:` (a list), as an eval file does")
        )
        raise DefinitionError(doc.problems)
    # validated as an eval file's scorers (a stand-in workflow and dataset: only the
    # scorers are looked at)
    root = {"workflow": "-", "dataset": "-", **root}
    _unknown_keys(root, EvalFile, "", doc)
    model = validate_model(EvalFile, root, "", doc)
    if model is None:
        raise DefinitionError(doc.problems)
    _check_model(model, doc)
    errors = [p for p in doc.problems if p.severity == "error"]
    if errors:
        raise DefinitionError(errors)
    if not model.scorers:
        raise UserError(f"scorers file {label} holds no scorer")
    return model.scorers


async def rescore_eval(
    eval_id: str,
    *,
    store: Store,
    scorers: list[ScorerSpec] | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> EvalResult:
    """Score the runs of eval `eval_id` again with `scorers` (default: its own), as a new
    eval; return the new eval's result."""
    from awf_nb.evals import run_setup
    from awf_nb.evals.executor import decide, score_row
    from awf_nb.evals.scorers import FinishedRun, ScoringContext
    from awf_nb.secrets import Masker

    source = EvalFolder.open(store, eval_id)
    old = source.manifest()
    if old.shown_status() == "running":
        raise UserError(f"eval {source.eval_id} is still running: rescore it when it has finished")
    resolved = source.resolved()
    file = EvalFile.model_validate(resolved)
    if scorers is not None:
        file = file.model_copy(update={"scorers": list(scorers)})
        resolved = {**resolved, "scorers": [
            s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in scorers
        ]}  # fmt: skip
    cases = {case.id: case for case in source.cases()}
    rows = source.rows()
    folder = EvalFolder.create(store)
    manifest = Manifest(
        **{
            **old.__dict__,
            "eval_id": folder.eval_id,
            "created_at": now_text(),
            "status": "running",
            "finished_at": "",
            "pid": 0,
            "pid_started": "",
            "scorers": [(s.name, s.kind) for s in file.scorers],
            "rescored_from": source.eval_id,
            "stopped": "",
        }
    )
    texts = {name: source.workflow_text(name) for name in old.variants}
    folder.write_start(manifest, resolved, source.workflow_text(), list(cases.values()), texts)
    folder.claim(manifest)
    base_dir = Path(old.base_dir)
    status = "cancelled"
    new_rows: list[EvalRow] = []
    try:
        for old_row in rows:
            row = EvalRow.from_dict(old_row.as_dict())
            case = cases.get(row.case)
            state = _state(store, row.run_id) if row.run_id and case is not None else None
            if state is not None and case is not None:
                row.scores, row.judge_tokens, row.judge_cost = {}, 0, None
                row.passed = None
                if row.error_kind in ("scorer", "limit") and row.status == "completed":
                    row.error, row.error_kind = "", ""  # decided again below
                finished = FinishedRun.of(
                    case, row.epoch, state, Masker(), seconds=row.seconds, cost=row.cost
                )
                providers = run_setup.ScoringProviders(run_setup._SeededFactory(row.seed))
                ctx = ScoringContext(
                    providers=providers, cwd=(cwd or Path.cwd()).resolve(),
                    env=run_setup.environment(env), base_dir=base_dir,
                    pricing=dict(file.pricing),
                )  # fmt: skip
                try:
                    await score_row(row, file.scorers, finished, ctx)
                finally:
                    await providers.aclose()
                decide(row, file.scorers, file.limits.max_cost)
            if row.run_id:
                folder.append_run(row.case, row.epoch, row.run_id, row.variant)
            folder.append_result(row)
            new_rows.append(row)
        status = "completed" if len(new_rows) >= old.total else old.status
        if status == "stopped":
            manifest.stopped = old.stopped
    finally:
        folder.finish(manifest, status)
    return folder.result()


def _state(store: Store, run_id: str) -> Any:
    try:
        return store.load_state(run_id)
    except Exception:  # a run removed from the store: its row is kept as it was
        return None
