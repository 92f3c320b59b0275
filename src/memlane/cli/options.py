"""Options several commands take, defined once so their flag and help read the same
everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
"""`--json`: what a script reads instead of the table or sentence a person gets."""
