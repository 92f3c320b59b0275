"""Options several commands take, defined once so their flag and help read the same
everywhere."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memlane.cli.context import moment

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
"""`--json`: what a script reads instead of the table or sentence a person gets."""


def date_option(flag: str, help: str) -> Any:
    """An option that takes a DATE: `2026-02-15`, an ISO 8601 time or `now`, read into a
    UTC datetime (`context.moment`) before the command runs; a clear error else."""
    return typer.Option(flag, help=help, metavar="DATE", parser=lambda text: moment(text, flag))
