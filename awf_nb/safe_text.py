"""Untrusted text made safe to show: one function for terminals (`terminal_safe`), one for
the bidirectional-text controls every medium must show (`mark_bidi`), and one for a name
that must stay on one line and read as it is (`escape_name`).

A model reply, a command's output, a tool's arguments, a stored transcript, a workflow file
written by someone else: any of them can carry escape sequences that clear the screen
(`ESC[2J`), erase or rewrite a line (`ESC[1A ESC[2K`, `\r`), hide text (`ESC[8m`), set the
window title (OSC 0) or write to the clipboard (OSC 52). Everything awf prints that it did
not write itself goes through `terminal_safe`: the escape character becomes a visible `␛`
and the other control characters are dropped, except newline and tab. Because the escape
character itself is replaced, a sequence split across two streamed chunks is harmless too.
awf's own colours are added after this, so they still work.

Bidirectional-text controls (U+202A–U+202E, U+2066–U+2069) reorder what follows them:
`RLO` makes `rm -rf ~/ #` read as something else, and a reviewer sees text that is not what
runs ("Trojan Source"). Terminals and browsers both obey them, so `mark_bidi` replaces each
with a visible mark (`⟨U+202E⟩`): `terminal_safe` does, and the notebook panel does before
it renders a reply or escapes a text. The implicit marks (U+200E, U+200F, U+061C), which
right-to-left scripts use and which reorder nothing by themselves, are left alone.

A name (a file name in a skill's listing, which a model reads) may hold a newline that
would start a line of its own, a tab, or any other character that shows nothing:
`escape_name` writes each of them as a backslash escape (`\\n`, `\\x07`, `\\u202e`), so the
name stays on its line and every character in it can be seen.

This module is below every layer (the loader, the engine's dry run, diagrams and the
frontends use it) and imports nothing from the package.
"""

from __future__ import annotations

import re

# The explicit embeddings, overrides and isolates, and their terminators.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")

# C0 controls but \t and \n, DEL, and the C1 controls (8-bit CSI, OSC, …). \r too: it
# would let text overwrite what is already on the line.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f]")


def mark_bidi(text: str) -> str:
    """`text` with each bidirectional-text control shown as `⟨U+XXXX⟩`."""
    if text.isascii() or not _BIDI.search(text):
        return text
    return _BIDI.sub(lambda match: f"⟨U+{ord(match.group()):04X}⟩", text)


def terminal_safe(text: str) -> str:
    """`text` as a terminal may show it: no control character acts (escape shown as `␛`,
    the others dropped but newline and tab), no bidirectional-text control reorders."""
    if text.isprintable() or not text:
        return text
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return mark_bidi(_CONTROL.sub("", text).replace("\x1b", "␛"))


_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_name(text: str) -> tuple[str, bool]:
    """`text` with every character that does not print (controls, line and paragraph
    separators, format characters such as the bidirectional controls, lone surrogates
    from undecodable bytes) written as a backslash escape; and whether any was. A
    backslash is kept as it is: whether the text was escaped says how to read it."""
    if text.isprintable():
        return text, False
    shown = "".join(
        char if char.isprintable() else _NAMED_ESCAPES.get(char) or _code(ord(char))
        for char in text
    )
    return shown, True


def _code(point: int) -> str:
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"
