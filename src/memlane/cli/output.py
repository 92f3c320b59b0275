"""Where commands print, and how one fails: shared by the global options (`cli.state`) and
every command (`cli.context`, which re-exports them).

What memlane prints holds what people and models wrote (memories, titles, file paths),
and rich reads `[...]` in a string as markup and `:name:` as an emoji: `[/red]` in a
memory raised `MarkupError` and took `memory list` down for the whole store, and
`root:x:0:0` printed as `root❌0:0`. So no console turns codes into emoji, and text
from data goes through `escape` (in an f-string) or `cells` (a table's row) before rich
sees it; memlane's own styles stay markup.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

__all__ = ["cells", "console", "err_console", "escape", "fail", "warn"]

console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)


def cells(*values: str) -> list[Text]:
    """A table row's texts, printed as they are (no markup, no emoji)."""
    return [Text(value) for value in values]


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print a one-line error (no traceback: this is a user's mistake or the machine's state)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def warn(message: str, *, label: str = "warning") -> None:
    """Print a one-line warning on stderr (`label`: what kind, in yellow)."""
    err_console.print(f"[yellow]{label}:[/] {escape(message)}", highlight=False, soft_wrap=True)
