"""`make docs`: the site builds with `--strict` (no broken link, no page left out) and loads
nothing from another host, so it builds and reads offline."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# An attribute that makes a browser fetch: scripts, styles, images, frames, fonts.
FETCHED = re.compile(
    r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*?\b(?:src|href)=\"(https?://[^\"]+)\"",
    re.I,
)
CSS_URL = re.compile(r"(?:url\(\s*['\"]?|@import\s+['\"])(https?://[^'\")]+)", re.I)


def test_the_site_builds_strict_and_offline(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 15
    outside = {
        f"{page.relative_to(site)}: {url}"
        for page in pages
        for url in FETCHED.findall(page.read_text())
    }
    outside |= {
        f"{sheet.relative_to(site)}: {url}"
        for sheet in site.rglob("*.css")
        for url in CSS_URL.findall(sheet.read_text())
    }
    assert not outside, "the site loads from other hosts:\n" + "\n".join(sorted(outside))
