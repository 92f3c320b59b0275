"""Reference tables generated from the code itself, for the documentation site and `--help` pages.

`scripts/update_readme.py` writes them into `docs/reference/` between markers.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import SecretStr

from memlane.config import Settings


def config_table() -> str:
    rows = ["| setting (env) | default | description |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default: Any = field.get_default(call_default_factory=True)  # a list's `[]`, too
        empty = default is None or (isinstance(default, dict | list | tuple) and not default)
        shown = "—" if empty or isinstance(default, SecretStr) else f"`{default}`"
        # a docstring's line breaks are only where its source wrapped: one line in a table cell
        description = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `MEMLANE_{name.upper()}` | {shown} | {description} |")
    return "\n".join(rows)


def cli_table() -> str:
    from memlane.cli.app import app

    root = typer.main.get_command(app)
    rows = ["| command | what it does |", "| --- | --- |"]
    for path, command in _walk(root, ["memlane"]):
        rows.append(f"| `{' '.join(path)}` | {_summary(command.help or '')} |")
    return "\n".join(rows)


def _summary(help_text: str) -> str:
    """A command's first paragraph, on one line: its docstring's first line alone cut some
    sentences where the source wrapped them."""
    first = help_text.strip().split("\n\n")[0]
    return " ".join(first.split()).replace("|", "\\|")


def _walk(command: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    """Leaf commands under a click command tree (typer ships its own click, so duck-typed).

    Groups are asked for their commands (`list_commands` / `get_command`), so the root's
    lazily imported groups are loaded and walked like the others.
    """
    if not hasattr(command, "list_commands"):
        return [(path, command)]
    ctx = typer.Context(command)
    found: list[tuple[list[str], Any]] = []
    for name in sorted(command.list_commands(ctx)):
        found.extend(_walk(command.get_command(ctx, name), [*path, name]))
    return found


def header_table() -> str:
    """The `X-Memlane-*` request headers the proxy reads, and what each does."""
    from memlane.proxy.headers import MEMLANE_HEADERS

    rows = ["| header | effect |", "| --- | --- |"]
    rows += [f"| `{name}` | {effect} |" for name, effect in MEMLANE_HEADERS.items()]
    return "\n".join(rows)


def client_header_table() -> str:
    """Other clients' headers the proxy reads (passed on untouched), and what each does."""
    from memlane.proxy.headers import CLIENT_HEADERS

    rows = ["| header | effect |", "| --- | --- |"]
    rows += [
        f"| {', '.join(f'`{n.strip()}`' for n in names.split(','))} | {effect} |"
        for names, effect in CLIENT_HEADERS.items()
    ]
    return "\n".join(rows)


def mcp_table() -> str:
    """memlane's MCP tools, their arguments and when a model should use them."""
    from memlane.views.tools import TOOLS
    from memlane.views.tools.args import usage

    rows = ["| tool | arguments | what it is for |", "| --- | --- | --- |"]
    for tool in TOOLS:
        takes = usage(tool.args).removeprefix("It takes ").rstrip(".")
        first = tool.description.split(". ")[0].rstrip(".") + "."
        writes = "" if tool.read_only else " *(writes)*"
        rows.append(f"| `{tool.name}` | {takes} | {first}{writes} |".replace("no arguments", "—"))
    return "\n".join(rows)
