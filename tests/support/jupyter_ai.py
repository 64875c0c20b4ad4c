"""A venv with Jupyter AI 3 and its ACP client, for the browser test of the AWF persona.

jupyter-ai-acp-client 0.3.3 requires agent-client-protocol<0.12 and awf-nb is built on
0.12.1, so Jupyter AI cannot share the project's environment. `ensure_jupyter_ai_venv`
builds a venv of its own from tests/support/jupyter-ai-constraints.txt (pinned), with
awf-nb installed there without dependencies (only its `jupyter_ai.personas` entry point
and the persona module are used there); the persona starts `awf acp` from the project's
environment through `$AWF_ACP_COMMAND`. Built once (about 1.5 minutes with a warm pip
cache) and reused while its stamp matches; a failed build raises, it never skips.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import sys
from pathlib import Path

from tests.support.kernels import REPO_ROOT, _run, _venv_python

CONSTRAINTS = Path(__file__).with_name("jupyter-ai-constraints.txt")
REQUIREMENTS = ("jupyter-ai==3.2.0", "jupyter-ai-acp-client==0.3.3")
PERSONA_ID = "jupyter-ai-personas::awf_nb::AwfAcpPersona"


def _stamp() -> dict[str, str]:
    return {
        "requirements": " ".join(REQUIREMENTS),
        "constraints": hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest(),
        "repo": str(REPO_ROOT),
        "base_python": sys.version.split()[0],
    }


def ensure_jupyter_ai_venv(root: Path) -> Path:
    """The python of `root/jupyter-ai` (built if missing or stale), under a file lock so
    concurrent test sessions wait for one build; the stamp is written last."""
    root.mkdir(parents=True, exist_ok=True)
    venv = root / "jupyter-ai"
    stamp_path = venv / "awf-jupyter-ai-venv.json"
    wanted = _stamp()
    with (root / "jupyter-ai.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if json.loads(stamp_path.read_text()) == wanted and _venv_python(venv).exists():
                return _venv_python(venv)
        except (OSError, ValueError):
            pass
        _build(venv)
        stamp_path.write_text(json.dumps(wanted, indent=2))
    return _venv_python(venv)


def _build(venv: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(venv)], "create the Jupyter AI venv")
    pip = [str(_venv_python(venv)), "-m", "pip", "install", "--quiet"]
    _run(
        [*pip, "-c", str(CONSTRAINTS), *REQUIREMENTS],
        f"install {' '.join(REQUIREMENTS)} (pinned by {CONSTRAINTS.name})",
    )
    _run([*pip, "--no-deps", "-e", str(REPO_ROOT)], "install awf-nb's persona (editable)")
