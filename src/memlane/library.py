"""The engine in-process, for agent code that keeps its own loop and wants no proxy.

    import memlane

    async with memlane.open_runtime() as rt:                # the embedded defaults
        ctx = await memlane.working_context(rt, "my-session")  # a key, id or name

    with memlane.open_runtime() as rt:                      # or synchronously
        ...

`open_runtime` builds the same `Runtime` the proxy and the CLI use (settings from
defaults < config file < `MEMLANE_*` env < keyword overrides), so every face
reads and writes the same store and files.
"""

from __future__ import annotations

import logging
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


class open_runtime:  # a function to its callers, a context manager in fact
    """A runtime over the configured store, for `with` or `async with`; closed on exit.

    Leaving `async with` also finishes the background work the runtime queued (facts,
    summaries, git commits), as `AsyncMemory.close` does; leaving `with` closes the
    store only, because no event loop is left to finish that work on.
    """

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self._settings = settings or load(**overrides)
        self._runtime: Runtime | None = None

    def __enter__(self) -> Runtime:
        self._runtime = Runtime(self._settings, open_store(self._settings))
        return self._runtime

    def __exit__(self, *exc: object) -> None:
        if self._runtime is not None:
            self._runtime.close()

    async def __aenter__(self) -> Runtime:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        from memlane.engine.memory.lifecycle import stop_memory

        runtime = self._runtime
        if runtime is None:
            return
        try:
            await runtime.settle()
            await stop_memory(runtime)
        finally:
            runtime.close()
