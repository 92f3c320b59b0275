"""The documentation site builds with warnings as errors: no broken link, no missing anchor,
no page left out of the navigation, and nothing fetched from another origin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.site import nav_pages

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (site / "index.html").exists()
    assert (site / "reference" / "configuration" / "index.html").exists()
    pages = list(site.rglob("*.html"))
    external = re.compile(r"""(?:src|href)=["']https?://[^"']+\.(?:css|js|woff2?)["']""")
    assert [p for p in pages if external.search(p.read_text(encoding="utf-8"))] == []
    assert [p for p in pages if "fonts.googleapis" in p.read_text(encoding="utf-8")] == []


def test_every_page_is_in_the_navigation() -> None:
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert set(nav_pages()) == on_disk
