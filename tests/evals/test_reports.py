"""`awf eval-report` and `awf eval-export`: a stored eval as HTML, Markdown, JUnit XML and
an Inspect AI log — for today's single-variant evals and for rows that carry `variant`."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from awf_nb.cli import main
from awf_nb.evals.api import open_eval
from awf_nb.evals.report import load_report
from awf_nb.evals.report.markdown import render_markdown
from tests.support.eval_project import Project
from tests.support.report_evals import single_eval, storage_args, two_variant_eval


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _no_fetch(page: str) -> None:
    """Nothing in the page loads anything: no external address in src/href/url()/@import."""
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "url(" not in page and "@import" not in page
    assert "default-src 'none'" in page


def test_html_report_of_a_single_variant_eval(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    eval_id = single_eval(project)
    out = tmp_path / "report.html"
    code, _, err = run(capsys, "eval-report", eval_id, "-o", str(out), *storage_args(project))
    assert code == 0 and "wrote" in err
    page = out.read_text()
    _no_fetch(page)
    assert "<h2>Summary</h2>" in page and "mentions_yeast" in page
    assert "Failures (4)" in page  # garden and evil, 2 epochs each
    assert "mentions_yeast: fail" in page
    assert "first answer about yeast" in page  # the conversation of case bread
    # untrusted text escaped, bidi controls shown
    assert "<b>x</b>" not in page and "garden&lt;b&gt;x&lt;/b&gt;" in page
    assert "\u202e" not in page and "⟨U+202E⟩" in page
    assert "variant" not in page.split("<h2>Cases</h2>")[1].split("</thead>")[0]


def test_html_report_puts_the_variants_side_by_side_where_they_differ(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_id = two_variant_eval(project)
    code, page, _ = run(capsys, "eval-report", eval_id, *storage_args(project))
    assert code == 0
    _no_fetch(page)
    assert "variant baseline" in page and "variant yeasty" in page
    # bread: the same verdict but different words in each variant -> a pair; both sides
    pairs = re.findall(r'<div class="pair differ" style="--n:2">(.*?)</div></details>', page, re.S)
    assert len(pairs) == 6  # every (case, epoch) differs in its words
    garden = next(p for p in pairs if "garden" in p)
    assert "first answer about tomatoes" in garden and "yeast for tomatoes" in garden
    assert "(baseline)" in garden and "(yeasty)" in garden


def test_identical_variants_show_one_conversation(project: Project) -> None:
    eval_id = two_variant_eval(project)
    data = load_report(eval_id, storage=project.store)
    # make the yeasty variant's conversations the baseline's: nothing differs
    base = {(r.case, r.epoch): r for r in data.by_variant("baseline")}
    for r in data.by_variant("yeasty"):
        r.messages, r.row = base[(r.case, r.epoch)].messages, base[(r.case, r.epoch)].row
    from awf_nb.evals.report.html import render_html

    page = render_html(data)
    assert 'class="pair differ"' not in page
    assert page.count('<div class="pair" style="--n:1">') == 6


def test_markdown_report_is_bounded_and_inert(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_id = two_variant_eval(project)
    code, text, _ = run(capsys, "eval-report", eval_id, "--format", "markdown",
                        *storage_args(project))  # fmt: skip
    assert code == 0
    assert "| variant | scorer |" in text
    assert "| baseline | mentions\\_yeast | 33%" in text
    assert "| yeasty | mentions\\_yeast | 100%" in text
    assert "](http" not in text and "<b>" not in text and "\u202e" not in text
    assert "case `garden\\<b\\>x\\</b\\>` epoch 1: fail" in text
    data = load_report(eval_id, storage=project.store)
    short = render_markdown(data, cap=700)
    assert len(short) <= 700 and "more" in short
    assert short.rstrip().endswith("the whole report_")


def test_junit_report_has_a_testcase_per_case_epoch_and_variant(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_id = two_variant_eval(project)
    code, text, _ = run(capsys, "eval-report", eval_id, "--format", "junit",
                        *storage_args(project))  # fmt: skip
    assert code == 0
    root = ET.fromstring(text.encode())
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("12", "4", "0")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["chatty [baseline]", "chatty [yeasty]"]
    cases = suites[0].findall("testcase")
    assert len(cases) == 6 and all(c.get("classname") and c.get("name") for c in cases)
    failures = [c for c in cases if c.find("failure") is not None]
    assert len(failures) == 4
    message = failures[0].find("failure").get("message")
    assert message.startswith("mentions_yeast: fail")
    assert suites[1].get("failures") == "0"
    # single-variant: one suite, no variant in its name
    single = single_eval(project)
    code, text, _ = run(capsys, "eval-report", single, "--format", "junit",
                        *storage_args(project))  # fmt: skip
    root = ET.fromstring(text.encode())
    assert [s.get("name") for s in root.findall("testsuite")] == ["chatty"]
    assert len(root.findall("testsuite/testcase")) == 6


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_export_reads_back_with_inspects_reader(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    from inspect_ai.log import read_eval_log

    eval_id = single_eval(project)
    out = tmp_path / f"log{suffix}"
    code, _, _ = run(capsys, "eval-export", eval_id, "--format", "inspect", "-o", str(out),
                     *storage_args(project))  # fmt: skip
    assert code == 0
    log = read_eval_log(str(out))
    result = open_eval(eval_id, storage=project.store)
    summary = result.summary
    assert log.status == "success"
    assert log.eval.task == "chatty" and log.eval.config.epochs == 2
    assert log.eval.dataset.samples == 3
    assert len(log.samples) == 6
    scores = {s.name: s for s in log.results.scores}
    assert scores["mentions_yeast"].metrics["accuracy"].value == pytest.approx(1 / 3)
    assert log.stats.model_usage["awf/workflow"].total_tokens == summary.tokens
    by_key = {(s.id, s.epoch): s for s in log.samples}
    bread = by_key[("bread", 1)]
    row = next(r for r in result.rows if r.key == ("bread", 1))
    assert bread.scores["mentions_yeast"].value == "C"
    assert by_key[("garden<b>x</b>", 2)].scores["mentions_yeast"].value == "I"
    assert bread.metadata["run_id"] == row.run_id
    assert [m.role for m in bread.messages][:2] == ["user", "assistant"]
    assert "first answer about yeast" in bread.messages[1].text
    assert bread.model_usage["awf/workflow"].total_tokens == row.tokens


def test_inspect_export_of_variants_and_bad_names(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log

    eval_id = two_variant_eval(project)
    out = tmp_path / "v.eval"
    assert run(capsys, "eval-export", eval_id, "-o", str(out), *storage_args(project))[0] == 0
    log = read_eval_log(str(out))
    assert len(log.samples) == 12
    assert {s.id for s in log.samples} >= {"baseline/bread", "yeasty/bread"}
    code, _, err = run(capsys, "eval-export", eval_id, "-o", str(tmp_path / "x.txt"),
                       *storage_args(project))  # fmt: skip
    assert code != 0 and ".eval or .json" in err


def test_python_api_report_and_export(project: Project, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    result = open_eval(single_eval(project), storage=project.store)
    assert "<!DOCTYPE html>" in result.report()
    assert result.report(format="junit").startswith("<?xml")
    path = result.export_inspect(str(tmp_path / "x.json"))
    assert len(read_eval_log(str(path)).samples) == 6
    assert json.loads(Path(path).read_text())["version"] == 2


def test_report_masks_secrets_of_the_environment(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    eval_id = single_eval(project)
    monkeypatch.setenv("MY_API_TOKEN", "answer about yeast")
    data = load_report(eval_id, storage=project.store)
    from awf_nb.evals.report.html import render_html

    page = render_html(data)
    assert "answer about yeast" not in page and "first ***" in page


def test_unknown_eval_is_one_clear_line(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "eval-report", "nope", *storage_args(project))
    assert code != 0 and 'eval "nope" not found' in err


def test_notebook_line_magic_shows_the_report_in_a_sandboxed_frame(
    project: Project, tmp_path: Path
) -> None:
    from html import unescape

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    eval_id = single_eval(project)
    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("awf_nb")
    storage = str(project.store.root)
    with capture_output() as shown:
        ip.run_line_magic("awf", f"eval-report {eval_id} --storage {storage}")
    html = shown.outputs[0].data["text/html"]
    assert html.startswith('<div><iframe class="awf-eval-report" sandbox="allow-scripts" srcdoc="')
    assert "first answer about yeast" in unescape(html)
    with capture_output() as printed:
        ip.run_line_magic("awf", f"eval-report {eval_id} --format markdown --storage {storage}")
    assert "mentions\\_yeast" in printed.stdout
    out = tmp_path / "r.xml"
    ip.run_line_magic("awf", f"eval-report {eval_id} --format junit -o {out} --storage {storage}")
    assert ET.parse(out).getroot().tag == "testsuites"
