"""Stored evals for the report tests: a real eval of the scripted chat workflow, and a
two-variant eval folder built from two real evals' runs (each row tagged with its
`variant`, as evals with variants store them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import awf_nb
from awf_nb.evals.storage import RESULTS, EvalFolder
from tests.support.eval_project import CHAT_WORKFLOW, Project

EVAL = """\
workflow: {workflow}
dataset: cases.jsonl
inputs: {{topic: "{{{{.case.topic}}}}"}}
scorers:
  - name: mentions_yeast
    condition: 'transcript contains "yeast"'
epochs: 2
"""

# Case ids that travel badly: markup, a bidi override, a Markdown link.
CASES = [
    {"id": "bread", "topic": "yeast", "replies": ["hello", "exit"]},
    {"id": "garden<b>x</b>", "topic": "tomatoes", "replies": ["hi", "exit"]},
    {"id": "evil\u202ecod", "topic": "[click](http://127.0.0.1:9/x)", "replies": ["yo", "exit"]},
]


def _evaluate(path: str, project: Project) -> str:
    """The eval's id; run in a thread of its own: a caller may be inside an event loop
    (Playwright's synchronous API keeps one running)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(awf_nb.evaluate, path, storage=project.store, show=False)
        return future.result().eval_id


def single_eval(project: Project) -> str:
    """A finished eval of 3 cases x 2 epochs: `bread` passes, the others fail."""
    project.rows("cases.jsonl", CASES)
    project.write_eval(EVAL.format(workflow="wf.yaml"))
    return _evaluate("t.eval.yaml", project)


def two_variant_eval(project: Project) -> str:
    """An eval folder whose rows carry `variant`: `baseline` (the chat workflow) and
    `yeasty` (a workflow that always says yeast): `garden…` and `evil…` flip."""
    project.rows("cases.jsonl", CASES)
    project.write("wf-yeast.yaml", CHAT_WORKFLOW.replace("first answer about", "yeast for"))
    project.write_eval(EVAL.format(workflow="wf.yaml"), "a.eval.yaml")
    project.write_eval(EVAL.format(workflow="wf-yeast.yaml"), "b.eval.yaml")
    a = _evaluate("a.eval.yaml", project)
    b = _evaluate("b.eval.yaml", project)
    # The combined eval: b's folder, its rows followed by a's, each tagged.
    folder_a = EvalFolder.open(project.store, a)
    folder_b = EvalFolder.open(project.store, b)
    lines = []
    for variant, folder in (("baseline", folder_a), ("yeasty", folder_b)):
        for line in (folder.path / RESULTS).read_text().splitlines():
            record = json.loads(line)
            record["variant"] = variant
            lines.append(json.dumps(record))
    (folder_b.path / RESULTS).write_text("\n".join(lines) + "\n")
    manifest = json.loads((folder_b.path / "manifest.json").read_text())
    manifest["total"] = len(lines)
    (folder_b.path / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(folder_a.path)
    return b


def storage_args(project: Project) -> list[str]:
    return ["--storage", str(Path(project.store.root))]
