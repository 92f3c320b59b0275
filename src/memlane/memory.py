"""memlane's long-term memory as a library, without the proxy.

    from memlane.memory import Memory

    memory = Memory(home="~/.local/share/memlane")   # or Memory(settings)
    memory.add("The user prefers tabs", scope="ns:my-repo")
    memory.search("indentation style")                # every scope, as the CLI searches
    memory.search("indentation style", scopes=["ns:my-repo", "global"])
    messages = memory.augment(chat_messages, namespace="my-repo")
    memory.remember("I moved to Oslo", "Noted!", conversation="c1", namespace="my-repo")
    memory.search("where does the user live", scopes=["ns:my-repo"], as_of=last_spring)
    memory.history(memory_id)       # every version, with when each was true
    memory.close()

`AsyncMemory` is the core (await its methods inside an event loop, or use it
as `async with AsyncMemory() as memory:`); `Memory` is a thin synchronous
wrapper with the same methods and parameters that runs it on its own loop
(`with Memory() as memory:`). Both use the same engine as the proxy: the same
files, index, retrieval stages and write path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any, TypeVar, get_args

from memlane.config import Settings
from memlane.engine.memory import manage
from memlane.engine.memory import scopes as scoping
from memlane.engine.memory.apply import IngestReport
from memlane.engine.memory.block import render
from memlane.engine.memory.ingest import TurnInput, ingest_turn
from memlane.engine.memory.lifecycle import stop_memory
from memlane.engine.memory.recall import recall
from memlane.engine.memory.versions import Version
from memlane.engine.runtime import Runtime
from memlane.library import load
from memlane.store import open_store
from memlane.text.embeddings import Embedder
from memlane.text.llm import LLM
from memlane.types import FactRole
from memlane.types.moments import MOMENT_FORMS, parse_moment

T = TypeVar("T")
Moment = datetime | date | str
"""A time a method takes: a datetime, a date (00:00 UTC that day) or an ISO 8601 string
(`2026-02-15`, `2026-02-15T09:30`, UTC unless it names its offset) or `now`."""
__all__ = ["AsyncMemory", "Memory", "MemoryHit", "MemoryVersion"]


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One memory a search found.

    `score` means the same for every kind of memory (facts, remembered turns, session
    summaries): its relevance to the query relative to the best match of the same search
    (1.0 is the best; keyword and embedding scores fused, a fact lifted to the turns that
    echo it), blended with how recent it is (`memory_recency_weight`). It orders one
    search's results: it is not a probability, and two searches' scores do not compare.
    """

    id: str
    role: str
    text: str
    scope: str
    score: float
    created_at: datetime
    valid_from: datetime | None = None
    """When it became true (None when the hit is not a stored memory)."""
    valid_to: datetime | None = None
    """When it stopped being true; None: still true."""


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """One version of a memory, as `history` tells it: what, when true, what caused it."""

    id: str
    text: str
    role: str
    scope: str
    valid_from: datetime
    valid_to: datetime | None
    deleted: bool
    replaced_by: str | None
    supersedes: str | None
    source_session: str | None
    source_message: int | None
    cause: str | None
    """The text of the message it was learned from, when that message is kept."""
    cause_at: datetime | None


def version_of(version: Version) -> MemoryVersion:
    fact, cause = version.fact, version.cause
    return MemoryVersion(
        id=fact.id,
        text=fact.text,
        role=fact.role,
        scope=fact.scope,
        valid_from=fact.since,
        valid_to=fact.valid_to,
        deleted=fact.deleted,
        replaced_by=fact.replaced_by,
        supersedes=fact.supersedes,
        source_session=fact.source_session,
        source_message=fact.source_message,
        cause=cause.message.text if cause is not None else None,
        cause_at=cause.created_at if cause is not None else None,
    )


class AsyncMemory:
    """Long-term memory over one data home (async core)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        home: str | Path | None = None,
        runtime: Runtime | None = None,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self._owns = runtime is None
        if runtime is None:
            if settings is None:
                overrides = {"home": Path(home).expanduser()} if home is not None else {}
                settings = load(**overrides)
            runtime = Runtime(settings, open_store(settings), _llm=llm, _embedder=embedder)
        self.runtime = runtime

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def add(
        self,
        text: str,
        *,
        scope: str = scoping.GLOBAL,
        role: FactRole = "memory",
        valid_from: Moment | None = None,
    ) -> str:
        """Remember `text` as it is, true from `valid_from` (default now); returns its id.

        Adding a text the scope already holds returns the existing memory's id; an
        earlier `valid_from` moves when it became true back to that date, and a later one
        is refused (it is already true since before: `supersede` records a change)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, not {type(text).__name__}")
        if role not in get_args(FactRole):
            raise ValueError(f"role must be one of {', '.join(get_args(FactRole))}, not {role!r}")
        since = _moment(valid_from, "valid_from")
        fact = await manage.add_memory(
            self.runtime, text, scope=scoping.parse_scope(scope), role=role, valid_from=since
        )
        return fact.id

    async def supersede(self, memory_id: str, text: str, *, at: Moment | None = None) -> str:
        """Close memory `memory_id` at `at` (default now) and add `text` as its next
        version, true from then (both kept, linked); returns the new version's id."""
        when = _moment(at, "at")
        _, new = await manage.supersede_memory(self.runtime, memory_id, text, at=when)
        return new.id

    async def history(self, memory_id: str) -> list[MemoryVersion]:
        """Every version of a memory, oldest first, with when each was true and the
        message it came from (when kept)."""
        return [version_of(v) for v in await manage.memory_versions(self.runtime, memory_id)]

    async def remember(
        self,
        user: str,
        assistant: str = "",
        *,
        conversation: str,
        namespace: str | None = None,
        model: str | None = None,
        at: Moment | None = None,
    ) -> IngestReport:
        """Run the whole write path on one exchange: turns, facts (LLM), summary, eviction.

        `at` is when the user wrote it (default now): facts are true from then, and
        relative dates in them ("yesterday") are resolved against it. The report's
        `reason` says how the facts were decided, or why there were none (extraction
        off, the LLM for it not configured, refused or failing, no fact in the message).
        """
        said_at = _moment(at, "at")
        item = TurnInput(
            session_id=conversation,
            namespace=namespace or conversation,
            model=model or self.runtime.memory_model(),
            user_text=user,
            assistant_text=assistant,
            said_at=said_at,
        )
        return await ingest_turn(self.runtime, item)

    async def search(
        self,
        query: str,
        *,
        scopes: Sequence[str] | None = None,
        top_k: int | None = None,
        as_of: Moment | None = None,
    ) -> list[MemoryHit]:
        """Memories for `query`: those true now, or at `as_of` (a datetime, a date or an
        ISO 8601 string), from `scopes` (default: every scope, as `memlane memory search`
        does; `["global"]` for one). A text kept in several scopes comes once per scope,
        each hit naming its own."""
        then = _moment(as_of, "as_of")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be 1 or more, not {top_k}")
        if isinstance(scopes, str):  # one scope: a string is a sequence of its letters
            raise TypeError(f"scopes takes a list of scopes: scopes=[{scopes!r}]")
        wanted = [_scope(s) for s in scopes] if scopes is not None else None
        found = await recall(
            self.runtime, query, scopes=wanted, as_of=then, distinct=False, top_k=top_k
        )
        return [
            MemoryHit(
                r.candidate.ref,
                r.role,
                r.text,
                r.candidate.scope,
                r.candidate.score,
                r.candidate.created_at,
                r.fact.since if r.fact is not None else None,
                r.fact.valid_to if r.fact is not None else None,
            )
            for r in found
        ]

    async def augment(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        conversation: str | None = None,
        namespace: str | None = None,
    ) -> list[dict[str, Any]]:
        """Chat messages with recalled memories inserted before the latest user message."""
        out = [dict(m) for m in messages]
        query = next(
            (str(m.get("content") or "") for m in reversed(out) if m.get("role") == "user"), ""
        )
        if not query.strip():
            return out
        settings = self.runtime.settings
        wanted = scoping.recall_scopes(settings, conversation, namespace or conversation or "")
        if namespace is None and conversation is None:
            wanted = (scoping.GLOBAL,)
        present = {str(m.get("content") or "").strip() for m in out}
        found = await recall(self.runtime, query, scopes=wanted, exclude=present)
        if not found:
            return out
        last_user = max(i for i, m in enumerate(out) if m.get("role") == "user")
        block = {"role": "user", "content": render(found)}
        return [*out[:last_user], block, *out[last_user:]]

    async def forget(self, memory_id: str) -> bool:
        fact = await manage.forget_memory(self.runtime, memory_id)
        return fact.deleted

    async def close(self) -> None:
        """Finish background work and commit what waits for git, then close the store."""
        await self.runtime.settle()
        await stop_memory(self.runtime)
        if self._owns:
            self.runtime.close()


class Memory:
    """The synchronous face of `AsyncMemory` (for scripts and sync frameworks)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        home: str | Path | None = None,
        runtime: Runtime | None = None,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self._runner = asyncio.Runner()
        self._closed = False
        self._core = AsyncMemory(settings, home=home, runtime=runtime, llm=llm, embedder=embedder)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if _loop_running():
            coro.close()  # never awaited: no warning about it on top of the error
            raise RuntimeError(
                "Memory is the synchronous face and cannot run inside an event loop: use "
                "AsyncMemory there (`async with AsyncMemory() as memory: await memory.search(…)`)"
            )
        return self._runner.run(coro)

    def add(
        self,
        text: str,
        *,
        scope: str = scoping.GLOBAL,
        role: FactRole = "memory",
        valid_from: Moment | None = None,
    ) -> str:
        """See `AsyncMemory.add`."""
        return self._run(self._core.add(text, scope=scope, role=role, valid_from=valid_from))

    def supersede(self, memory_id: str, text: str, *, at: Moment | None = None) -> str:
        """See `AsyncMemory.supersede`."""
        return self._run(self._core.supersede(memory_id, text, at=at))

    def history(self, memory_id: str) -> list[MemoryVersion]:
        """See `AsyncMemory.history`."""
        return self._run(self._core.history(memory_id))

    def remember(
        self,
        user: str,
        assistant: str = "",
        *,
        conversation: str,
        namespace: str | None = None,
        model: str | None = None,
        at: Moment | None = None,
    ) -> IngestReport:
        """See `AsyncMemory.remember`."""
        return self._run(
            self._core.remember(
                user, assistant, conversation=conversation, namespace=namespace, model=model, at=at
            )
        )

    def search(
        self,
        query: str,
        *,
        scopes: Sequence[str] | None = None,
        top_k: int | None = None,
        as_of: Moment | None = None,
    ) -> list[MemoryHit]:
        """See `AsyncMemory.search`."""
        return self._run(self._core.search(query, scopes=scopes, top_k=top_k, as_of=as_of))

    def augment(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        conversation: str | None = None,
        namespace: str | None = None,
    ) -> list[dict[str, Any]]:
        """See `AsyncMemory.augment`."""
        return self._run(
            self._core.augment(messages, conversation=conversation, namespace=namespace)
        )

    def forget(self, memory_id: str) -> bool:
        return self._run(self._core.forget(memory_id))

    def close(self) -> None:
        """Finish and close; a second call does nothing (`with` closes after a `close`)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._core.close())
        finally:
            self._runner.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _scope(text: str) -> str:
    return scoping.parse_scope(text)


def _moment(value: Moment | None, name: str) -> datetime | None:
    """A time parameter as the engine takes it: a datetime as given, a date at 00:00 UTC,
    a string read as the CLI reads `--as-of` (`types.moments`); a clear error else."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    if isinstance(value, str):
        try:
            return parse_moment(value)
        except ValueError as exc:
            raise ValueError(f"{name} {exc}") from None
    raise TypeError(
        f"{name} takes a datetime, a date or a string ({MOMENT_FORMS}), not {type(value).__name__}"
    )
