"""Reports that travel: a stored eval as one HTML file, a Markdown comment, JUnit XML, or
an Inspect AI log.

Every format reads the eval through one loader (`load.py`: `load_report`), which reads
the eval's folder (`evals/EVAL_ID/`) and its runs' conversations, masks every text with
the secrets of the environment it runs in (the stored runs are masked already; this is a
second net for a file that leaves the machine), and groups rows by variant (a row's
`variant` field; one unnamed variant for an eval without variants). Then:

    html.py          one self-contained page (inline CSS and script, nothing fetched)
    markdown.py      a pull-request comment, at most `MAX_MARKDOWN_CHARS`
    junit.py         JUnit XML: one testcase per case x epoch (x variant)
    inspect_log.py   Inspect AI's log format (`.json`, or the `.eval` zip)
"""

from __future__ import annotations

from awf_nb.evals.report.load import ReportData, load_report

FORMATS = ("html", "markdown", "junit")

__all__ = ["FORMATS", "ReportData", "load_report", "render"]


def render(data: ReportData, fmt: str) -> str:
    """`data` in `fmt` (html, markdown / md, junit)."""
    from awf_nb.errors import UserError

    if fmt == "html":
        from awf_nb.evals.report.html import render_html

        return render_html(data)
    if fmt in ("markdown", "md"):
        from awf_nb.evals.report.markdown import render_markdown

        return render_markdown(data)
    if fmt == "junit":
        from awf_nb.evals.report.junit import render_junit

        return render_junit(data)
    raise UserError(f'unknown report format "{fmt}"', hint="use html, markdown or junit")
