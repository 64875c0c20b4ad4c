"""An eval's result as static HTML (`EvalResult._repr_html_`): the summary (one per
variant), the comparison of variants, then the rows, failed ones first. Plain HTML, no
script: a saved notebook shows it anywhere. Every text from the eval is untrusted (a case
id, a scorer's error, a judge's answer): escaped, its bidirectional controls shown."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from awf_nb.evals.results import ordered_rows, row_cells, table_header
from awf_nb.safe_text import mark_bidi

if TYPE_CHECKING:
    from awf_nb.evals.results import EvalResult

# Colours from JupyterLab's theme variables (with fallbacks for other renderers), so the
# table reads in light and dark themes alike.
_COLOURS = {
    "pass": "var(--jp-success-color1, #388e3c)",
    "fail": "var(--jp-error-color1, #d32f2f)",
    "error": "var(--jp-layout-color3, #9e9e9e)",
    "running": "var(--jp-brand-color1, #1976d2)",
    "cancelled": "var(--jp-warn-color1, #f57c00)",
}


def _escape(text: str) -> str:
    """Text for the HTML table: escaped, and its bidirectional-text controls shown, not
    obeyed (a case id, a scorer's error or a judge's answer is untrusted: `mark_bidi`)."""
    return html.escape(mark_bidi(text))


def html_row(cells: Sequence[str], outcome: str, run_id: str = "") -> str:
    colour = _COLOURS.get(outcome, "inherit")
    tds = "".join(f'<td style="padding:2px 8px;text-align:left">{_escape(c)}</td>' for c in cells)
    data = f' data-run-id="{_escape(run_id)}"' if run_id else ""
    return (
        f'<tr class="awf-eval-row awf-eval-{outcome}"{data} '
        f'style="border-left:4px solid {colour}">{tds}</tr>'
    )


def results_html(result: EvalResult) -> str:
    """The static table: summary first, then the rows, failed ones first. Plain HTML
    (no script): a saved notebook shows it anywhere."""
    variants = bool(result.variants)
    head = "".join(
        f'<th style="padding:2px 8px;text-align:left">{_escape(h)}</th>'
        for h in table_header(result.scorers, variants)
    )
    body = "".join(
        html_row(row_cells(row, result.scorers, variants), row.outcome, row.run_id)
        for row in ordered_rows(result.rows)
    )
    title = (
        f"eval {_escape(result.eval_id)} of {_escape(result.workflow)} — {_escape(result.status)}"
    )
    blocks = [(name, result.variant(name)) for name in result.variants] or [("", result)]
    summaries = "".join(_summary_html(part, name) for name, part in blocks)
    compared = "".join(
        f'<pre class="awf-eval-comparison">{_escape(c.to_text())}</pre>'
        for c in result.comparisons()
    )
    return (
        '<div class="awf-eval-results">'
        f"<div><b>{title}</b></div>{summaries}{compared}"
        f'<table class="awf-eval-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        "</table></div>"
    )


def _summary_html(result: EvalResult, variant: str) -> str:
    """One summary table (a variant's, in an eval with variants) and its totals line."""
    summary = result.summary
    summary_lines = summary.table()
    summary_head = "".join(
        f'<th style="padding:2px 8px;text-align:left">{_escape(h)}</th>' for h in summary_lines[0]
    )
    summary_body = "".join(
        "<tr>" + "".join(f'<td style="padding:2px 8px">{_escape(c)}</td>' for c in line) + "</tr>"
        for line in summary_lines[1:]
    )
    name = f"<div><b>variant {_escape(variant)}</b></div>" if variant else ""
    return (
        f'{name}<table class="awf-eval-summary"><thead><tr>{summary_head}</tr></thead>'
        f"<tbody>{summary_body}</tbody></table>"
        f"<div>{_escape(summary.totals_line())}</div>"
    )
