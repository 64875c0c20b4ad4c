"""The eval as JUnit XML for CI systems: one `<testcase>` per case x epoch (x variant).

A run that failed is a `<failure>` whose message names the scorers that failed and why; an
error row (the run could not start, a scorer could not decide) is an `<error>`. One
`<testsuite>` per variant (one without variants), inside `<testsuites>`: the shape the
common readers (Jenkins, GitLab, GitHub actions' reporters, junitparser) accept. Text that
XML cannot hold (control characters) is dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from awf_nb.evals.report.load import ReportData
from awf_nb.safe_text import mark_bidi

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
MAX_MESSAGE_CHARS = 2000  # a failure's message attribute; the full text is its body


def _xml(text: str) -> str:
    return _NOT_XML.sub("", mark_bidi(text))


def render_junit(data: ReportData) -> str:
    suites = ET.Element("testsuites", name=_xml(f"awf eval {data.eval_id}"))
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for variant in data.variants:
        rows = data.by_variant(variant)
        name = data.result.workflow + (f" [{variant}]" if variant else "")
        suite = ET.SubElement(suites, "testsuite", name=_xml(name))
        counts = {"tests": len(rows), "failures": 0, "errors": 0}
        seconds = 0.0
        for r in rows:
            seconds += r.row.seconds
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_xml(name),
                name=_xml(f"{r.case} epoch {r.epoch}"),
                time=f"{r.row.seconds:.3f}",
            )
            if r.row.passed is True:
                continue
            kind = "error" if r.row.passed is None else "failure"
            counts["errors" if kind == "error" else "failures"] += 1
            reasons = r.reasons(" ({})") or [f"the run ended {r.row.status or 'without starting'}"]
            element = ET.SubElement(
                case, kind, message=_xml("; ".join(reasons))[:MAX_MESSAGE_CHARS],
                type=_xml(r.row.error_kind or r.row.outcome),
            )  # fmt: skip
            element.text = _xml(
                "\n".join(reasons) + (f"\nrun {r.row.run_id}" if r.row.run_id else "")
            )
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("errors", str(counts["errors"]))
        suite.set("time", f"{seconds:.3f}")
        for key in totals:
            totals[key] += counts[key]
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
