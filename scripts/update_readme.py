"""Regenerate the README tables that are derived from code (settings, CLI, headers, MCP tools).

Run `.venv/bin/python scripts/update_readme.py`; `tests/test_readme.py` fails when
the README is out of date, so the tables can never drift from the code.
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


def render(text: str) -> str:
    tables = (
        ("config-table", config_table()),
        ("cli-table", cli_table()),
        ("proxy-headers", header_table()),
        ("client-headers", client_header_table()),
        ("mcp-tools", mcp_table()),
    )
    for name, table in tables:
        pattern = re.compile(rf"<!-- {name} -->.*?(<!-- /{name} -->|$)", re.S)
        block = f"<!-- {name} -->\n{table}\n<!-- /{name} -->"
        if f"<!-- {name} -->" in text:
            text = pattern.sub(lambda _m, b=block: b, text, count=1)
    return text


if __name__ == "__main__":
    README.write_text(render(README.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"updated {README}")
