"""The one reader of a stored eval for reports: rows by variant, cases, conversations.

A row may carry a `variant` (evals that run several versions of a workflow on the same
cases); an eval without variants has one, named "" here. Conversations are read from the
runs' stored states, at most `MAX_MESSAGES` messages of at most `MAX_MESSAGE_CHARS`
characters each per run, so a report of a huge eval stays a file a browser opens.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from awf_nb.errors import UserError
from awf_nb.evals.results import EvalResult, EvalRow, EvalSummary
from awf_nb.evals.storage import RESULTS, EvalFolder, _numbered_records
from awf_nb.secrets import Masker
from awf_nb.store import Store

MAX_MESSAGES = 200  # per run, the rest is said to be left out
MAX_MESSAGE_CHARS = 20_000  # per message, the rest cut with a note


@dataclass
class Message:
    step: str
    role: str
    speaker: str
    content: str


@dataclass
class ReportRow:
    """One (variant, case, epoch): its row and its conversation."""

    variant: str
    row: EvalRow
    messages: list[Message] = field(default_factory=list)
    left_out: int = 0  # messages not kept (past MAX_MESSAGES)
    note: str = ""  # why there is no conversation

    @property
    def case(self) -> str:
        return self.row.case

    def reasons(self, why: str = " — {}") -> list[str]:
        """Why the row did not pass: its error, then each scorer that did not pass, with
        its explanation written in `why` (the one list every report format shows)."""
        found = []
        if self.row.error:
            found.append(f"{self.row.error_kind or 'error'}: {self.row.error}")
        for name, value in self.row.scores.items():
            if value.passed is not True:
                explanation = value.error or value.detail
                found.append(
                    f"{name}: {value.outcome}" + (why.format(explanation) if explanation else "")
                )
        return found

    @property
    def epoch(self) -> int:
        return self.row.epoch


@dataclass
class ReportData:
    """A stored eval, as every report format reads it."""

    result: EvalResult
    variants: list[str]  # in first-seen order; [""] without variants
    rows: list[ReportRow]
    cases: dict[str, dict[str, Any]]  # case id -> its columns
    comparison: Any = None  # the stored comparison object, when the eval has one

    @property
    def eval_id(self) -> str:
        return self.result.eval_id

    @property
    def has_variants(self) -> bool:
        return self.variants != [""]

    def summary(self, variant: str | None = None) -> EvalSummary:
        rows = [r.row for r in self.rows if variant is None or r.variant == variant]
        return EvalSummary.of(rows, self.result.scorers, self.result.epochs)

    def by_variant(self, variant: str) -> list[ReportRow]:
        return [r for r in self.rows if r.variant == variant]

    def pairs(self) -> dict[tuple[str, int], dict[str, ReportRow]]:
        """(case, epoch) -> variant -> its row: what sits side by side."""
        found: dict[tuple[str, int], dict[str, ReportRow]] = {}
        for r in self.rows:
            found.setdefault((r.case, r.epoch), {})[r.variant] = r
        return found


def load_report(
    eval_id: str,
    *,
    storage: Store | str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    conversations: bool = True,
) -> ReportData:
    """Read eval `eval_id` (an id or a unique prefix) for a report. Every text is masked
    with the secret-named variables of `env` (default: this process's environment)."""
    store = storage if isinstance(storage, Store) else Store(storage)
    folder = EvalFolder.open(store, eval_id)
    result = folder.result()
    masker = Masker.from_sources({}, os.environ if env is None else env)
    # The variant of each row is read from the stored lines themselves: the row class
    # may not know the field (an eval written by a newer awf reads the same).
    keyed: dict[tuple[str, str, int], EvalRow] = {}
    for _, record in _numbered_records(folder.path / RESULTS):  # checked by result()
        row = EvalRow.from_dict(masker.mask_data(record) if masker else record)
        keyed[(str(record.get("variant") or ""), row.case, row.epoch)] = row
    # the eval's own order (the first is the baseline), else the order rows came in
    variants = list(result.variants) or list(dict.fromkeys(v for v, _, _ in keyed)) or [""]
    result.rows = list(keyed.values())
    order = {v: i for i, v in enumerate(variants)}
    report_rows = [ReportRow(variant, row) for (variant, _, _), row in keyed.items()]
    report_rows.sort(key=lambda r: (r.case, r.epoch, order[r.variant]))
    if conversations:
        for r in report_rows:
            _read_conversation(store, r, masker)
    cases: dict[str, dict[str, Any]] = {}
    try:
        for case in folder.cases():
            cases[case.id] = masker.mask_data(dict(case.row)) if masker else dict(case.row)
    except (UserError, KeyError, TypeError, ValueError):
        cases = {}
    comparison = getattr(result, "comparison", None)
    if comparison is None and len(result.variants) > 1:
        # each variant against the first, as `awf eval` showed it
        comparison = "\n\n".join(c.to_text() for c in result.comparisons())
    return ReportData(result, variants, report_rows, cases, comparison)


def _read_conversation(store: Store, r: ReportRow, masker: Masker) -> None:
    from awf_nb.evals.scorers import conversation_messages

    if not r.row.run_id:
        r.note = "the run did not start"
        return
    try:
        state = store.load_state(r.row.run_id)
    except UserError as exc:
        r.note = f"its run cannot be read: {exc.message}"
        return
    found = conversation_messages(state)
    r.left_out = max(0, len(found) - MAX_MESSAGES)
    for m in found[:MAX_MESSAGES]:
        content = m["content"]
        if len(content) > MAX_MESSAGE_CHARS:
            cut = len(content) - MAX_MESSAGE_CHARS
            content = content[:MAX_MESSAGE_CHARS] + f"… ({cut} more characters)"
        if masker:
            content = masker.mask(content)
        r.messages.append(Message(m["step"], m["role"], m["speaker"] or m["role"], content))
