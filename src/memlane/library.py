"""The engine in-process, for agent code that keeps its own loop and wants no proxy.

    import memlane

    with memlane.open_runtime() as rt:                      # the embedded defaults
        ctx = asyncio.run(memlane.working_context(rt, session_id))

`open_runtime` builds the same `Runtime` the proxy and the CLI use (settings from
defaults < config file < `MEMLANE_*` env < keyword overrides), so every face
reads and writes the same store and files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memlane.config import Settings, load_settings
from memlane.engine.runtime import Runtime
from memlane.store import open_store

log = logging.getLogger("memlane")


def load(*, config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings as the CLI would load them, with keyword overrides on top."""
    loaded = load_settings(config_file=config_file, overrides=overrides)
    for note in loaded.warnings:
        log.warning("%s", note)
    return loaded.settings


@contextmanager
def open_runtime(settings: Settings | None = None, **overrides: Any) -> Iterator[Runtime]:
    """A runtime over the configured store; closed on exit."""
    settings = settings or load(**overrides)
    runtime = Runtime(settings, open_store(settings))
    try:
        yield runtime
    finally:
        runtime.close()
