"""The global options every command reads, kept light: the root imports this on every run.

Settings are loaded (pydantic, the config file) only when a command asks for them,
so `memlane --version` and `memlane --help` never pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from memlane.config import LoadedSettings, Settings


@dataclass
class CliState:
    """Global options, set by the root callback, read by every command."""

    config_file: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    adopt_running: bool = True
    """Take the running proxy's upstreams when none is configured (not for `serve` itself)."""
    _loaded: LoadedSettings | None = None

    def loaded(self, *, lenient: bool = False) -> LoadedSettings:
        """The settings every command reads. `lenient`: a bad key or value in the file or
        environment is left out and reported, not fatal (`memlane config show`)."""
        if self._loaded is None:
            from memlane.cli.output import fail, warn
            from memlane.config import ConfigError, load_settings

            try:
                self._loaded = load_settings(
                    config_file=self.config_file, overrides=self.overrides, lenient=lenient
                )
            except ConfigError as exc:
                fail(str(exc))
            if self.adopt_running:
                from memlane.cli.running import with_running_upstreams

                self._loaded = with_running_upstreams(self._loaded)
            for note in self._loaded.warnings:
                warn(note)
        return self._loaded

    @property
    def settings(self) -> Settings:
        return self.loaded().settings


def state(ctx: typer.Context) -> CliState:
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj
