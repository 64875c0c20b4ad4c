"""The eval as a Markdown pull-request comment, at most `MAX_MARKDOWN_CHARS` characters.

GitHub refuses a comment over 65,536 characters; the summary comes first, then the runs
that did not pass, and the list is cut (saying how many were left out) before the cap.
Text from the eval is put in code spans or escaped, so a case id or a reason cannot turn
into a link, an image or markup.
"""

from __future__ import annotations

import re

from awf_nb.evals.report.load import ReportData
from awf_nb.safe_text import terminal_safe

MAX_MARKDOWN_CHARS = 60_000  # under GitHub's 65,536 for a comment, with room to spare
MAX_REASON_CHARS = 300  # per failure line
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def md_text(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """One line of untrusted text, inert in Markdown and table cells."""
    text = terminal_safe(text).replace("\n", " ").replace("\t", " ")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _SPECIAL.sub(r"\\\1", text)


def render_markdown(data: ReportData, *, cap: int = MAX_MARKDOWN_CHARS) -> str:
    result = data.result
    lines = [f"### awf eval {md_text(result.eval_id)} of {md_text(result.workflow)}", ""]
    lines.append(f"status: {md_text(result.status)}")
    lines.append("")
    ks = list(range(1, result.epochs + 1))
    head = ["variant"] if data.has_variants else []
    head += ["scorer", "pass rate", *[f"pass^{k}" for k in ks], "mean score", "errors"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for variant in data.variants:
        summary = data.summary(variant)
        for line in summary.table()[1:]:
            cells = [md_text(c) for c in [line[0], *line[2:]]]
            if data.has_variants:
                cells.insert(0, md_text(variant))
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for variant in data.variants:
        prefix = f"{md_text(variant)}: " if data.has_variants else ""
        lines.append(f"{prefix}{md_text(data.summary(variant).totals_line(), 1000)}  ")
    if data.comparison is not None:
        # the paired comparison (each variant against the first), a line each, inert
        lines += ["", "**Comparison**", ""]
        lines += [f"{md_text(line, 1000)}  " for line in str(data.comparison).splitlines()[:200]]
    failed = [r for r in data.rows if r.row.passed is not True]
    lines += ["", f"**{len(failed)} runs did not pass**" if failed else "Every run passed.", ""]
    text = "\n".join(lines)
    closing = f"\n\n_awf eval-report {md_text(result.eval_id)} --format html: the whole report_"
    for i, r in enumerate(failed):
        reasons = []
        if r.row.error:
            reasons.append(r.row.error)
        for name, value in r.row.scores.items():
            if value.passed is not True:
                why = value.error or value.detail
                reasons.append(f"{name} {value.outcome}" + (f": {why}" if why else ""))
        where = f"`{md_text(r.variant)}` " if data.has_variants else ""
        entry = (
            f"- {where}case `{md_text(r.case, 100)}` epoch {r.epoch}: {r.row.outcome} — "
            + md_text("; ".join(reasons))
            + "\n"
        )
        left = len(failed) - i
        more = f"- … and {left} more\n"
        if len(text) + len(entry) + len(more) + len(closing) > cap:
            text += more
            break
        text += entry
    return text + closing + "\n"


__all__ = ["MAX_MARKDOWN_CHARS", "render_markdown"]
