"""Branch from here, in the run panel (docs/debugging.md): every message and every step of
a stored run has a "Branch from here" button; it opens an editor prefilled with the message
(or the step's output), and "Run branch" makes the fork (`awf_nb.runs.fork`), runs it in a
panel of its own below the original, then shows the two runs side by side from where they
diverge (`awf_nb.runs.diff`).

The buttons are drawn by the browser (panel_branch.js), next to each bubble and in each
step's title, so the panel's widget tree and its saved copy are unchanged: a click writes
`{"section": i, "message": m}` (the i-th step section of the panel, its m-th bubble, or
null for the step) into one hidden text widget per panel, which the kernel observes. The
kernel knows what each section and bubble is; the message's number in the stored
conversation is checked against its text before the fork is made.

Widget callbacks may come from another thread (ipykernel 7's subshells): every action is
handed to the run's loop (`RunPanel.on_loop`).
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from awf_nb.errors import AwfError
from awf_nb.frontends.notebook.panel_items import _asset
from awf_nb.frontends.notebook.summary import esc

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from awf_nb.frontends.notebook.handle import RunHandle
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.runs.diff import RunsDiff
    from awf_nb.store import Store

    # Starts a stored run (a new fork) from a step, in a notebook panel of its own that the
    # brancher places below the original; gives its `RunHandle`. Given by the notebook
    # frontend (`frontend.start_branch`), which owns how a run is opened in a panel.
    StartBranch: TypeAlias = Callable[[str, str, Store], RunHandle]

__all__ = ["BRANCH_JS", "Brancher", "diff_html"]

# The browser side: the buttons and what a click sends (see the module).
BRANCH_JS = _asset("panel_branch.js")
MAX_REQUEST_CHARS = 200  # a click's request is a few numbers: anything longer is ignored


class Brancher:
    """A panel's branch requests, editors and branch runs."""

    def __init__(self, panel: RunPanel, store: Store, start: StartBranch) -> None:
        self.panel = panel
        self.store = store
        self.start = start  # starts a branch's run in a panel of its own, not displayed
        # What the browser writes into (hidden): the kernel acts on each new value.
        self.request = widgets.Text(
            value="", layout=widgets.Layout(display="none"), _dom_classes=("awf-branch-request",)
        )
        self.request.observe(self._requested, names="value")
        self.area = widgets.VBox(layout=panel.shared_layout, _dom_classes=("awf-branches",))
        self.editor: widgets.VBox | None = None
        self.branches: list[Any] = []  # the RunHandles of the branches started here

    # --- a click ----------------------------------------------------------------------------

    def _requested(self, change: dict[str, Any]) -> None:
        value = str(change.get("new") or "")
        if value:
            self.panel.on_loop(lambda: self.open(value))

    def open(self, request: str) -> None:
        """Show the editor for `request` (`{"section": i, "message": m|null}`)."""
        self.request.value = ""  # the same button clicked again is a new request
        if len(request) > MAX_REQUEST_CHARS:
            return
        try:
            data = json.loads(request)
            index, message = int(data["section"]), data.get("message")
            section = self.panel.sections()[index]
        except (ValueError, KeyError, IndexError, TypeError):
            return
        if message is None:
            at, what = section.step_name, "the step's output"
            text = self._stored_output(section.step_name)
        else:
            said = section.bubbles
            if not 0 <= int(message) < len(said):
                return
            number = section.earlier_messages + int(message) + 1
            at, what = f"{section.step_name}#{number}", "the message"
            item = said[int(message)]
            text = item if isinstance(item, str) else str(item.text)
        self.show_editor(at, text, what)

    def _stored_output(self, step: str) -> str:
        with contextlib.suppress(AwfError, OSError):
            found = self.store.load_state(self.panel.run_id).steps.get(step)
            return found.output if found is not None else ""
        return ""

    def show_editor(self, at: str, text: str, what: str) -> None:
        self.close_editor()
        title = self.panel.html(
            f"<b>Branch from {esc(at)}</b>: edit {esc(what)}, then run the branch "
            "(the original run is not changed)",
            "awf-branch-title",
        )
        box = widgets.Textarea(
            value=text, layout=widgets.Layout(width="100%"), _dom_classes=("awf-branch-text",)
        )
        run = widgets.Button(description="Run branch", _dom_classes=("awf-branch-run",))
        cancel = widgets.Button(description="Cancel", _dom_classes=("awf-branch-cancel",))
        run.on_click(lambda _b: self.panel.on_loop(lambda: self.run_branch(at, text, box.value)))
        cancel.on_click(lambda _b: self.panel.on_loop(self.close_editor))
        row = widgets.HBox([run, cancel], _dom_classes=("awf-branch-buttons",))
        self.editor = widgets.VBox([title, box, row], _dom_classes=("awf-branch-editor",))
        self.area.children = (*self.area.children, self.editor)
        self.panel.show_branches()

    def close_editor(self) -> None:
        editor = self.editor
        if editor is None:
            return
        self.editor = None
        self.area.children = tuple(c for c in self.area.children if c is not editor)
        for widget in _tree(editor):
            widget.close()

    # --- the branch run ---------------------------------------------------------------------

    def run_branch(self, at: str, original_text: str, text: str) -> None:
        """Make the fork at `at` (edited when `text` differs, or at a message) and run it
        in a panel below."""
        from awf_nb.runs.fork import fork_run, parse_fork_point

        self.close_editor()
        run_id = self.panel.run_id
        try:
            point = parse_fork_point(at)
            if point.turn is not None:
                point = self._checked(run_id, point, original_text)
            edit = text if point.turn is not None or text != original_text else None
            new_id, point = fork_run(self.store, run_id, point, edit)
            handle = self.start(new_id, point.resume_step, self.store)
        except AwfError as exc:
            self.panel.show_error(f"cannot branch from {at}: {exc}")
            return
        label = self.panel.html(
            f"branch <b>{esc(new_id)}</b> of run {esc(run_id)}, from {esc(at)}",
            "awf-branch-label",
        )
        assert handle.panel is not None
        self.area.children = (*self.area.children, label, handle.panel.widget)
        self.branches.append(handle)
        assert handle.task is not None
        handle.task.add_done_callback(lambda _t: self.panel.on_loop(lambda: self._diff(new_id)))

    def _checked(self, run_id: str, point: Any, text: str) -> Any:
        """The message's number in the stored conversation: the panel's count, or, when
        that message says something else (tool turns, messages not shown), the last
        message with the bubble's text up to there."""
        from awf_nb.runs.fork import ForkPoint

        state = self.store.load_state(run_id)
        step = state.steps.get(point.step)
        conv = step.conversation if step is not None else None
        if conv is None:
            return point
        said = [str(t.content) for t in conv.turns if t.role != "system"]
        if 0 < point.turn <= len(said) and said[point.turn - 1].strip() == text.strip():
            return point
        matches = [i + 1 for i, content in enumerate(said) if content.strip() == text.strip()]
        if not matches:
            return point
        before = [n for n in matches if n <= point.turn]
        return ForkPoint(point.step, (before or matches)[-1])

    def _diff(self, new_id: str) -> None:
        from awf_nb.runs.diff import diff_runs

        with contextlib.suppress(AwfError, OSError):
            original = self.store.load_state(self.panel.run_id)
            branch = self.store.load_state(new_id)
            view = self.panel.html(diff_html(diff_runs(original, branch)), "awf-diff")
            self.area.children = (*self.area.children, view)


def _tree(widget: widgets.Widget) -> list[widgets.Widget]:
    children = getattr(widget, "children", ())
    return [widget, *(w for child in children for w in _tree(child))]


def diff_html(diff: RunsDiff) -> str:
    """Two runs side by side from where they diverge (`RunsDiff.to_html`)."""
    return diff.to_html()
