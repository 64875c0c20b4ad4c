"""`StatusLine`: the run panel's status line, whose elapsed time ticks in the browser.

A clock kept by the kernel has to send a message every second, and a panel that is busy
streaming a reply sends nothing else meanwhile: its clock stalled, then jumped. Here the
kernel sends the line's HTML only when something in it changes (the running step, the
tokens), with the elapsed seconds at that moment; the JavaScript (status_view.js, shipped
in the package) counts on from there once a second, on its own, while `running`.

`value` is the whole line as HTML, the elapsed time in a `<span class="awf-elapsed">`; it is
what a saved notebook and the static copy of the panel show.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

__all__ = ["StatusLine"]


class StatusLine(anywidget.AnyWidget):
    """`show(html, elapsed, running)` when something in the line changes."""

    _esm = Path(__file__).with_name("status_view.js")
    value = traitlets.Unicode("").tag(sync=True)
    elapsed = traitlets.Float(0.0).tag(sync=True)  # seconds at the last update
    running = traitlets.Bool(False).tag(sync=True)  # the browser's clock ticks

    def show(self, html: str, *, elapsed: float, running: bool) -> None:
        """The new line, in one message."""
        with self.hold_sync():
            self.elapsed = elapsed
            self.running = running
            self.value = html
