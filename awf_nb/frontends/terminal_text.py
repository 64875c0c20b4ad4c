"""Untrusted text made safe for a terminal.

A model reply, a command's output or a stored transcript can carry escape sequences that
clear the screen (`ESC[2J`), hide text (`ESC[8m`), set the window title (OSC 0) or write to
the clipboard (OSC 52). Everything awf prints that it did not write itself goes through
`terminal_safe`: the escape character becomes a visible `␛` and the other control
characters are dropped, except newline and tab. Because the escape character itself is
replaced, a sequence split across two streamed chunks is harmless too. awf's own colours
are added after this, so they still work.
"""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, and the C1 controls (8-bit CSI, OSC, …). \r too: it
# would let text overwrite what is already on the line.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    if text.isprintable() or not text:
        return text
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _CONTROL.sub("", text).replace("\x1b", "␛")
