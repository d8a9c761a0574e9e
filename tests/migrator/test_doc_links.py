"""Every relative link of the README, CHANGELOG and docs/ pages names a file of the repository (a moved or
split module, as migrator/risks.py was, must not leave docs/reference/rules.md pointing at nothing)."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]


def _targets(page: Path) -> list[str]:
    found = []
    for token in MarkdownIt().parse(page.read_text(encoding="utf-8")):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(child.attrs["href"])
            if child.type == "image":
                found.append(child.attrs["src"])
    return found


def test_relative_links_name_files_that_exist():
    missing = []
    for page in PAGES:
        for target in _targets(page):
            path = target.split("#", 1)[0]
            if not path or "://" in path or path.startswith("mailto:"):
                continue
            if not (page.parent / path).exists():
                missing.append(f"{page.relative_to(REPO)}: {target}")
    assert not missing, missing
