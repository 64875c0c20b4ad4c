"""When a notebook cell waits for its run, and when the run may ask the person.

Magics cannot be async, so a `%%awf` cell is rewritten to await the run (transformer.py).
Whether it really waits ("await") or starts the run and returns ("background") depends on
the kernel: ipykernel >= 7.4 delivers widget events (a click on Send) to an awaiting cell,
older kernels would deadlock waiting for a click. Measured on real kernels
(tests/frontends/notebook/test_kernel_runs.py).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.errors import AwfError

if TYPE_CHECKING:
    from awf_nb.workflow.model import Workflow

__all__ = [
    "RunMode",
    "choose_run_mode",
    "frontend_takes_input",
    "is_headless",
    "kernel_version",
    "parse_version",
    "workflow_needs_input",
]

RunMode = Literal["await", "background"]
AWAIT_WIDGETS_SINCE = (7, 4)  # ipykernel versions whose awaiting cells receive widget events
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def parse_version(text: str) -> tuple[int, ...]:
    """`"7.4.0"` -> (7, 4, 0); `"7.0.0a1"` -> (7, 0, 0); unparsable -> ()."""
    numbers: list[int] = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(numbers)


def choose_run_mode(
    *, needs_input: bool, kernel_version: tuple[int, ...] | None, wait: bool | None = None
) -> RunMode:
    """Whether the cell awaits the run ("await") or starts it in the background.

    `wait` is `--wait` (True) / `--no-wait` (False) / neither (None). A run that needs no
    input always awaits. One that needs the person awaits where an awaiting cell still gets
    widget events: ipykernel >= 7.4, or no kernel at all (a terminal IPython reads stdin).
    On older kernels it would deadlock, so it runs in the background.
    """
    if wait is not None:
        return "await" if wait else "background"
    if not needs_input or kernel_version is None:
        return "await"
    return "await" if kernel_version >= AWAIT_WIDGETS_SINCE else "background"


def workflow_needs_input(workflow: Workflow, *, _seen: set[str] | None = None) -> bool:
    """True when a run may ask the person for a message (a `mode: conversation` step here
    or in a called workflow)."""
    from awf_nb.workflow.loader import find_workflow, load_workflow
    from awf_nb.workflow.model import AgentStep, CallWorkflowStep

    seen = _seen if _seen is not None else set()
    seen.add(workflow.name)
    for step in workflow.steps.values():
        if isinstance(step, AgentStep) and step.mode == "conversation":
            return True
        if isinstance(step, CallWorkflowStep):
            if "{{" in step.workflow:  # chosen at run time: assume it may ask
                return True
            try:
                child = load_workflow(find_workflow(step.workflow, relative_to=workflow.base_dir))
            except AwfError:  # the run itself will report it
                continue
            if child.name not in seen and workflow_needs_input(child, _seen=seen):
                return True
    return False


def is_headless(
    flag: bool, env: Mapping[str, str] | None = None, *, takes_input: bool | None = None
) -> bool:
    """Whether nobody can answer a run: `--no-interactive`; else `AWF_NO_INTERACTIVE` when
    it is set (1/true/yes/on: headless; 0/false/…: never, whatever runs the cell); else
    whether the frontend running the cell takes no input (`takes_input` False: nbclient,
    `jupyter nbconvert --execute`, papermill, nbval — a run there would wait for ever)."""
    if flag:
        return True
    value = (env if env is not None else os.environ).get("AWF_NO_INTERACTIVE", "").strip()
    if value:
        return value.lower() in _TRUE_WORDS
    return takes_input is False


def frontend_takes_input(shell: Any) -> bool | None:
    """Whether the frontend that runs the current cell can answer what the cell asks: its
    execute request allows stdin. JupyterLab, Notebook and VS Code send `allow_stdin`
    true; nbclient (so nbconvert, papermill) and nbval false. None outside a kernel or
    when the request cannot be seen."""
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    if get_parent is None:
        return None
    try:
        request = get_parent("shell")
    except Exception:  # a kernel without it, or no request in this context
        return None
    content = request.get("content") if isinstance(request, dict) else None
    if not isinstance(content, dict) or "allow_stdin" not in content:
        return None
    return bool(content["allow_stdin"])


def kernel_version(shell: Any) -> tuple[int, ...] | None:
    """The ipykernel version when `shell` runs inside a kernel, else None."""
    if getattr(shell, "kernel", None) is None:
        return None
    module = sys.modules.get("ipykernel")
    return parse_version(str(getattr(module, "__version__", ""))) or (0,)
