"""The memory tools: search (now, or as of a date), get, history, add (through
reconciliation), update, delete.

Outputs are small on purpose (progressive disclosure): a search answers ids and
one-line snippets; `memory_get` opens the few a model needs. Every fact shown or
changed is checked against the caller's `Binding` first; one it may not see is
reported as absent, so a call never learns what another namespace holds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, Field, field_validator

from memlane.engine import threads
from memlane.engine.memory import manage, verify
from memlane.engine.memory.apply import Provenance
from memlane.engine.memory.recall import asks_about_change
from memlane.engine.memory.scopes import CONVERSATION_PREFIX, unqualified
from memlane.engine.memory.stale import Staleness
from memlane.engine.memory.versions import interval
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.types import Fact
from memlane.types.moments import parse_moment
from memlane.views.memories import MemoryNotFound, get_memory
from memlane.views.tools.binding import SCOPE_FORMS, Binding, ToolRefusal
from memlane.views.tools.text import day, one_line, short_id

DEFAULT_LIMIT = 8
MAX_LIMIT = 50
MAX_IDS = 20

SEARCH_SCOPE = (
    f"Where to look: {SCOPE_FORMS}. Default: this project's namespace, this session and global."
)
ADD_SCOPE = (
    "Where it belongs: 'namespace' (default: shared by this project's sessions), 'global' "
    "(every project) or 'session'."
)
"""Where a search looks and where a new memory goes, as `Binding.scope` and
`Binding.write_scope` read them."""
MemoryId = Annotated[str, Field(min_length=1, description="The memory's id (from memory_search).")]
"""The memory a tool reads or changes, named as memory_search listed it."""


class MemorySearchArgs(BaseModel):
    query: str = Field(min_length=1, description="What to look for, in a few words.")
    scope: str | None = Field(default=None, description=SEARCH_SCOPE)
    limit: int | None = Field(
        default=None, ge=1, le=MAX_LIMIT, description=f"How many (default {DEFAULT_LIMIT})."
    )
    as_of: datetime | None = Field(
        default=None,
        description="A date (YYYY-MM-DD), a time or 'now': what was true then. Default: what "
        "is true now (a question about change, e.g. 'before' or 'used to', also finds what "
        "was replaced).",
    )

    @field_validator("as_of", mode="before")
    @classmethod
    def _moment(cls, value: object) -> object:
        """A text is read as every face reads a moment (`types.moments`), 'now' included."""
        return parse_moment(value) if isinstance(value, str) else value

    @field_validator("as_of")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


class MemoryHistoryArgs(BaseModel):
    id: MemoryId


class MemoryGetArgs(BaseModel):
    ids: list[str] = Field(
        min_length=1,
        max_length=MAX_IDS,
        description="Memory ids (or their first 6+ characters) from memory_search.",
    )

    @field_validator("ids", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        if isinstance(value, str):
            return [part for part in value.replace(",", " ").split() if part]
        return value


class MemoryAddArgs(BaseModel):
    text: str = Field(min_length=1, description="The fact to remember, as one standalone sentence.")
    scope: str | None = Field(default=None, description=ADD_SCOPE)


class MemoryUpdateArgs(BaseModel):
    id: MemoryId
    text: str = Field(min_length=1, description="The corrected text, as one sentence.")


class MemoryDeleteArgs(BaseModel):
    id: MemoryId


async def conversation_namespace(rt: Runtime, scope: str) -> str | None:
    """The namespace of the session a `conv:<id>` scope belongs to (None otherwise)."""
    inner = unqualified(scope)
    if not inner.startswith(CONVERSATION_PREFIX):
        return None
    session = await threads.to_thread(rt.store.get_session, inner[len(CONVERSATION_PREFIX) :])
    return session.namespace if session is not None else None


async def checked_scope(rt: Runtime, binding: Binding, requested: str) -> str:
    scope = binding.scope(requested)
    if not binding.scope_visible(scope, await conversation_namespace(rt, scope)):
        raise ToolRefusal(
            f"no session {unqualified(scope)[len(CONVERSATION_PREFIX) :]!r} in {binding.describe()}"
        )
    return scope


async def visible_fact(rt: Runtime, binding: Binding, ref: str) -> Fact:
    """The memory `ref` names, if this binding may see it; otherwise a refusal."""
    try:
        fact = await get_memory(rt, ref)
    except MemoryNotFound as exc:
        raise ToolRefusal(f"{exc}; search with memory_search for current ids") from None
    if not binding.fact_visible(fact, await conversation_namespace(rt, fact.scope)):
        raise ToolRefusal(
            f"no memory with id {ref!r} in {binding.describe()}; search with memory_search"
        )
    return fact


async def memory_search(rt: Runtime, binding: Binding, args: MemorySearchArgs) -> str:
    scopes = binding.default_scopes()
    if args.scope is not None:
        scopes = (await checked_scope(rt, binding, args.scope),)
    await rt.memory_book.ready()
    change = args.as_of is None and asks_about_change(args.query)
    hits = await search(
        rt,
        args.query,
        scopes=scopes,
        top_k=args.limit or DEFAULT_LIMIT,
        as_of=args.as_of,
        superseded=change,
    )
    where = ", ".join(scopes) + (f" as of {day(args.as_of)}" if args.as_of else "")
    if not hits:
        return f"No memories match {args.query!r} in {where}."
    facts = await threads.to_thread(lambda: {h.ref: rt.store.get_fact(h.ref) for h in hits})
    checked = await verify.checked(rt, [f for f in facts.values() if f is not None])
    replaced = " (replaced versions too, with when each was true)" if change else ""
    lines = [
        f"{len(hits)} memories for {args.query!r} in {where}{replaced} "
        "(open the full text with memory_get and these ids):"
    ]
    for hit in hits:
        fact = facts.get(hit.ref)
        role = fact.role if fact is not None else hit.kind
        when = validity(fact) if fact is not None else day(hit.created_at)
        code = code_label(checked.get(hit.ref))
        lines.append(
            f"- {short_id(hit.ref)} [{hit.scope}, {role}, {when}{code}] {one_line(hit.text)}"
        )
    return "\n".join(lines)


def code_label(status: Staleness | None) -> str:
    """`, code: changed; noted 2026-11-02; conf/app.toml has changed since` (or nothing)."""
    if status is None or status.status == "unchecked":
        return ""
    return f", code: {status.status}" + (f"; {status.note}" if status.note else "")


def validity(fact: Fact) -> str:
    """When a fact was true (`since 2026-03-10`, `2026-01-15 → 2026-03-10, replaced`); a
    remembered turn: the day it was said."""
    if fact.role != "memory":
        return day(fact.since)
    if fact.valid_to is None:
        return interval(fact)
    return f"{interval(fact)}, {'replaced' if fact.replaced_by else 'ended'}"


async def memory_history(rt: Runtime, binding: Binding, args: MemoryHistoryArgs) -> str:
    """Every version of a memory this binding may see, oldest first, with its interval."""
    fact = await visible_fact(rt, binding, args.id)
    versions = await manage.memory_versions(rt, fact.id)
    shown = [
        v
        for v in versions
        if binding.fact_visible(v.fact, await conversation_namespace(rt, v.fact.scope))
    ]
    lines = [f"{len(shown)} version(s) of memory {short_id(fact.id)}, oldest first:"]
    for version in shown:
        f, cause = version.fact, version.cause
        said = ""
        if cause is not None:
            said = f"; said {day(cause.created_at)}: {one_line(cause.message.text, 100)}"
        lines.append(
            f"- {short_id(f.id)} [{interval(f)}, {version.state}] {one_line(f.text)}{said}"
        )
    return "\n".join(lines)


async def memory_get(rt: Runtime, binding: Binding, args: MemoryGetArgs) -> str:
    """The memories `args.ids` name, in full. When none is found the call is refused (a
    tool error naming each id and why); when some are, they come first, then the others."""
    blocks: list[str] = []
    missing: dict[str, str] = {}
    for ref in dict.fromkeys(args.ids):
        try:
            fact = await visible_fact(rt, binding, ref)
        except ToolRefusal as exc:
            missing[ref] = str(exc)
            continue
        checked = await verify.checked(rt, [fact])
        blocks.append(describe_fact(fact, checked.get(fact.id)))
    if missing:
        named = ", ".join(repr(ref) for ref in missing)
        head = f"No memory found for {named}; use memory_search to find current ids:"
        said = "\n".join([head, *(f"- {why}" for why in missing.values())])
        if not blocks:
            raise ToolRefusal(said)
        blocks.append(said)
    return "\n\n".join(blocks)


def describe_fact(fact: Fact, code: Staleness | None = None) -> str:
    lines = [f"id: {fact.id}", f"scope: {fact.scope}", f"role: {fact.role}"]
    lines.append(f"created: {fact.created_at.isoformat(timespec='seconds')}")
    if fact.updated_at != fact.created_at:
        lines.append(f"updated: {fact.updated_at.isoformat(timespec='seconds')}")
    lines.append(f"from: {fact.conversation_id}")
    if fact.source_session:
        lines.append(f"source session: {fact.source_session}")
    lines.append(f"true: {interval(fact)}")
    if fact.supersedes:
        lines.append(f"replaces: {fact.supersedes} (see memory_history)")
    if fact.deleted:
        replaced = f", replaced by {fact.replaced_by}" if fact.replaced_by else ""
        lines.append(f"deleted: yes{replaced}")
    elif fact.replaced_by:
        lines.append(f"replaced by: {fact.replaced_by} (see memory_history)")
    if fact.cites is not None:
        head = f" at commit {fact.cites.head[:7]}" if fact.cites.head else ""
        files = ", ".join(f.path for f in fact.cites.files)
        lines.append(f"cites: {files} (noted {day(fact.cites.noted_at)}{head})")
    if code is not None and code.status != "unchecked":
        lines.append(f"code: {code.status}" + (f"; {code.note}" if code.note else ""))
    lines.append(f"text: {fact.text}")
    return "\n".join(lines)


async def memory_add(rt: Runtime, binding: Binding, args: MemoryAddArgs) -> str:
    scope = binding.write_scope(args.scope)
    if unqualified(scope).startswith(CONVERSATION_PREFIX):
        scope = await checked_scope(rt, binding, scope)
    source = Provenance(binding.via, binding.session_id)
    try:
        done = await manage.reconcile_memory(rt, args.text, scope=scope, source=source)
    except ValueError as exc:
        raise ToolRefusal(str(exc)) from None
    ids = ", ".join(f.id for f in done.facts)
    if done.outcome == "known":
        known = f" as {ids}" if ids else ""
        return f"Already remembered{known} in {scope}; nothing added."
    replaced = f" (replacing {', '.join(done.replaced)})" if done.replaced else ""
    return f"Remembered in {scope} as {ids}{replaced}."


async def memory_update(rt: Runtime, binding: Binding, args: MemoryUpdateArgs) -> str:
    fact = await visible_fact(rt, binding, args.id)
    if fact.deleted:
        raise ToolRefusal(f"memory {fact.id} was deleted; add the corrected fact with memory_add")
    try:
        edited = await manage.edit_memory(rt, fact.id, args.text)
    except ValueError as exc:
        raise ToolRefusal(str(exc)) from None
    return f"Updated {edited.id} in {edited.scope}: {one_line(edited.text)}"


async def memory_delete(rt: Runtime, binding: Binding, args: MemoryDeleteArgs) -> str:
    fact = await visible_fact(rt, binding, args.id)
    if fact.deleted:
        return f"Memory {fact.id} was already deleted."
    await manage.forget_memory(rt, fact.id)
    return f"Deleted {fact.id} (kept under deleted/ in the memory files; it leaves recall)."


LISTED = 200


async def scope_listing(rt: Runtime, binding: Binding, requested: str) -> str:
    """The newest memories of one scope, one line each (the `memlane://memory/{scope}` page)."""
    scope = await checked_scope(rt, binding, requested)
    await rt.memory_book.ready()
    facts = await threads.to_thread(rt.store.list_facts, scope=scope, roles=("memory", "summary"))
    if not facts:
        return f"No memories in {scope}."
    shown = facts[-LISTED:]
    more = f" (the newest {len(shown)} of {len(facts)})" if len(facts) > len(shown) else ""
    lines = [f"Memories in {scope}{more}, oldest first:"]
    lines += [f"- {short_id(f.id)} [{f.role}, {validity(f)}] {one_line(f.text)}" for f in shown]
    return "\n".join(lines)
