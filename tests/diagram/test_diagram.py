"""`awf diagram`: DOT and Mermaid golden files for every example workflow and a fixture
with every step kind, Graphviz accepting the DOT, and the command's errors.

Refresh the golden files after a deliberate change with AWF_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from awf_nb.diagram import diagram, marks_for
from awf_nb.errors import UserError
from awf_nb.workflow.loader import load_workflow
from tests.support.cli import run_awf

HERE = Path(__file__).parent
REPO = HERE.parents[1]
GOLDEN = HERE / "golden"
WORKFLOWS = [*sorted((REPO / "workflows").glob("*.yaml")), HERE / "every-kind.yaml"]
UPDATE = os.environ.get("AWF_UPDATE_GOLDEN", "") not in ("", "0")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: run with AWF_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} changed: compare, then AWF_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.stem)
def test_dot_matches_the_golden_file(workflow: Path) -> None:
    check_golden(f"{workflow.stem}.dot", diagram(load_workflow(str(workflow)), format="dot"))


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.stem)
def test_mermaid_matches_the_golden_file(workflow: Path) -> None:
    text = diagram(load_workflow(str(workflow)), format="mermaid")
    check_golden(f"{workflow.stem}.mmd", text)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.stem)
def test_graphviz_accepts_the_dot_and_draws_every_step(workflow: Path) -> None:
    loaded = load_workflow(str(workflow))
    svg = diagram(loaded, format="svg", highlight=[loaded.initial])
    assert isinstance(svg, str) and svg.lstrip().startswith("<?xml")
    for name in loaded.steps:
        assert f">{name}</text>" in svg, f"step {name} is missing from the SVG"


def test_every_step_kind_has_its_own_shape() -> None:
    dot = diagram(load_workflow(str(HERE / "every-kind.yaml")), format="dot")
    expected = {
        "prepare": "shape=box,",
        "checks": "shape=diamond",
        "each": "shape=hexagon",
        "poll": "shape=hexagon",
        "sub": "shape=folder",
        "notify": "shape=box3d",
        "chat": "peripheries=2",
        "summarise": 'shape=box, style="rounded"',
        "shipped": "shape=oval",
        "broken": "shape=doubleoctagon",
    }
    lines = {line.split(" [")[0].strip().strip('"'): line for line in dot.splitlines()}
    for step, shape in expected.items():
        assert shape in lines[step], (step, lines[step])


def test_edges_are_labelled_by_why_they_are_taken() -> None:
    dot = diagram(load_workflow(str(HERE / "every-kind.yaml")), format="dot")
    assert '"checks" -> "broken" [label="failure"' in dot
    assert '"prepare" -> "prepare__failed" [label="failure"' in dot
    assert "label=\"states.chat.Output == 'ship it'\"" in dot
    assert '"chat" -> "done" [label="else"]' in dot
    assert '"store" -> "each" [label="next item"' in dot  # the loop's back-edge
    assert '"check" -> "poll" [label="next"' in dot
    assert '"each" -> "poll" [label="done"]' in dot
    assert '"checks" -> "lint" [style=dotted' in dot  # a parallel branch


def test_marks_colour_a_run_in_progress() -> None:
    workflow = load_workflow(str(HERE / "every-kind.yaml"))
    marks = marks_for({"prepare": "completed", "checks": "failed"}, current="broken")
    mermaid = diagram(workflow, format="mermaid", marks=marks)
    assert "  class s_prepare completed" in mermaid
    assert "  class s_checks failed" in mermaid
    assert "  class s_broken current" in mermaid


def test_mermaid_escapes_what_its_parser_would_read() -> None:
    text = """
name: odd
states:
  initial: "a-b"
  "a-b": {type: step, command: 'echo "x|y" {a} <b> #1', on_success: "c d"}
  "c d": {type: terminal}
"""
    workflow = load_workflow_text(text)
    mermaid = diagram(workflow, format="mermaid")
    assert (
        's_a_b["a-b<br/><small>echo #quot;x#124;y#quot; #123;a#125; #lt;b#gt; #35;1</small>"]'
        in mermaid
    )
    assert "s_c_d" in mermaid


def load_workflow_text(text: str):
    from awf_nb.workflow.loader import load_text

    return load_text(text)


def test_unknown_highlight_step_and_format_are_clear_errors() -> None:
    workflow = load_workflow(str(REPO / "workflows" / "code-review.yaml"))
    with pytest.raises(UserError, match=r'no step "revew" \(did you mean "review"\?\)'):
        diagram(workflow, highlight=["revew"])
    with pytest.raises(UserError, match="unknown diagram format 'jpeg'"):
        diagram(workflow, format="jpeg")


def awf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """`awf ARGS` run from the repository root (where the example workflows are), output kept
    as bytes (a diagram may be a PNG)."""
    return run_awf(*args, cwd=REPO, env=env, text=False, timeout=120)


def test_cli_writes_the_format_of_the_file_extension(tmp_path: Path) -> None:
    for name, start in (
        ("out.dot", b"digraph"),
        ("out.mmd", b"flowchart"),
        ("out.png", b"\x89PNG"),
    ):
        result = awf("diagram", "workflows/chat.yaml", "-o", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name).read_bytes().startswith(start)


def test_cli_prints_dot_by_default_and_mermaid_on_request() -> None:
    result = awf("diagram", "workflows/chat.yaml", "--direction", "lr")
    assert result.returncode == 0
    assert b"rankdir=LR;" in result.stdout
    result = awf("diagram", "workflows/chat.yaml", "--format", "mermaid")
    assert result.stdout.startswith(b"flowchart TB")


def test_cli_errors(tmp_path: Path) -> None:
    unknown_step = awf("diagram", "workflows/chat.yaml", "--highlight", "nope")
    assert unknown_step.returncode == 1
    assert b'no step "nope"' in unknown_step.stderr
    unknown_format = awf("diagram", "workflows/chat.yaml", "--format", "gif")
    assert unknown_format.returncode == 1
    assert b"invalid choice: 'gif'" in unknown_format.stderr
    bad_extension = awf("diagram", "workflows/chat.yaml", "-o", str(tmp_path / "x.jpg"))
    assert bad_extension.returncode == 1
    assert b"cannot tell the format of" in bad_extension.stderr


def test_cli_without_graphviz_names_the_package(tmp_path: Path) -> None:
    # A PATH with python but no `dot`.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    result = awf(
        "diagram", "workflows/chat.yaml", "-o", str(tmp_path / "x.svg"), env={"PATH": str(bin_dir)}
    )
    assert result.returncode == 1
    assert b"apt-get install graphviz" in result.stderr
    assert b"The dot and mermaid formats need nothing" in result.stderr
    assert shutil.which("dot"), "Graphviz itself is installed for the other tests"


def test_the_docs_show_a_picture_of_every_example_workflow() -> None:
    cli_doc = (REPO / "docs" / "cli.md").read_text()
    for workflow in sorted((REPO / "workflows").glob("*.yaml")):
        picture = REPO / "docs" / "img" / "workflows" / f"{workflow.stem}.svg"
        assert picture.is_file(), f"run scripts/refresh-diagrams: {picture} is missing"
        assert f"img/workflows/{workflow.stem}.svg" in cli_doc
