"""A notebook frontend for tests that make the panel (and its text box) themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from awf_nb.frontends.notebook.frontend import NotebookSession

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.notebook.reader import WidgetReader
    from awf_nb.runs import FrontendRequest, RunControl


class PanelFrontend:
    """Opens runs in `panel`, asking through `reader` when given; shows nothing itself."""

    def __init__(self, panel: RunPanel, reader: WidgetReader | None = None) -> None:
        self.panel = panel
        self.reader = reader

    def open(self, request: FrontendRequest, control: RunControl) -> NotebookSession:
        return NotebookSession(
            reader=self.reader,
            sink=self.panel,
            asks=self.reader is not None,
            panel=self.panel,
            control=control,
            display=False,
        )
