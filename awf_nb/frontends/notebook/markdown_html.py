"""Model text (Markdown) as HTML for the run panel, made safe: model output is untrusted.

- Raw HTML is escaped (`<img>`, `<script>`, `<link>`, `style=` are shown as text).
- A remote image is not loaded: `![x](https://host/?d=…)` becomes a link the person can
  click (it says which host it goes to). A model that was prompt-injected and can read files
  could otherwise send them away in an image's address, with no click, as soon as the reply
  is shown — in the live panel and in the saved notebook alike. Images from `data:`
  addresses and relative paths (served by the notebook's own server) stay images.
- Bidirectional-text controls are shown, not obeyed (`awf_nb.safe_text.mark_bidi`).

Markdown itself can produce no other element that loads something by itself: no raw HTML,
no `style`, no `srcset`; links load only when clicked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from awf_nb.safe_text import mark_bidi

__all__ = ["is_remote_url", "render_markdown"]

# What a browser ignores in an address before reading it: leading and trailing C0 controls
# and spaces, and tabs and line breaks anywhere (the URL standard's "basic URL parser").
_IGNORED_AROUND = "".join(chr(c) for c in range(0x21))
_IGNORED_INSIDE = re.compile("[\t\n\r]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def is_remote_url(url: str) -> bool:
    """Whether a browser would fetch `url` from another host: any address with a scheme
    but `data:`, and scheme-relative ones (`//host/x`; `\\` counts as `/` for browsers).
    A relative path stays on the page's own server."""
    address = _IGNORED_INSIDE.sub("", url.strip(_IGNORED_AROUND)).replace("\\", "/")
    if address.startswith("//"):
        return True
    scheme = _SCHEME.match(address)
    return scheme is not None and scheme.group().lower() != "data:"


def _image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """An image: as markdown-it renders it, unless it is remote: then a link to it."""
    token = tokens[idx]
    source = str(token.attrGet("src") or "")
    if not is_remote_url(source):
        return str(self.image(tokens, idx, options, env))
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    try:
        host = urlsplit(source.replace("\\", "/")).hostname or source
    except ValueError:  # `http://[::1` and the like: the address as written
        host = source
    return (
        f'<a class="awf-remote-image" href="{escape(source)}" target="_blank" '
        f'rel="noopener noreferrer" title="{escape("not loaded: " + source)}">'
        f"🖼 {escape(alt)} ({escape(host)})</a>"
    )


_markdown = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
_markdown.add_render_rule("image", _image)


def render_markdown(text: str) -> str:
    """Markdown to HTML: raw HTML escaped, remote images as links, bidi controls shown."""
    return _markdown.render(mark_bidi(text))
