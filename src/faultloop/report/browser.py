"""The HTML report as a browser renders it: Debian's headless chromium, for the tests that check
the rendered page and for the screenshot in docs/.

    faultloop screenshot results/fault_injection/quick/report.html docs/report.png
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# Headless, offline and stateless: no GPU, no network chatter, a fresh profile per call. As root
# chromium refuses to start without --no-sandbox.
FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
NAMES = ("chromium", "chromium-browser")


class BrowserError(RuntimeError):
    """chromium is missing or could not render the page."""


def find_chromium() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


def _run(page: Path, *action: str, timeout_s: float) -> str:
    binary = find_chromium()
    if binary is None:
        raise BrowserError("chromium is not installed (Debian: apt-get install chromium; `make test` installs it)")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        argv = [
            binary,
            *FLAGS,
            *(["--no-sandbox"] if os.geteuid() == 0 else []),
            f"--user-data-dir={profile}",
            *action,
            page.resolve().as_uri(),
        ]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"chromium did not render {page} within {timeout_s:g} s") from None
    if done.returncode != 0:
        raise BrowserError(f"chromium exited {done.returncode} on {page}: {done.stderr[-1000:]}")
    return done.stdout


def rendered_dom(page: Path, *, timeout_s: float = 120) -> str:
    """The page's DOM after chromium has loaded and laid it out."""
    return _run(page, "--dump-dom", timeout_s=timeout_s)


def screenshot(page: Path, png: Path, *, width: int = 1400, height: int = 2400, timeout_s: float = 120) -> None:
    """A picture of the top of the page, width x height CSS pixels."""
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(page, f"--screenshot={png.resolve()}", f"--window-size={width},{height}", timeout_s=timeout_s)
    if not png.is_file():
        raise BrowserError(f"chromium wrote no screenshot of {page}")
