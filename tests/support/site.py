"""The documentation site's pages in reading order, for the tests that check them."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def nav_pages() -> list[str]:
    """The site's pages (paths under `docs/`) in the order its navigation lists them."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            found.append(entry)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)

    walk(config["nav"])
    return found
