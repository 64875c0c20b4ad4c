"""How long a message typed into the notebook's run panel takes to reach the engine.

A real JupyterLab (on 127.0.0.1) and a real headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright, as the browser tests do) run a scripted conversation. For each of
`--sends` messages the page notes the time of the Send click (a capture listener, before
the panel's own), and the kernel notes the time the engine's read of the message returns
(`WidgetReader.read`, wrapped by the notebook's first cell). Both clocks are this machine's
wall clock. Prints the median, min and max of Send → engine has the text, the median of
the part of it inside the kernel (from the kernel's receiving the click's message), and
`uptime`: on a loaded machine every process hop (page, server, kernel) waits for a core.

With `--compare REF` the same is measured first on the panel of git revision REF (its
`awf_nb` exported to a temporary folder and put first on the kernel's path), for an
old-versus-new figure on the same machine.

    python benchmarks/textbox.py [--sends 20] [--compare REF] [--main-shell]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.frontends.notebook.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.jupyterlab import JupyterLabServer  # noqa: E402
from tests.support.notebook_page import STEP_MS, NotebookPage  # noqa: E402

MARK = "AWF-TEXTBOX-BENCH"
TIMED_READS = """\
%load_ext awf_nb
import json, time
from awf_nb.frontends.notebook import reader as _reader
_engine_has_text = []
_untimed_read = _reader.WidgetReader.read
async def _timed_read(self, prompt):
    text = await _untimed_read(self, prompt)
    _engine_has_text.append(time.time() * 1000)  # ms, as the page's clock below
    return text
_reader.WidgetReader.read = _timed_read
import ipywidgets as _widgets
_kernel_has_click = []
_untimed_handle = _widgets.Widget._handle_msg
def _timed_handle(self, msg):
    content = msg["content"]["data"].get("content") or {}
    if content.get("action") == "send" or getattr(self, "description", "") == "Send":
        _kernel_has_click.append(time.time() * 1000)
    return _untimed_handle(self, msg)
_widgets.Widget._handle_msg = _timed_handle
"""
# Every Send click, timed before the panel's own handlers see it (capture phase).
CLICK_CLOCK = """() => {
  window.__awfSends = [];
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('.awf-panel button.awf-send')) {
      window.__awfSends.push(performance.timeOrigin + performance.now());
    }
  }, true);
}"""


def workflow(sends: int) -> str:
    replies = ", ".join(f'"reply {n}"' for n in range(sends + 1))
    return textwrap.dedent(f"""\
        %%awf --out chat
        name: textbox-bench
        states:
          initial: chat
          chat:
            type: agent
            provider: scripted
            mode: conversation
            prompt: "Start."
            options:
              replies: [{replies}]
            on_success: done
          done: {{type: terminal}}
        """)


def measure(
    browser: Any, source: Path, sends: int, label: str, comms: str
) -> tuple[list[float], list[float]]:
    """Send → engine-has-text in ms for `sends` messages, with `source`'s awf_nb, and the
    part of it from the kernel's receiving the click to the engine's having the text."""
    with tempfile.TemporaryDirectory(prefix="awf-textbox-") as folder:
        root, home = Path(folder, "root"), Path(folder, "home")
        root.mkdir()
        home.mkdir()
        env = {"AWF_STORAGE": str(home / "storage"), "PYTHONPATH": f"{source}:{ROOT}"}
        with JupyterLabServer(root, home, env=env) as lab:
            lab.set_lab_setting(
                "@jupyterlab/apputils-extension:kernels-settings", {"commsOverSubshells": comms}
            )
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.kernel_frames = None
            try:
                cells = [
                    TIMED_READS,
                    workflow(sends),
                    f"print('{MARK}', json.dumps([_kernel_has_click, _engine_has_text]))",
                ]
                notebook = NotebookPage(page, lab, "bench.ipynb", cells)
                page.evaluate(CLICK_CLOCK)
                notebook.run_all_cells()
                notebook.wait_for_reply("reply 0")
                box = notebook.panel.locator(".awf-controls textarea")
                for n in range(sends):
                    notebook.wait_until_ready_for_input()
                    box.fill(f"message {n}")
                    notebook.button("Send").click()
                    notebook.wait_for_reply(f"reply {n + 1}")
                notebook.wait_until_ready_for_input()
                notebook.click("End conversation")
                notebook.wait_for_status("completed")
                output = notebook.notebook.locator(".jp-OutputArea-output").filter(has_text=MARK)
                output.first.wait_for(timeout=STEP_MS)
                kernel, engine = json.loads(output.first.inner_text().split(MARK, 1)[1])
                clicks = page.evaluate("() => window.__awfSends")
            finally:
                context.close()
    if len(clicks) != sends or len(kernel) != sends or len(engine) < sends:
        raise SystemExit(
            f"{label}: {len(clicks)} clicks, {len(kernel)} received, {len(engine)} reads "
            f"for {sends} sends"
        )
    whole = [has - sent for sent, has in zip(clicks, engine[:sends], strict=True)]
    inside = [has - got for got, has in zip(kernel, engine[:sends], strict=True)]
    return whole, inside


def export(revision: str, folder: Path) -> Path:
    """`awf_nb` as it was at `revision`, in `folder`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "awf_nb"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def report(label: str, latencies: list[float], inside: list[float]) -> None:
    print(
        f"{label:>12}: Send → engine has the text, median {statistics.median(latencies):6.1f} ms"
        f"  (min {min(latencies):.1f}, max {max(latencies):.1f}, n={len(latencies)});"
        f" of which in the kernel, median {statistics.median(inside):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=20, help="messages to send (default 20)")
    parser.add_argument("--compare", metavar="REF", help="also measure git revision REF first")
    parser.add_argument(
        "--main-shell",
        action="store_true",
        help="widget messages through the kernel's main shell, not a subshell (JupyterLab's "
        "default: perCommTarget)",
    )
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    comms = "disabled" if args.main_shell else "perCommTarget"
    results: list[tuple[str, tuple[list[float], list[float]]]] = []
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as old:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            if args.compare:
                source = export(args.compare, Path(old))
                results.append(
                    (args.compare[:12], measure(browser, source, args.sends, "old", comms))
                )
            results.append(("this tree", measure(browser, ROOT, args.sends, "new", comms)))
        finally:
            browser.close()
    print(f"widget messages: {'main shell' if args.main_shell else 'a subshell'}")
    for label, (latencies, inside) in results:
        report(label, latencies, inside)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
