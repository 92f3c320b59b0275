"""Where commands print, and how one fails: shared by the global options (`cli.state`) and
every command (`cli.context`, which re-exports them)."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print a one-line error (no traceback: this is a user's mistake or the machine's state)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
