"""Every relative link in the README, CONTRIBUTING.md and the docs site points at a file that exists, and
every #anchor at a heading of that file: the front door and the pages it sends a newcomer to stay whole."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from foundation.paths import REPO_ROOT

pytestmark = pytest.mark.unit

PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) makes it."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set[str]:
    text, fenced = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            text.append(_slug(line.lstrip("#")))
    return set(text)


def _links(page: Path) -> list[str]:
    out, fenced = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out += LINK.findall(line)
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == [], f"{page.relative_to(REPO_ROOT)}: {broken}"


def test_the_readme_is_a_front_door():
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    start = lines.index("## Quick start")
    fence = lines.index("```", start + 1)
    assert lines[fence + 1:lines.index("```", fence + 1)] == ["make demo", "make test"]


def test_every_docs_page_is_in_the_site_nav():
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    pages = [str(p.relative_to(REPO_ROOT / "docs")) for p in (REPO_ROOT / "docs").rglob("*.md")]
    assert [p for p in pages if p not in nav] == []
