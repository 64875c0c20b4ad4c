"""`variants:` in an eval file: every variant runs every (case, epoch) with the same seed,
rows carry their variant, the table has a block per variant and the comparison, gates
compare variants, `--variant` runs a subset, resume and cassettes keep them apart, and
Python compares two variants by name. Known outcomes: variant `strict` passes exactly 7
of the 20 cases `loose` passes fewer of (see `_rows`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awf_nb.cli import main
from awf_nb.errors import DefinitionError, UserError
from awf_nb.evals.loader import load_eval
from tests.support.eval_project import Project

# n >= cutoff says "yes": the cutoff is the variants' difference
GRADER = """\
name: grader
inputs:
  - {name: n, required: true}
  - {name: cutoff, default: "15"}
states:
  initial: check
  check:
    type: step
    command: 'if [ {{.inputs.n}} -ge {{.inputs.cutoff}} ]; then echo yes; else echo no; fi; echo "seed=$AWF_EVAL_SEED variant=$AWF_EVAL_VARIANT" >> seen.txt'
    on_success: done
  done: {type: terminal}
"""

EVAL = """\
workflow: grader.yaml
dataset: cases.jsonl
inputs: {n: "{{.case.n}}"}
variants:
  loose: {}
  strict:
    inputs: {cutoff: "8"}
  set-cutoff:
    set: {inputs: [{name: n, required: true}, {name: cutoff, default: "8"}]}
scorers:
  - name: ok
    condition: 'states.check.Output startsWith "yes"'
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def storage(project: Project) -> list[str]:
    # n = 0..19: `loose` (cutoff 15) passes 5 cases, `strict` (cutoff 8) passes 12: the 7
    # cases 8..14 flip to better, none to worse
    project.write("grader.yaml", GRADER)
    project.rows("cases.jsonl", [{"id": f"c{n:02}", "n": n} for n in range(20)])
    return ["--storage", str(project.store.root)]


def test_every_variant_runs_every_case_with_the_same_seed(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL)
    _code, out, _ = run(capsys, "eval", "t.eval.yaml", "--seed", "3", "--json", *storage)
    data = json.loads(out)
    rows = data["rows"]
    assert len(rows) == 60 and data["total"] == 60
    by_variant: dict[str, list[dict]] = {}
    for row in rows:
        by_variant.setdefault(row["variant"], []).append(row)
    assert sorted(by_variant) == ["loose", "set-cutoff", "strict"]
    passed = {name: sum(r["passed"] for r in found) for name, found in by_variant.items()}
    assert passed == {"loose": 5, "strict": 12, "set-cutoff": 12}
    # paired: one seed per (case, epoch), whatever the variant
    seeds = {(r["case"], r["epoch"]): set() for r in rows}
    for r in rows:
        seeds[(r["case"], r["epoch"])].add(r["seed"])
    assert all(len(s) == 1 for s in seeds.values())
    seen = (project.root / "seen.txt").read_text().split("\n")
    assert sum("variant=strict" in line for line in seen) == 20
    # per-variant summaries and the comparisons against the first variant
    assert data["variants"]["strict"]["passed"] == 12
    assert data["variants"]["loose"]["passed"] == 5
    first = data["comparisons"][0]
    assert (first["a"], first["b"]) == ("loose", "strict")
    ok = next(s for s in first["scorers"] if s["scorer"] == "ok")
    assert (ok["better"], ok["worse"], ok["cases"]) == (7, 0, 20)
    assert [f["case"] for f in ok["flips"]] == [f"c{n:02}" for n in range(8, 15)]
    # two comparisons made with 2 scorers each ("ok" and "passed"): Holm counts them all,
    # and McNemar's p of 1/64 times 4 is no longer a clear difference
    assert first["comparisons"] == 4
    assert ok["p_value"] == pytest.approx(0.015625) and ok["p_adjusted"] == pytest.approx(0.0625)
    assert ok["verdict"] == "no clear difference"


def test_the_terminal_shows_a_block_per_variant_and_the_comparison(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL)
    code, out, err = run(capsys, "eval", "t.eval.yaml", "--variant", "loose",
                         "--variant", "strict", *storage)  # fmt: skip
    assert code == 3  # runs failed, no gate
    assert "variant loose" in out and "variant strict" in out and "set-cutoff" not in out
    assert "loose → strict" in out and "ok (pass rate): +35 pts" in out
    assert "× 2 variants" in err
    assert "variant strict" in err or "variant loose" in err  # failure lines name it


def test_gates_hold_for_every_variant_and_no_regression_compares_variants(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL.replace("  set-cutoff:\n", "  other:\n"))
    code, out, _ = run(capsys, "eval", "t.eval.yaml", "--variant", "loose", "--variant",
                       "strict", "--gate", "no_regression: loose", *storage)  # fmt: skip
    assert code == 0 and "gate holds  no_regression: loose" in out
    code, out, _ = run(capsys, "eval", "t.eval.yaml", "--variant", "loose", "--variant",
                       "strict", "--gate", "no_regression: strict", *storage)  # fmt: skip
    assert code == 3 and "GATE FAILS  no_regression: strict: significantly worse: loose" in out
    code, out, _ = run(capsys, "eval", "t.eval.yaml", "--variant", "loose", "--variant",
                       "strict", "--gate", "passed >= 50%", *storage)  # fmt: skip
    assert code == 3
    assert "GATE FAILS  passed >= 50%: loose: passed is 25%; strict: passed is 60%" in out


def test_an_unknown_variant_and_variant_on_an_eval_without_variants_are_errors(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL)
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--variant", "nope", *storage)
    assert code == 1
    assert 'unknown variant "nope" (the eval\'s variants: loose, strict, set-cutoff)' in err
    project.write_eval(EVAL.split("variants:")[0] + "scorers: [{name: ok, condition: 'true'}]\n")
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--variant", "loose", *storage)
    assert code == 1 and "this eval has none" in err


def test_bad_variants_are_located_errors(project: Project, storage: list[str]) -> None:
    project.write("other.yaml", GRADER.replace("name: grader", "name: other\ninputs: []\n#"))
    project.write_eval(
        EVAL.split("variants:")[0]
        + "variants:\n"
        + "  'bad name!': {}\n"
        + "  typo:\n    set: {states.chekc.command: 'echo yes'}\n"
        + "  misspelt:\n    set: {states.check.comand: 'echo yes'}\n"
        + "  wrongtype:\n    set: {states.check.on_success: [1, 2]}\n"
        + "  noinput:\n    inputs: {cuttoff: '3'}\n"
        + "  missing:\n    workflow: nowhere.yaml\n"
        + "scorers: [{name: ok, condition: 'true'}]\n"
    )
    with pytest.raises(DefinitionError) as caught:
        load_eval("t.eval.yaml")
    text = "\n".join(p.message + " @" + p.path for p in caught.value.problems)
    assert 'variant name "bad name!"' in text
    assert 'the workflow has no state "chekc" (its states: initial, check, done)' in text
    assert "comand" in text and "@variants.misspelt.set" in text
    assert "variant wrongtype: its workflow is invalid" in text
    assert 'has no input "cuttoff"' in text and "@variants.noinput.inputs.cuttoff" in text
    assert "variant missing:" in text and "nowhere.yaml" in text


def test_python_compares_two_variants_by_name(project: Project, storage: list[str]) -> None:
    import awf_nb

    project.write_eval(EVAL)
    result = awf_nb.evaluate("t.eval.yaml", storage=storage[1], seed=1)
    assert result.variants == ["loose", "strict", "set-cutoff"]
    comparison = result.compare("loose", "strict")
    assert comparison["ok"].better == 7 and comparison.verdict == "better"
    assert result.compare("strict", "set-cutoff")["ok"].verdict == "no clear difference"
    assert result.variant("strict").summary.passed == 12
    assert result.run("c09", variant="strict").steps["check"].output.startswith("yes")
    assert result.run("c09").steps["check"].output.startswith("no")  # the first: loose
    with pytest.raises(UserError, match='has no variant "nope"'):
        result.compare("loose", "nope")
    subset = awf_nb.evaluate("t.eval.yaml", storage=storage[1], variants=["strict"])
    assert subset.variants == ["strict"] and len(subset.rows) == 20


def test_resume_runs_only_the_missing_variant_runs(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from awf_nb.evals.storage import EvalFolder

    project.write_eval(EVAL)
    _, out, _ = run(capsys, "eval", "t.eval.yaml", "--json", *storage)
    eval_id = json.loads(out)["eval_id"]
    folder = EvalFolder.open(project.store, eval_id)
    results = folder.path / "results.jsonl"
    lines = results.read_text().splitlines()
    kept = [
        line
        for line in lines
        if not (json.loads(line)["variant"] == "set-cutoff" and json.loads(line)["case"] < "c10")
    ]
    assert len(kept) == 50
    results.write_text("\n".join(kept) + "\n")
    manifest = folder.manifest()
    manifest.status = "cancelled"
    folder.write_manifest(manifest)
    (project.root / "seen.txt").unlink()
    _code, out, _ = run(capsys, "eval", "--resume", eval_id, "--json", *storage)
    data = json.loads(out)
    assert len(data["rows"]) == 60
    seen = (project.root / "seen.txt").read_text().splitlines()
    assert len(seen) == 10 and all("variant=set-cutoff" in line for line in seen)
    again = {r["case"]: r["passed"] for r in data["rows"] if r["variant"] == "set-cutoff"}
    assert sum(again.values()) == 12  # its `set:` still applies after the resume


def test_cassettes_of_each_variant_are_kept_apart(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    project.write_eval(EVAL)
    tapes = tmp_path / "tapes"
    code, _, _ = run(capsys, "eval", "t.eval.yaml", "--limit", "2", "--record", str(tapes),
                     "--seed", "4", *storage)  # fmt: skip
    assert sorted(p.name for p in tapes.iterdir()) == ["loose", "set-cutoff", "strict"]
    assert len(list((tapes / "strict").iterdir())) == 2
    code, out, _ = run(capsys, "eval", "t.eval.yaml", "--limit", "2", "--replay", str(tapes),
                       "--seed", "4", "--json", *storage)  # fmt: skip
    assert len(json.loads(out)["rows"]) == 6
    (tapes / "strict" / next((tapes / "strict").iterdir()).name).unlink()
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--limit", "2", "--replay", str(tapes),
                       *storage)  # fmt: skip
    assert code == 1 and "of variant strict" in err


def test_rescore_and_reports_keep_the_variants(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL)
    _, out, _ = run(capsys, "eval", "t.eval.yaml", "--variant", "loose", "--variant", "strict",
                    "--json", *storage)  # fmt: skip
    eval_id = json.loads(out)["eval_id"]
    code, out, _ = run(capsys, "eval-rescore", eval_id, "--json", *storage)
    again = json.loads(out)
    assert again["variants"]["strict"]["passed"] == 12 and again["variants"]["loose"]["passed"] == 5
    code, out, _ = run(capsys, "eval-report", eval_id, "--format", "md", *storage)
    assert code == 0 and "**Comparison**" in out and "loose → strict" in out
    assert "| strict | passed | 60% |" in out
    code, out, _ = run(capsys, "eval-show", eval_id, *storage)
    assert code == 0 and "variant strict" in out and "loose → strict" in out


def test_python_checks_the_gates_as_awf_eval_does(project: Project, storage: list[str]) -> None:
    import awf_nb

    project.write_eval(EVAL + "gate:\n  - passed >= 50%\n  - 'no_regression: loose'\n")
    result = awf_nb.evaluate("t.eval.yaml", storage=storage[1], variants=["loose", "strict"])
    checked = result.gates(extra=["passed >= 20%"])
    assert [(g.gate.text, g.holds) for g in checked] == [
        ("passed >= 50%", False),
        ("no_regression: loose", True),
        ("passed >= 20%", True),
    ]
    assert checked[0].detail == "loose: passed is 25%; strict: passed is 60%"
