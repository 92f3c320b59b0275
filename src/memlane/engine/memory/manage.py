"""Deliberate memory operations (CLI, library, admin): add, edit, supersede, forget, list,
history, export.

Each is one update: written to the truth (files or database), indexed, and
committed to git with a message saying what changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

from memlane.engine import threads
from memlane.engine.memory import cites, reuse, versions
from memlane.engine.memory.apply import IngestReport, Provenance, apply_plan, neighbourhood
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.reconcile import reconcile
from memlane.engine.memory.scopes import GLOBAL
from memlane.engine.runtime import Runtime
from memlane.files.entry_lookup import locate
from memlane.files.git import Change, GitError, GitRepo, commit_quietly
from memlane.files.git_purge import PurgeError
from memlane.files.memory_files import ENTRIES, MemoryFiles, new_id, now_utc
from memlane.files.memory_snapshot import Snapshot
from memlane.store import SearchFilter, StoreError
from memlane.types import Fact, FactRole

MAX_TEXT_CHARS = 20_000


class MemoryNotFound(LookupError):
    pass


def _clean_text(text: str) -> str:
    body = text.strip()
    if not body:
        raise ValueError("a memory needs some text")
    if len(body) > MAX_TEXT_CHARS:
        raise ValueError(f"a memory is at most {MAX_TEXT_CHARS} characters")
    return body


async def add_memory(
    rt: Runtime,
    text: str,
    *,
    scope: str = GLOBAL,
    role: FactRole = "memory",
    conversation_id: str | None = None,
    valid_from: datetime | None = None,
) -> Fact:
    """Remember `text` as it is (no extraction, no reconciliation), true from `valid_from`
    (default: now).

    An exact repeat of a current memory in the same scope and role is not stored again:
    its id is returned, so a script that adds the same line twice keeps one memory. A
    repeat that names an earlier `valid_from` records it (the memory was true before we
    knew); a later one is refused, since the memory is already true from before then.
    """
    body = _clean_text(text)
    book = rt.memory_book
    await book.ready()
    existing = await threads.to_thread(_exact_repeat, rt, body, scope, role)
    if existing is not None:
        return await _repeated(rt, existing, valid_from)
    fact = new_fact(
        scope=scope,
        conversation_id=conversation_id or scope,
        role=role,
        text=body,
        fact_id=new_id(),
        valid_from=valid_from,
    )
    fact = await cites.noted(rt, fact)
    await book.write(puts=[fact])
    since = f" (true from {versions.day(valid_from)})" if valid_from is not None else ""
    await book.commit(f"memory: added to {scope}{since}\n\n+ {_line(body)}")
    return fact


async def _repeated(rt: Runtime, existing: Fact, valid_from: datetime | None) -> Fact:
    """The memory a repeated `add` names, with its validity moved back when asked."""
    if valid_from is None or valid_from == existing.since:
        return existing
    if valid_from > existing.since:
        raise ValueError(
            f"memory {existing.id} already says this, true since {versions.day(existing.since)}: "
            f"it cannot become true later ({versions.day(valid_from)}); use `supersede` to "
            "record a change"
        )
    if existing.supersedes is not None:
        raise ValueError(
            f"memory {existing.id} already says this and replaced an earlier version on "
            f"{versions.day(existing.since)}: its start cannot move before that; see its history"
        )
    moved = replace(existing, valid_from=valid_from, updated_at=now_utc())
    await rt.memory_book.adopt([existing])
    await rt.memory_book.write(puts=[moved])
    await rt.memory_book.commit(
        f"memory: {existing.id} true from {versions.day(valid_from)}\n\n~ {_line(moved.text)}"
    )
    return moved


def _exact_repeat(rt: Runtime, body: str, scope: str, role: FactRole) -> Fact | None:
    # The keyword index ranks an identical text at or near the top; the exact comparison
    # decides. This keeps `add` independent of how many memories the scope holds.
    flt = SearchFilter(kinds=("fact",), scopes=(scope,), fact_roles=(role,))
    for hit in rt.store.keyword_search(body, flt, limit=25):
        fact = rt.store.get_fact(hit.ref)
        if fact is not None and not fact.deleted and fact.valid_to is None and fact.text == body:
            return fact
    return None


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What remembering one text through reconciliation did."""

    outcome: Literal["added", "updated", "known"]
    facts: list[Fact]
    """The facts written (added, or replacing an updated one); for `known`, the fact
    that already says it."""
    replaced: list[str]
    """Ids of facts this text closed (it replaces them) or deleted (it contradicts them)."""
    reason: str


async def reconcile_memory(
    rt: Runtime, text: str, *, scope: str, source: Provenance, model: str | None = None
) -> Reconciled:
    """Remember `text` the way an extracted fact is remembered: compared with its
    neighbourhood in `scope` and added, merged into an existing fact, or recognised as
    known. Without a usable model the reconciliation safeguards add it as it is.

    An exact repeat of a live memory in the scope is recognised without asking a model.
    """
    body = _clean_text(text)
    book = rt.memory_book
    await book.ready()
    existing_same = await threads.to_thread(_exact_repeat, rt, body, scope, "memory")
    if existing_same is not None:
        return Reconciled("known", [existing_same], [], "exact repeat")
    chosen = model or rt.memory_model()
    report = IngestReport()
    async with book.scope_lock(scope):
        existing = await neighbourhood(rt, [body], scope)
        plan = await reconcile(rt.llm, [body], existing, model=chosen)
        written = await apply_plan(book, plan, existing, scope=scope, source=source, report=report)
    replaced = [old for old, _ in plan.updates] + [d for d in plan.deletes]
    if written:
        outcome: Literal["added", "updated", "known"] = "updated" if plan.updates else "added"
        await book.commit(report.message(source.conversation_id))
        return Reconciled(outcome, written, replaced, plan.reason)
    known = [f for f in existing if f.id not in replaced][:1]
    if replaced:
        await book.commit(report.message(source.conversation_id))
    return Reconciled("known", known, replaced, plan.reason)


async def supersede_memory(
    rt: Runtime, fact_id: str, text: str, *, at: datetime | None = None
) -> tuple[Fact, Fact]:
    """Close memory `fact_id` at `at` (default now) and add `text` as its next version,
    true from then; both are kept, linked both ways. Returns (closed, new)."""
    body = _clean_text(text)
    book = rt.memory_book
    await book.ready()
    old = _not_forgotten(await get_memory(rt, fact_id))
    if old.valid_to is not None:
        raise ValueError(
            f"memory {old.id} was already replaced on {versions.day(old.valid_to)}"
            + (f" by {old.replaced_by}" if old.replaced_by else "")
            + ": supersede its latest version (see `memlane memory history`)"
        )
    moment = at or now_utc()
    if moment < old.since:
        raise ValueError(
            f"memory {old.id} only became true on {versions.day(old.since)}: "
            "it cannot be replaced before that"
        )
    stamp = now_utc()
    successor = new_fact(
        scope=old.scope,
        conversation_id=old.conversation_id,
        role=old.role,
        text=body,
        fact_id=new_id(),
        created_at=stamp,
    )
    closed, new = versions.close(old, successor, moment, updated_at=stamp)
    await book.adopt([old])
    await book.write(puts=[closed, new])
    await book.commit(
        f"memory: {old.id} replaced by {new.id} on {versions.day(moment)}\n\n"
        f"- {_line(old.text)} ({versions.interval(closed)})\n+ {_line(body)}"
    )
    return closed, new


async def memory_versions(rt: Runtime, fact_id: str) -> list[versions.Version]:
    """Every version of memory `fact_id` (a unique id prefix will do), oldest first, each
    with the message it was learned from when that message is kept."""
    await rt.memory_book.ready()
    fact = await get_memory(rt, fact_id)

    def read() -> list[versions.Version]:
        return versions.causes(rt.store, versions.chain(rt.store, fact.id))

    return await threads.to_thread(read)


MIN_ID_PREFIX = 6


async def get_memory(rt: Runtime, ref: str) -> Fact:
    """The memory `ref` names: its full id, or a unique prefix of at least 6 characters."""
    return await threads.to_thread(_find, rt, ref.strip())


def _find(rt: Runtime, ref: str) -> Fact:
    fact = rt.store.get_fact(ref)
    if fact is not None:
        return fact
    if len(ref) < MIN_ID_PREFIX:
        raise MemoryNotFound(
            f"no memory with id {ref!r}: give the full id or at least {MIN_ID_PREFIX} characters"
        )
    found = [f for f in rt.store.list_facts(include_deleted=True) if f.id.startswith(ref)]
    if not found:
        raise MemoryNotFound(f"no memory with id {ref!r} (see `memlane memory list`)")
    if len(found) > 1:
        listed = ", ".join(f.id for f in found[:5])
        raise MemoryNotFound(f"{ref!r} matches several memories ({listed}): give more characters")
    return found[0]


async def edit_memory(rt: Runtime, fact_id: str, text: str) -> Fact:
    """Replace a memory's text in place (same id: a correction, not a new fact)."""
    body = _clean_text(text)
    book = rt.memory_book
    await book.ready()
    fact = _not_forgotten(await get_memory(rt, fact_id))
    edited = await cites.noted(rt, replace(fact, text=body, updated_at=now_utc()))
    await book.adopt([fact])  # a file renamed by hand is written, not left as a second one
    await book.write(puts=[edited])
    await book.commit(f"memory: edited {fact.id}\n\n- {_line(fact.text)}\n+ {_line(body)}")
    return edited


def _not_forgotten(fact: Fact) -> Fact:
    if fact.deleted:
        raise MemoryNotFound(f"memory {fact.id} was forgotten; add a new one instead")
    return fact


async def forget_memory(rt: Runtime, fact_id: str, *, purge: bool = False) -> Fact:
    """Soft delete: the entry moves under `deleted/` and leaves the index.

    With `purge` nothing of it is kept, nor of the versions it replaced or that replaced
    it (each says the same thing at another time): the memory repository's history is
    rewritten without them and any text they had (every commit id from the first one
    changes), their files and rows go, and the store's files are cleaned; the returned
    entry is the one named. A purge that stops raises `PurgeError`, saying what is done
    and what finishes it (`MemoryBook.purge`: the same command, when git failed), and so
    does one that could not remove or check everything, saying what.
    """
    book = rt.memory_book
    await book.ready()
    fact = await get_memory(rt, fact_id)
    reuse.SEARCHES.forget()  # a kept search may hold its words
    if purge:
        every = await threads.to_thread(versions.chain, rt.store, fact.id) or [fact]
        others = [f.id for f in every if f.id != fact.id]
        also = f" and its versions {', '.join(others)}" if others else ""
        try:
            left = await book.purge(every, f"memory: purged {fact.id}{also}")
        except GitError as exc:
            raise PurgeError(
                f"nothing is removed: {exc}; the same command can run again once the cause is fixed"
            ) from None
        except StoreError as exc:
            raise PurgeError(
                "the memory is removed and its history purged, but the database's files may "
                f"still hold a copy of it until `memlane store purge` succeeds: {exc}"
            ) from None
        if left:  # no commit: it would take a file left holding it back into the history
            raise PurgeError(
                "the memory is removed and its history rewritten, but not all of it: "
                + "; ".join(left)
                + ". Until that is fixed, a file holding it brings it back and the next "
                "commit takes it into the history again; then run the same command again"
            )
        # saves the snapshot; commits only what else changed (the purge recorded itself)
        await book.commit(f"memory: purged {fact.id}{also}")
        return replace(fact, deleted=True)
    if fact.deleted:
        return fact
    await book.adopt([fact])
    await book.write(tombstones=[(fact, None)])
    await book.commit(f"memory: forgot {fact.id}\n\n- {_line(fact.text)}")
    return await get_memory(rt, fact.id)


async def list_memories(
    rt: Runtime,
    *,
    scope: str | None = None,
    roles: tuple[FactRole, ...] | None = None,
    include_deleted: bool = False,
    limit: int | None = None,
) -> list[Fact]:
    await rt.memory_book.ready()
    return await threads.to_thread(
        rt.store.list_facts,
        scope=scope,
        roles=roles,
        include_deleted=include_deleted,
        limit=limit,
    )


async def memory_history(rt: Runtime, fact: Fact, *, limit: int = 20) -> list[Change]:
    """The git commits that changed this memory's file (wherever it lived), newest first,
    each with its diff; empty without git or in PostgreSQL mode (no files)."""
    git = rt.memory_book.git
    if git is None:
        return []
    try:
        return await git.changes(f"{ENTRIES}/**/*__{fact.id}.md", limit=limit)
    except GitError:
        return []


def memory_file(rt: Runtime, fact: Fact) -> Path | None:
    """Where the memory lives as a Markdown file, whatever a person named it or wherever
    they moved it (`files.entry_lookup`: its name, else the snapshot's paths, read from
    its file here, so this runs beside the book's writer); None in PostgreSQL mode."""
    files = rt.memory_book.files
    if files is None:
        return None
    snapshot = Snapshot.load(files.root) if files.find(fact) is None else None
    found = locate(files, [fact], snapshot=snapshot).of(fact.id)
    return found[0] if found else None


async def export_tree(
    rt: Runtime,
    destination: Path,
    *,
    git: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write every entry (tombstones included) as the Markdown tree under `destination`."""
    facts = await threads.to_thread(rt.store.list_facts, include_deleted=True)
    files = MemoryFiles(destination)

    def write() -> None:
        for number, fact in enumerate(facts, start=1):
            files.write(fact)
            if progress is not None:
                progress(number, len(facts))

    await threads.to_thread(write)
    if git:
        await commit_quietly(GitRepo(destination), f"memory: export of {len(facts)} entries")
    return len(facts)


def _line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:199] + "…"
