"""memlane: local-first memory for LLM agents.

The library face. Names are imported on first use, so `import memlane` (and the
CLI's start-up) stays fast and loads no model:

- `Memory` / `AsyncMemory`: long-term memory (add, search, augment, remember, forget,
  supersede, history: facts with the time they were true); `MemoryNotFound` when an id
  names no memory;
- `govern` / `agovern` / `GovernedHistory` / `ContextOverflow`: context governance
  on Chat Completions message lists;
- `open_runtime` / `Runtime` / `working_context`: the engine in-process (running
  summaries for agent loops);
- `Settings` / `load`: configuration, with the same precedence as the CLI.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AsyncMemory": "memlane.memory",
    "ContextOverflow": "memlane.governance",
    "GovernedHistory": "memlane.governance",
    "Memory": "memlane.memory",
    "MemoryHit": "memlane.memory",
    "MemoryNotFound": "memlane.engine.memory.manage",
    "MemoryVersion": "memlane.memory",
    "Runtime": "memlane.engine.runtime",
    "Settings": "memlane.config",
    "WorkingContext": "memlane.engine.sessions.working",
    "agovern": "memlane.governance",
    "govern": "memlane.governance",
    "load": "memlane.library",
    "open_runtime": "memlane.library",
    "working_context": "memlane.engine.sessions.working",
}

__all__ = [
    "AsyncMemory",
    "ContextOverflow",
    "GovernedHistory",
    "Memory",
    "MemoryHit",
    "MemoryNotFound",
    "MemoryVersion",
    "Runtime",
    "Settings",
    "WorkingContext",
    "__version__",
    "agovern",
    "govern",
    "load",
    "open_runtime",
    "working_context",
]

if TYPE_CHECKING:
    from memlane.config import Settings
    from memlane.engine.memory.manage import MemoryNotFound
    from memlane.engine.runtime import Runtime
    from memlane.engine.sessions.working import WorkingContext, working_context
    from memlane.governance import ContextOverflow, GovernedHistory, agovern, govern
    from memlane.library import load, open_runtime
    from memlane.memory import AsyncMemory, Memory, MemoryHit, MemoryVersion


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memlane' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
