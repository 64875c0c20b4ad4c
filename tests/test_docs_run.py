"""The docs run: every block of README.md and docs/*.md marked runnable is run, in order,
the way a reader would run it, so an example cannot drift from what awf-nb does.

The marker is an HTML comment on the line just before a fenced block (GitHub does not show
it):

- `<!-- runnable -->` runs the block. ```bash blocks run with `bash -e`; ```python blocks
  in a fresh interpreter, where a top-level `await` works as in a notebook; a block whose
  first line starts with `%` (`%load_ext awf_nb`, a `%%awf` cell) is a notebook cell, run
  in one IPython shell per page, headless (AWF_NO_INTERACTIVE=1). Each must succeed (exit
  status 0, no exception, the cell does not fail).
- `<!-- runnable: NAME -->` writes the block to the file NAME (a workflow the next blocks
  of the page use); nothing runs.

The blocks of one page share a scratch folder, in page order: the project's `workflows/`
is copied into it, runs are stored there (AWF_STORAGE), stdin is empty (a conversation
ends after its first reply, as when piped), and agents run on the bundled local model —
mark only what runs offline. README's `<!-- main-job -->` and `<!-- test-command -->` are
CI's: .ci/run runs those two itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- runnable(?::\s*(?P<file>[^\s>]+))?\s*-->\s*$")
BLOCK_TIMEOUT = 900  # seconds: blocks run the bundled model on a shared machine
# A python block as a notebook cell would run it: top-level await allowed.
PYTHON_RUNNER = """\
import ast, asyncio, sys
path = sys.argv[1]
code = compile(open(path).read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    file: str | None  # `runnable: NAME`: save as NAME

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def is_cell(self) -> bool:
        return self.text.lstrip().startswith("%")


def runnable_blocks(page: Path) -> list[Block]:
    """The marked blocks of a page, in order; a marker not followed by a block is an error."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    for index, line in enumerate(lines):
        found = MARKER.match(line)
        if found is None:
            continue
        fence = lines[index + 1] if index + 1 < len(lines) else ""
        if not fence.startswith("```"):
            raise AssertionError(f"{page.name}:{index + 1}: a runnable marker without a block")
        end = next(i for i in range(index + 2, len(lines)) if lines[i].startswith("```"))
        blocks.append(
            Block(
                page, index + 2, fence[3:].strip(), "\n".join(lines[index + 2 : end]) + "\n",
                found.group("file"),
            )
        )  # fmt: skip
    return blocks


PAGES_WITH_BLOCKS = [page for page in PAGES if runnable_blocks(page)]


def scratch_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWF_", "OPENAI_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["AWF_STORAGE"] = str(folder / "runs")
    env["XDG_CONFIG_HOME"] = str(folder / "config")
    return env


def run_process(block: Block, argv: list[str], folder: Path) -> None:
    done = subprocess.run(
        argv, cwd=folder, env=scratch_env(folder), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=BLOCK_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{block.where}: exit status {done.returncode}\n--- block\n{block.text}"
        f"--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
    )


class NotebookCells:
    """A page's notebook cells, run in order in one headless IPython shell."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder, self.monkeypatch = folder, monkeypatch
        self.shell = None

    def run(self, block: Block) -> None:
        from IPython.core.interactiveshell import InteractiveShell

        if self.shell is None:
            for name, value in scratch_env(self.folder).items():
                self.monkeypatch.setenv(name, value)
            self.monkeypatch.setenv("AWF_NO_INTERACTIVE", "1")
            self.monkeypatch.chdir(self.folder)
            InteractiveShell.clear_instance()
            self.shell = InteractiveShell.instance()
        outcome = self.shell.run_cell(block.text, store_history=False)
        assert outcome.success, f"{block.where}: the cell failed\n{block.text}"

    def close(self) -> None:
        from IPython.core.interactiveshell import InteractiveShell

        if self.shell is not None:
            InteractiveShell.clear_instance()


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_BLOCKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_runnable_blocks_of_a_page_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "workflows", tmp_path / "workflows")
    cells = NotebookCells(tmp_path, monkeypatch)
    try:
        for block in runnable_blocks(page):
            if block.file is not None:
                (tmp_path / block.file).write_text(block.text)
            elif block.is_cell:
                cells.run(block)
            elif block.language == "bash":
                run_process(block, ["bash", "-e", "-c", block.text], tmp_path)
            elif block.language == "python":
                script = tmp_path / f"block_{block.line}.py"
                script.write_text(block.text)
                run_process(block, [sys.executable, "-c", PYTHON_RUNNER, str(script)], tmp_path)
            else:
                raise AssertionError(f"{block.where}: cannot run a ```{block.language} block")
    finally:
        cells.close()


def test_the_marker_convention_is_used() -> None:
    """At least the newcomer's pages have runnable blocks, and every marker has its block."""
    marked = {page.name for page in PAGES_WITH_BLOCKS}
    assert {"README.md", "getting-started.md"} <= marked
