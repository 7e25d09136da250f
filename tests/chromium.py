"""Debian's Chromium, headless, for the browser tests (Playwright drives it; the Playwright
browser download is not used)."""

from __future__ import annotations

import shutil
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--no-first-run"]  # fmt: skip


def launch(playwright: Any) -> Any:
    """A headless Chromium browser (close it when done)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
