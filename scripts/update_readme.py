"""Regenerate the reference tables that are derived from code (settings, CLI, headers, MCP tools).

Run `.venv/bin/python scripts/update_readme.py`: it rewrites every table between
`<!-- name -->` and `<!-- /name -->` markers in the README and the documentation
site (`docs/`, mostly `docs/reference/`). `tests/test_readme.py` fails when a page
is out of date, so the tables can never drift from the code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memlane.docs import (  # noqa: E402
    cli_table,
    client_header_table,
    config_table,
    header_table,
    mcp_table,
)

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def tables() -> dict[str, str]:
    """Each marker's name and the table the code renders for it."""
    return {
        "config-table": config_table(),
        "cli-table": cli_table(),
        "proxy-headers": header_table(),
        "client-headers": client_header_table(),
        "mcp-tools": mcp_table(),
    }


def pages() -> list[Path]:
    """Every page a generated table may live in: the README, then the site's sources."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def render(text: str) -> str:
    for name, table in tables().items():
        pattern = re.compile(rf"<!-- {name} -->.*?(<!-- /{name} -->|$)", re.S)
        block = f"<!-- {name} -->\n{table}\n<!-- /{name} -->"
        if f"<!-- {name} -->" in text:
            text = pattern.sub(lambda _m, b=block: b, text, count=1)
    return text


if __name__ == "__main__":
    for page in pages():
        text = page.read_text(encoding="utf-8")
        rendered = render(text)
        if rendered != text:
            page.write_text(rendered, encoding="utf-8")
            print(f"updated {page.relative_to(ROOT)}")
    print("every generated table is up to date")
