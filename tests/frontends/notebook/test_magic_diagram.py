"""`%awf diagram` and `%%awf --diagram` show a workflow as Mermaid (JupyterLab renders the
MIME type itself; the browser test checks the picture) and never run it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

WORKFLOW = """name: pic
states:
  initial: hello
  hello: {type: step, command: "touch ran", on_success: done}
  done: {type: terminal}
"""


@pytest.fixture
def shown(shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    import IPython.display

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pic.yaml").write_text(WORKFLOW)
    bundles: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: bundles.append(obj))
    return bundles


def test_line_magic_shows_mermaid(shell: InteractiveShell, shown: list[Any]) -> None:
    result = shell.run_cell("%awf diagram pic.yaml --highlight hello", store_history=False)
    assert result.success, result.error_in_exec
    (bundle,) = shown
    mermaid = bundle["text/vnd.mermaid"]
    assert mermaid.startswith("flowchart TB")
    assert "s_hello" in mermaid and "class s_hello current" in mermaid
    assert bundle["text/plain"] == mermaid  # what other viewers of the notebook show


def test_cell_magic_diagram_does_not_run(
    shell: InteractiveShell, shown: list[Any], tmp_path: Path
) -> None:
    result = shell.run_cell("%%awf --diagram\n" + WORKFLOW, store_history=False)
    assert result.success, result.error_in_exec
    (bundle,) = shown
    assert "s_hello" in bundle["text/vnd.mermaid"]
    assert not (tmp_path / "ran").exists()


def test_unknown_highlight_is_a_clear_error(shell: InteractiveShell, shown: list[Any]) -> None:
    result = shell.run_cell("%awf diagram pic.yaml --highlight helo", store_history=False)
    assert not result.success
    assert 'no step "helo" (did you mean "hello"?)' in str(result.error_in_exec)


def test_line_magic_shows_a_png_drawn_by_graphviz(
    shell: InteractiveShell, shown: list[Any]
) -> None:
    import base64

    result = shell.run_cell("%awf diagram pic.yaml --format png", store_history=False)
    assert result.success, result.error_in_exec
    (bundle,) = shown
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert bundle["text/plain"] == "<png diagram of pic>"


def test_line_magic_writes_a_file_with_o_like_the_cli(
    shell: InteractiveShell, shown: list[Any], tmp_path: Path
) -> None:
    result = shell.run_cell("%awf diagram pic.yaml -o pic.mmd", store_history=False)
    assert result.success, result.error_in_exec
    assert shown == []
    assert (tmp_path / "pic.mmd").read_text().startswith("flowchart TB")
