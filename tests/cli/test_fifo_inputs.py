"""A FIFO (or any file that is not a regular one) handed to awf where a file is read — an
eval's dataset, `-i name=@file`, `--replay` — is refused with a clear error before it is
opened: opening a FIFO for reading blocks until a writer comes, which none ever does."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.cli import run_awf

WORKFLOW = """\
name: t
inputs: [{name: note}]
states:
  initial: done
  done: {type: terminal}
"""


def test_an_input_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    os.mkfifo(tmp_path / "pipe")
    done = run_awf("run", "wf.yaml", "-i", "note=@pipe", cwd=tmp_path,
                   env={"AWF_STORAGE": str(tmp_path / "s")})  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "inputs.note: cannot read" in done.stderr
    assert "not a regular file" in done.stderr


def test_a_cassette_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    os.mkfifo(tmp_path / "tape.jsonl")
    done = run_awf("run", "wf.yaml", "--replay", "tape.jsonl", "-i", "note=x", cwd=tmp_path,
                   env={"AWF_STORAGE": str(tmp_path / "s")})  # fmt: skip
    assert done.returncode != 0
    assert "not a regular file" in done.stderr


def test_a_dataset_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    os.mkfifo(tmp_path / "cases.jsonl")
    (tmp_path / "e.eval.yaml").write_text(
        "workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {note: x}\n"
        "scorers:\n  - name: ok\n    condition: 'status == \"completed\"'\n"
    )
    done = run_awf("eval", "e.eval.yaml", cwd=tmp_path, env={"AWF_STORAGE": str(tmp_path / "s")})
    assert done.returncode != 0
    assert "cannot read dataset cases.jsonl: not a regular file" in done.stderr
