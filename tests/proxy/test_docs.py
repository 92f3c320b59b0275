"""The documented proxy header table is the code's (one place per fact)."""

from __future__ import annotations

from pathlib import Path

from memlane.docs import header_table
from memlane.proxy.headers import MEMLANE_HEADERS, PREFIX

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "http-api.md"


def test_the_reference_lists_every_memlane_header() -> None:
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- proxy-headers -->\n")[1].split("\n<!-- /proxy-headers -->")[0]
    assert block == header_table()
    assert all(name.lower().startswith(PREFIX) for name in MEMLANE_HEADERS)
