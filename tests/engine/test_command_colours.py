"""Command output is plain text even where the environment forces colours: a Jupyter
kernel sets FORCE_COLOR=1, and tools such as ruff then write ANSI codes to a pipe, which
would end up in prompts, state files and saved notebooks (engine/process.py)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from awf_nb.api import arun, load
from awf_nb.engine.process import FORCED_COLOR_VARIABLES

LINT = """
name: lint
states:
  initial: lint
  lint:
    type: step
    command: ruff check --output-format=concise --exit-zero --no-cache -- lintme.py
    on_success: env
  env:
    type: step
    command: echo "FORCE_COLOR=[$FORCE_COLOR] CLICOLOR_FORCE=[$CLICOLOR_FORCE] PY_COLORS=[$PY_COLORS]"
    on_success: done
  done: {type: terminal}
"""


async def test_a_kernel_s_forced_colours_do_not_reach_command_output(tmp_path: Path) -> None:
    (tmp_path / "lintme.py").write_text("import os\n")
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff (the test extra) is not installed"
    env = {
        "PATH": os.pathsep.join([str(Path(ruff).parent), os.environ.get("PATH", "")]),
        **dict.fromkeys(FORCED_COLOR_VARIABLES, "1"),
    }
    result = await arun(load(LINT), cwd=tmp_path, env=env, storage=False, show=False)
    assert result.ok, result.error
    assert "F401" in result.outputs["lint"]
    assert "\x1b[" not in result.outputs["lint"]
    assert result.outputs["env"] == "FORCE_COLOR=[] CLICOLOR_FORCE=[] PY_COLORS=[]"
