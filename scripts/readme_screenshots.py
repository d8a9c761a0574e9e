"""Redraws the screenshots of the README and docs/using/reports.md (docs/img/) from the pages `make demo` writes and
the tests' two-run data, in headless Chromium (Debian's package).
Run after `make demo`:  .venv/bin/python scripts/readme_screenshots.py"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from reports.compat_report import write_report

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "img"
DEMO = REPO / "out"
TWO_RUNS = [REPO / "tests/reports/data/results-v2-sim.jsonl", REPO / "tests/reports/data/results-v2-hw.jsonl"]
WIDTH = 1400


def main() -> int:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    pages = [DEMO / "compat.html", DEMO / "checklist.html"]
    if not all(page.is_file() for page in pages) or not Path(chromium).exists():
        print(
            "error: run `make demo` first, with chromium installed (scripts/install-chromium.sh)",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        runs = Path(folder) / "compat.html"
        if write_report(TWO_RUNS, runs, "html") != 0:
            return 2
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        # The reference run: environment, headline, charts (the top of the page).
        page.goto(pages[0].as_uri())
        page.screenshot(path=str(IMAGES / "compat-report.png"), full_page=True, clip=_clip(page, 1700))
        # Two runs side by side, scrolled to the matrix with one row's evidence open.
        page.goto(runs.as_uri())
        page.click('#arch-gpt2 td.verdict[data-run="0"] button')
        page.locator("#matrix-section").scroll_into_view_if_needed()
        page.screenshot(path=str(IMAGES / "compat-runs.png"))
        page.goto(pages[1].as_uri())
        page.screenshot(path=str(IMAGES / "checklist.png"), full_page=True, clip=_clip(page, 1560))
        browser.close()
    print(f"Wrote compat-report.png, compat-runs.png and checklist.png to {IMAGES}")
    return 0


def _clip(page, height: int) -> dict:
    return {
        "x": 0,
        "y": 0,
        "width": WIDTH,
        "height": min(height, page.evaluate("document.body.scrollHeight")),
    }


if __name__ == "__main__":
    sys.exit(main())
