"""The panel's CSS and JavaScript are package files: loaded at import, and shipped in the
wheel (a non-editable install has them too)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from awf_nb.frontends.notebook import panel_items as panel

REPO = Path(__file__).resolve().parents[3]


def test_the_assets_are_loaded_from_the_package() -> None:
    assert panel.PANEL_CSS.startswith("<style>") and panel.PANEL_CSS.endswith("</style>")
    assert ".awf-panel {" in panel.PANEL_CSS
    assert "window.__awfPanelKeys" in panel.ENTER_TO_SEND_JS


@pytest.mark.slow
def test_the_wheel_ships_the_assets(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("awf_nb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "awf_nb/frontends/notebook/panel.css" in names
    assert "awf_nb/frontends/notebook/panel.js" in names
    assert "awf_nb/frontends/notebook/status_view.js" in names
    assert "awf_nb/frontends/notebook/composer.js" in names
