"""The HTML eval report opens from disk in Debian's Chromium with the network off: its
cases and the variants' side-by-side conversations are in the rendered page, and the page
asks for nothing but itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from awf_nb.evals.report import load_report, render
from tests.support.eval_project import CHAT_WORKFLOW, Project
from tests.support.report_evals import two_variant_eval

pytestmark = [pytest.mark.browser]


def test_the_html_report_renders_offline_with_the_variants_side_by_side(
    chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = Project(tmp_path / "project")
    project.root.mkdir()
    monkeypatch.chdir(project.root)
    project.write("wf.yaml", CHAT_WORKFLOW)
    eval_id = two_variant_eval(project)
    page_file = tmp_path / "report.html"
    page_file.write_text(render(load_report(eval_id, storage=project.store), "html"))

    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    context.set_offline(True)
    try:
        page = context.new_page()
        page.goto(page_file.as_uri(), wait_until="load")
        cases = page.locator("table.cases tr.case-row").evaluate_all(
            "rows => rows.map(r => r.dataset.case)"
        )
        assert "bread" in cases and "garden<b>x</b>" in cases  # the text, not markup
        pair = page.locator("div.pair.differ").filter(has_text="garden")
        sides = pair.first.locator("div.conv").all_inner_texts()
        assert len(sides) == 2
        assert "(baseline)" in sides[0] and "first answer about tomatoes" in sides[0]
        assert "(yeasty)" in sides[1] and "yeast for tomatoes" in sides[1]
        # side by side: the two conversations share a row on the screen
        boxes = [c.bounding_box() for c in pair.first.locator("div.conv").all()]
        assert boxes[0]["y"] == boxes[1]["y"] and boxes[0]["x"] < boxes[1]["x"]
        # the page's one script works: hide the passing rows
        page.check("#only-failed")
        assert page.locator("tr.case-row.pass").first.is_hidden()
        assert page.locator("tr.case-row.fail").first.is_visible()
    finally:
        context.close()
    assert requests == [page_file.as_uri()]
