"""The eval as one self-contained HTML page: opens from disk, fetches nothing.

Everything is inline (a `<style>` and a small `<script>` that only filters rows), the page
forbids every fetch in its own Content-Security-Policy (`default-src 'none'`), and every
text from the eval (case ids, conversations, scorers' reasons) is escaped with its
bidirectional-text controls shown, not obeyed (`results._escape`). Conversations are
plain text (`white-space: pre-wrap`), not rendered Markdown: nothing a model wrote becomes
an element.
"""

from __future__ import annotations

from awf_nb.engine.summary import format_duration
from awf_nb.evals.report.load import ReportData, ReportRow
from awf_nb.evals.results import score_cell
from awf_nb.evals.results_html import _escape

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
table{border-collapse:collapse;margin:.5em 0}
th,td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd;vertical-align:top}
tr.pass td:first-child{border-left:4px solid #388e3c}
tr.fail td:first-child{border-left:4px solid #d32f2f}
tr.error td:first-child{border-left:4px solid #9e9e9e}
.pass{color:#2e7d32}.fail{color:#c62828}.error{color:#757575}
.pair{display:grid;grid-template-columns:repeat(var(--n),minmax(0,1fr));gap:1em}
.conv{border:1px solid #ccc;border-radius:4px;padding:.5em}
.msg{margin:.3em 0;white-space:pre-wrap;overflow-wrap:anywhere}
.msg b{white-space:normal}
.user{background:#f3f6fb}.assistant{background:#f7f7f2}
.note{color:#666;font-style:italic}
details{margin:.4em 0}
"""

# Only filtering (no fetch, no eval): the CSP below allows this script by its hash-free
# 'unsafe-inline', and nothing else at all.
_SCRIPT = """
document.getElementById('only-failed').addEventListener('change', function (e) {
  document.querySelectorAll('tr.case-row.pass').forEach(function (tr) {
    tr.style.display = e.target.checked ? 'none' : '';
  });
});
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def render_html(data: ReportData) -> str:
    result = data.result
    title = f"eval {result.eval_id} of {result.workflow}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>{_escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_escape(title)}</h1>",
        f"<p>status {_escape(result.status)}; started {_escape(result.created_at)}"
        f"{'; finished ' + _escape(result.finished_at) if result.finished_at else ''}</p>",
        _summary(data),
        _failures(data),
        _case_table(data),
        _conversations(data),
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts)


def _summary(data: ReportData) -> str:
    out = ["<h2>Summary</h2>"]
    for variant in data.variants:
        summary = data.summary(variant)
        if data.has_variants:
            out.append(f'<h3 class="variant">variant {_escape(variant)}</h3>')
        lines = summary.table()
        head = "".join(f"<th>{_escape(h)}</th>" for h in lines[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{_escape(c)}</td>" for c in line) + "</tr>" for line in lines[1:]
        )
        out.append(f'<table class="summary"><thead><tr>{head}</tr></thead>{body}</table>')
        out.append(f"<p>{_escape(summary.totals_line())}</p>")
    if data.comparison is not None:
        out.append(f"<h3>Comparison</h3><pre>{_escape(str(data.comparison))}</pre>")
    return "\n".join(out)


def _failures(data: ReportData) -> str:
    failed = [r for r in data.rows if r.row.passed is not True]
    if not failed:
        return "<h2>Failures</h2><p>none: every run passed</p>"
    items = []
    for r in failed:
        where = _label(r, data)
        reasons = "".join(f"<li>{_escape(reason)}</li>" for reason in r.reasons())
        items.append(
            f'<li class="{r.row.outcome}"><a href="#{_anchor(r)}">{_escape(where)}</a>: '
            f"{r.row.outcome}<ul>{reasons}</ul></li>"
        )
    return f'<h2>Failures ({len(failed)})</h2><ul class="failures">{"".join(items)}</ul>'


def _label(r: ReportRow, data: ReportData) -> str:
    text = f"case {r.case} epoch {r.epoch}"
    return f"{text} ({r.variant})" if data.has_variants else text


def _anchor(r: ReportRow) -> str:
    # Ids built from escaped text: an attribute value, quoted, never markup.
    return _escape(f"run-{r.variant}-{r.case}-{r.epoch}")


def _case_table(data: ReportData) -> str:
    scorers = data.result.scorers
    head = ["case", "epoch", *(["variant"] if data.has_variants else []), "outcome", "status",
            "turns", "tokens", "time", *[n for n, _ in scorers], "error"]  # fmt: skip
    rows = []
    for r in data.rows:
        row = r.row
        cells = [row.case, str(row.epoch), *([r.variant] if data.has_variants else []),
                 row.outcome, row.status or "-", str(row.turns), str(row.tokens),
                 format_duration(row.seconds),
                 *[score_cell(row.scores.get(n)) for n, _ in scorers], row.error]  # fmt: skip
        tds = "".join(f"<td>{_escape(c)}</td>" for c in cells)
        rows.append(
            f'<tr class="case-row {row.outcome}" data-case="{_escape(row.case)}">{tds}</tr>'
        )
    ths = "".join(f"<th>{_escape(h)}</th>" for h in head)
    return (
        "<h2>Cases</h2>"
        '<label><input type="checkbox" id="only-failed"> only runs that did not pass</label>'
        f'<table class="cases"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table>"
    )


def _conversation(r: ReportRow, data: ReportData) -> str:
    head = (
        f'<h4>{_escape(_label(r, data))}: <span class="{r.row.outcome}">{r.row.outcome}</span></h4>'
    )
    body = []
    for name, value in r.row.scores.items():
        why = value.error or value.detail
        text = f"{name}: {value.outcome}" + (
            f" (score {value.score:g})" if value.score is not None else ""
        )
        reason = f' — <span class="reason">{_escape(why)}</span>' if why else ""
        body.append(f'<div class="score">{_escape(text)}{reason}</div>')
    if r.note:
        body.append(f'<p class="note">{_escape(r.note)}</p>')
    for m in r.messages:
        body.append(
            f'<div class="msg {_escape(m.role)}"><b>{_escape(m.speaker)}:</b> '
            f"{_escape(m.content)}</div>"
        )
    if r.left_out:
        body.append(f'<p class="note">{r.left_out} more messages left out</p>')
    return f'<div class="conv" id="{_anchor(r)}">{head}{"".join(body)}</div>'


def _conversations(data: ReportData) -> str:
    out = ["<h2>Conversations</h2>"]
    for (case, epoch), by_variant in data.pairs().items():
        runs = [by_variant[v] for v in data.variants if v in by_variant]
        differ = len(runs) > 1 and len({_fingerprint(r) for r in runs}) > 1
        outcome = "pass" if all(r.row.passed is True for r in runs) else "fail"
        label = f"case {case} epoch {epoch}"
        if differ:
            label += " — the variants differ"
        # Variants side by side where they differ; otherwise the conversation once.
        shown = runs if differ else runs[:1]
        inner = "".join(_conversation(r, data) for r in shown)
        cls = "pair differ" if differ else "pair"
        opened = " open" if differ or outcome != "pass" else ""
        out.append(
            f'<details class="case {outcome}"{opened}><summary>{_escape(label)}</summary>'
            f'<div class="{cls}" style="--n:{len(shown)}">{inner}</div></details>'
        )
    return "\n".join(out)


def _fingerprint(r: ReportRow) -> tuple[object, ...]:
    return (
        r.row.outcome,
        tuple((m.role, m.content) for m in r.messages),
        tuple((n, v.outcome, v.score) for n, v in r.row.scores.items()),
    )


__all__ = ["render_html"]
