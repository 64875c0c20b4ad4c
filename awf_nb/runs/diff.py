"""Two runs side by side (`awf runs-diff A B`): the steps in the order they ran, each step's
output and conversation messages (tool calls included), from where the runs diverge.

`diff_runs(a, b)` compares two `RunState`s and returns a `RunsDiff`: the rows both runs
share are counted, not listed; the first row that differs is marked `first`. Only stored
text is compared (already masked by the engine)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState

__all__ = ["DiffRow", "RunsDiff", "diff_runs"]

MAX_ROWS = 200  # rows shown after the divergence (a long run's tail is counted, not listed)
HTML_CELL_CHARS = 2_000  # of each run's text in one row of the HTML view


@dataclass(frozen=True)
class DiffRow:
    """One place in both runs: `where` (`step`, `step#N` for a message), each run's text
    there ("" when that run has none), and whether it is the first difference."""

    where: str
    a: str
    b: str
    first: bool = False


@dataclass(repr=False)
class RunsDiff:
    run_a: str
    run_b: str
    same: int  # rows equal before the divergence
    rows: list[DiffRow] = field(default_factory=list)
    more: int = 0  # rows left out after MAX_ROWS

    @property
    def identical(self) -> bool:
        return not self.rows

    def to_json(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "same": self.same,
            "identical": self.identical,
            "rows": [asdict(row) for row in self.rows],
            "more": self.more,
        }

    def to_text(self, width: int = 100) -> str:
        if self.identical:
            return (
                f"runs {self.run_a} and {self.run_b} are the same ({self.same} steps and messages)"
            )
        column = max(20, (width - 24) // 2)
        lines = [
            f"{self.same} steps and messages the same; the runs diverge at {self.rows[0].where}",
            f"{'':22}  {self.run_a[:column]:<{column}}  {self.run_b[:column]}",
        ]
        for row in self.rows:
            mark = ">>" if row.first else "  "
            a, b = _one_line(row.a, column), _one_line(row.b, column)
            lines.append(f"{mark}{row.where[:20]:<20}  {a:<{column}}  {b}")
        if self.more:
            lines.append(f"  … {self.more} more rows")
        return "\n".join(lines)

    def to_html(self) -> str:
        """The same as a table (the notebook's view; styled by the run panel's CSS when
        shown in a panel): the first difference marked `awf-diff-first`."""
        a, b = escape(self.run_a), escape(self.run_b)
        head = f"<div class='awf-diff-head'>runs <code>{a}</code> and <code>{b}</code>: "
        if self.identical:
            return head + f"the same ({self.same} steps and messages)</div>"
        head += (
            f"{self.same} steps and messages the same; they diverge at "
            f"<b>{escape(self.rows[0].where)}</b></div>"
        )
        rows = [f"<tr><th></th><th>{a}</th><th>{b}</th></tr>"]
        for row in self.rows:
            css = " class='awf-diff-first'" if row.first else ""
            rows.append(
                f"<tr{css}><td class='awf-diff-where'>{escape(row.where)}</td>"
                f"<td>{escape(_cut(row.a))}</td><td>{escape(_cut(row.b))}</td></tr>"
            )
        more = f"<div class='awf-note'>… {self.more} more rows</div>" if self.more else ""
        return f"{head}<table class='awf-diff-table'>{''.join(rows)}</table>{more}"

    def _repr_html_(self) -> str:  # a notebook shows the table
        return self.to_html()

    def __repr__(self) -> str:  # what a notebook's plain-text view and print() show
        return self.to_text()


def _cut(text: str) -> str:
    return text if len(text) <= HTML_CELL_CHARS else text[: HTML_CELL_CHARS - 1] + "…"


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _rows(state: RunState) -> list[tuple[str, str]]:
    """(where, text) of a run: each step it ran, in order, with its messages."""
    rows: list[tuple[str, str]] = []
    for name in dict.fromkeys(state.executed):
        step = state.steps.get(name)
        if step is None:
            continue
        if step.conversation is not None:
            number = 0
            for turn in step.conversation.turns:
                if turn.role == "system":
                    continue
                number += 1
                text = f"{turn.role}: {turn.content}"
                for call in turn.tool_calls:
                    text += f" [tool {call.get('name', '')}({call.get('arguments', '')})]"
                rows.append((f"{name}#{number}", text))
        rows.append((name, f"{step.status}: {step.output}".rstrip()))
    return rows


def diff_runs(a: RunState, b: RunState) -> RunsDiff:
    """Where runs `a` and `b` differ, from the first difference on."""
    rows_a, rows_b = _rows(a), _rows(b)
    same = 0
    while same < min(len(rows_a), len(rows_b)) and rows_a[same] == rows_b[same]:
        same += 1
    result = RunsDiff(a.run_id, b.run_id, same)
    rest = max(len(rows_a), len(rows_b)) - same
    for offset in range(min(rest, MAX_ROWS)):
        i = same + offset
        where_a, text_a = rows_a[i] if i < len(rows_a) else ("", "")
        where_b, text_b = rows_b[i] if i < len(rows_b) else ("", "")
        where = (
            where_a
            if where_a == where_b or not where_b
            else where_b
            if not where_a
            else f"{where_a} | {where_b}"
        )
        result.rows.append(DiffRow(where, text_a, text_b, first=offset == 0))
    result.more = max(0, rest - MAX_ROWS)
    return result
