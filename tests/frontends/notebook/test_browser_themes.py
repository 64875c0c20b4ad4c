"""The run panel and workflow diagrams are readable in JupyterLab's light and dark themes.

A run with everything the panel colours (the step's prompt, replies, the person's
messages, an agent partner and the labels of both speakers, a reply cut at max_tokens,
command output on stderr, an error, the summary) is shown in each theme; for every piece of
text the WCAG contrast of its computed colour against the colour under it must be at least
4.5:1 (the AA level for body text), in the live panel and in the static copy that takes its
place when the run ends. Mermaid diagrams' filled nodes are checked the same way.

Screenshots of both themes go to the test's temporary folder; with AWF_REFRESH_DOC_IMAGES=1
they refresh docs/img/panel-light.png and docs/img/panel-dark.png instead.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.jupyterlab import JupyterLabServer
from tests.support.kernels import REPO_ROOT
from tests.support.notebook_page import STEP_MS, NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
AA = 4.5  # WCAG 2 contrast for normal text

RUN = """
name: garden-review
states:
  initial: prepare
  prepare:
    type: command
    command: "echo soil ready; echo 'low on compost' >&2"
    on_success: plan
  plan:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Write a plan for a balcony garden."
    options:
      max_tokens: 9
      replies: ["Tomatoes, basil and chives in three pots, watered every morning.", "Beans."]
    conversation:
      with:
        name: reviewer
        provider: scripted
        options: {replies: ["Add something that climbs.", "APPROVED"]}
      until: 'message == "APPROVED"'
      max_turns: 3
    on_success: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Any questions about the plan?"
    options:
      replies: ["Where does the balcony face?", "Then the tomatoes will love it."]
    on_success: check
  check:
    type: command
    command: "echo 'pots missing' >&2; exit 4"
    on_success: done
  done: {type: terminal}
"""

DIAGRAM = """
name: outcomes
states:
  initial: build
  build: {type: command, command: "true", on_success: shipped, on_failure: broken}
  shipped: {type: terminal}
  broken: {type: terminal, status: failure}
"""

# Every piece of text the panel colours; the static copy has the same classes.
TEXT = [
    ".awf-status",
    ".awf-output pre",
    ".awf-stderr",
    ".awf-prompt > .widget-html-content",
    ".awf-user:not(.awf-prompt) > .widget-html-content",
    ".awf-assistant .awf-stream p",
    ".awf-partner > .widget-html-content, .awf-partner .awf-stream p",
    ".awf-speaker > .widget-html-content",
    ".awf-note",
    ".awf-cut",
    ".awf-error > .widget-html-content",
    ".awf-summary .widget-html-content",
    ".awf-steps-table td",
]
PSEUDO = [(".awf-prompt > .widget-html-content", "::before")]

# The colours of an element's text and of what is under it, as the browser computed them
# (color-mix() included): each colour is painted on a 1x1 canvas and read back as RGBA.
COLOURS_JS = """
([selectors, pseudo]) => {
  const canvas = new OffscreenCanvas(1, 1);
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const rgba = (value) => {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = 'rgba(0, 0, 0, 0)';
    ctx.fillStyle = value;
    ctx.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
    return [r, g, b, a / 255];
  };
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const background = (element) => {
    const layers = [];
    for (let node = element; node && node.nodeType === 1; node = node.parentElement) {
      const colour = rgba(getComputedStyle(node).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    let result = [255, 255, 255, 1];
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const found = [];
  const look = (element, where, colour) => {
    const text = (where ? getComputedStyle(element, where).content : element.innerText) || '';
    if (!text.trim() || text === 'none') return;
    const bg = background(element);
    found.push({ where: where || '', text: text.trim().slice(0, 40), fg: over(colour, bg), bg });
  };
  for (const selector of selectors) {
    for (const element of document.querySelectorAll(
        selector.split(',').map((s) => '.awf-panel ' + s.trim()).join(','))) {
      look(element, '', rgba(getComputedStyle(element).color));
    }
  }
  for (const [selector, where] of pseudo) {
    for (const element of document.querySelectorAll('.awf-panel ' + selector)) {
      look(element, where, rgba(getComputedStyle(element, where).color));
    }
  }
  return found;
}
"""

# Mermaid's filled nodes: the label's colour against the node's fill.
MERMAID_JS = """
() => {
  const canvas = new OffscreenCanvas(1, 1);
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const rgba = (value) => {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = value;
    ctx.fillRect(0, 0, 1, 1);
    return Array.from(ctx.getImageData(0, 0, 1, 1).data.slice(0, 3)).concat([1]);
  };
  const found = [];
  for (const node of document.querySelectorAll('g.node')) {
    const shape = node.querySelector('rect, path, polygon, circle, ellipse');
    const label = node.querySelector('.nodeLabel, text');
    if (!shape || !label) continue;
    const fill = getComputedStyle(shape).fill;
    if (!fill || fill === 'none') continue;
    found.push({ text: label.textContent.trim(), fg: rgba(getComputedStyle(label).color ||
      getComputedStyle(label).fill), bg: rgba(fill) });
  }
  return found;
}
"""


def luminance(rgb: list[float]) -> float:
    def channel(value: float) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: list[float], bg: list[float]) -> float:
    light, dark = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def poor_contrast(found: list[dict[str, Any]]) -> list[str]:
    return [
        f"{item['text']!r}{item.get('where', '')}: {contrast(item['fg'], item['bg']):.2f}:1 "
        f"(text {item['fg'][:3]} on {item['bg'][:3]})"
        for item in found
        if contrast(item["fg"], item["bg"]) < AA
    ]


def screenshot_path(tmp_path: Path, theme: str) -> Path:
    if os.environ.get("AWF_REFRESH_DOC_IMAGES", "") not in ("", "0"):
        return REPO_ROOT / "docs" / "img" / f"panel-{theme}.png"
    return tmp_path / f"panel-{theme}.png"


@pytest.mark.parametrize("theme", list(THEMES))
def test_every_text_of_the_panel_reads_at_aa_contrast(
    page: Any, lab: JupyterLabServer, theme: str, tmp_path: Path
) -> None:
    lab.set_lab_setting("@jupyterlab/apputils-extension:themes", {"theme": THEMES[theme]})
    page.set_viewport_size({"width": 1100, "height": 1500})  # the whole panel in the picture
    cells = [
        "%load_ext awf_nb",
        "%%awf --out run\n" + textwrap.dedent(RUN).lstrip(),
        "%%awf --diagram\n" + textwrap.dedent(DIAGRAM).lstrip(),
    ]
    notebook = NotebookPage(page, lab, f"theme-{theme}.ipynb", cells)
    notebook.notebook.locator(".jp-Cell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    notebook.wait_for_reply("Where does the balcony face?")
    notebook.send("South, full sun.")
    notebook.wait_for_reply("tomatoes will love it")
    notebook.wait_until_ready_for_input()

    live = page.evaluate(COLOURS_JS, [TEXT, PSEUDO])
    shown = {item["text"] for item in live}
    for text in ("South, full sun.", "reviewer", "plan", "Add something that climbs."):
        assert any(text in item for item in shown), (text, shown)
    assert any("cut at max_tokens" in item for item in shown), shown
    assert poor_contrast(live) == [], f"{theme} theme, live panel"
    shot = screenshot_path(tmp_path, theme)
    shot.parent.mkdir(parents=True, exist_ok=True)
    notebook.panel.screenshot(path=str(shot))

    notebook.click("End conversation")
    notebook.wait_for_status("failed")
    notebook.panel.locator(".awf-summary").first.wait_for(timeout=STEP_MS)
    static = page.evaluate(COLOURS_JS, [TEXT, PSEUDO])
    assert any("pots missing" in item["text"] for item in static), static
    assert poor_contrast(static) == [], f"{theme} theme, saved copy"

    notebook.notebook.locator(".jp-Cell .cm-content").nth(2).click()
    page.keyboard.press("Shift+Enter")  # the diagram cell
    # JupyterLab shows the diagram as an <img> of an SVG (with the theme's Mermaid
    # colours): it is opened on a page of its own to read the drawn colours.
    image = notebook.notebook.locator(".jp-RenderedMermaid img").first
    image.wait_for(timeout=STEP_MS)
    drawing = page.context.new_page()
    try:
        drawing.goto(image.get_attribute("src") or "")
        nodes = drawing.evaluate(MERMAID_JS)
    finally:
        drawing.close()
    assert {"shipped", "broken"} <= {node["text"] for node in nodes}, nodes
    assert poor_contrast(nodes) == [], f"{theme} theme, diagram"
