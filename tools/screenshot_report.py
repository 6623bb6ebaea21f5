"""Render a report.html in headless Chromium and save a PNG screenshot of it.

Checks what a person sees: the page renders offline with its plots. Needs Debian's ``chromium``
(``apt-get install chromium``). Run:
``python tools/screenshot_report.py out/report.html out/report.png``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1200,2400"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(report: Path, png: Path) -> None:
    browser = chromium()
    if browser is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}",
                        f"--screenshot={png.resolve()}", report.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)


if __name__ == "__main__":
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"wrote {sys.argv[2]}")
