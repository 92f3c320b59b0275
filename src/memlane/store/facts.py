"""The `FactStore` role, written once for every SQL backend, and how an entry is indexed.

A remembered turn is indexed with its neighbours (`store.documents`): indexing
one reads the live turns around it and indexes again those whose window now
holds it. That walk, and rebuilding every turn's document, are the same on
every backend; a backend supplies only how it writes a document (`_put_doc`;
`_put_docs` for a group, where it can do that in fewer statements) and how it
replaces the terms of a turn's document (`_retext_turn`).
"""

from __future__ import annotations

import itertools
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Unpack

from memlane.store.arguments import FactQuery, Tombstone
from memlane.store.codec import FACT_COLUMNS, FACT_TIMES, fact_to_row, now
from memlane.store.documents import AFTER, BEFORE, TURN_ROLES, Doc, is_turn, turn_document
from memlane.store.documents import turn_documents as documents_of_turns
from memlane.store.rows import fact_from_row
from memlane.store.sql import D, SqlStore, Where, among, marks, select
from memlane.types import Fact

Progress = Callable[[int, int], None]
_COLUMNS = ", ".join(FACT_COLUMNS)
_UPSERT = (
    f"INSERT INTO facts ({_COLUMNS}) VALUES ({marks(FACT_COLUMNS)}) ON CONFLICT (id) DO UPDATE "
    f"SET {', '.join(f'{c} = excluded.{c}' for c in FACT_COLUMNS if c != 'id')}"
)


def fact_doc(fact: Fact) -> Doc:
    """A fact's search document: under its conversation; a tombstone's stays, inactive."""
    return Doc(
        "fact",
        fact.id,
        fact.scope,
        fact.conversation_id,
        fact.role,
        fact.text,
        fact.created_at,
        not fact.deleted,
    )


def live_turns(db: D, fact: Fact, direction: str, limit: int) -> list[Fact]:
    """The live turns of `fact`'s conversation just before ("<") or after (">") it, nearest
    first."""
    order = "DESC" if direction == "<" else "ASC"
    rows = db.all(
        f"SELECT {_COLUMNS} FROM facts WHERE conversation_id = ? AND scope = ? "
        f"AND deleted = ? AND {among('role', TURN_ROLES)} AND created_at {direction} ? "
        f"ORDER BY created_at {order}, {db.seq} {order} LIMIT ?",
        fact.conversation_id,
        fact.scope,
        False,
        *TURN_ROLES,
        db.time(fact.created_at),
        limit,
    )
    return [fact_from_row(r) for r in rows]


Put = Callable[[D, Doc, str | None], None]
PutMany = Callable[[D, Sequence[tuple[Doc, str | None]]], None]
"""Writes several documents (each with what the index reads, or None: its text)."""


def index_fact(db: D, fact: Fact, put: Put[D]) -> None:
    """Index one entry as its conversation stands: a turn with its neighbours' words (the
    neighbours are not indexed again; `index_facts` does that)."""
    put(db, fact_doc(fact), _neighbourhood(db, fact)[0])


def index_facts(db: D, facts: Sequence[Fact], put: PutMany[D]) -> None:
    """Index entries written together, once their rows are all in: each is indexed once
    with the neighbours it has then, and each turn whose neighbourhood now holds one of
    them is indexed again once (one by one, the turns of a conversation re-indexed each
    other as each next one came: twice the reads and documents).

    The turns' neighbours are read once per conversation (`_window`), not per entry: a
    proxy's batch holds a user and an assistant turn of each of many conversations."""
    written = {fact.id for fact in facts}
    documents: dict[str, str] = {}
    again: dict[str, Fact] = {}
    for turns in _by_conversation(facts).values():
        window = _window(db, turns)
        built = documents_of_turns(window)
        place = {turn.id: i for i, turn in enumerate(window)}
        for turn in turns:
            i = place[turn.id]
            documents[turn.id] = built[turn.id]
            for other in (*window[max(0, i - AFTER) : i], *window[i + 1 : i + 1 + BEFORE]):
                if other.id not in written and other.id not in again:
                    again[other.id] = other
                    documents[other.id] = built[other.id]
    put(
        db,
        [
            *((fact_doc(fact), documents.get(fact.id)) for fact in facts),
            *((fact_doc(other), documents[other.id]) for other in again.values()),
        ],
    )


def _by_conversation(facts: Sequence[Fact]) -> dict[tuple[str, str], list[Fact]]:
    """The live turns among `facts`, by (scope, conversation)."""
    groups: dict[tuple[str, str], list[Fact]] = {}
    for fact in facts:
        if is_turn(fact):
            groups.setdefault((fact.scope, fact.conversation_id), []).append(fact)
    return groups


def _window(db: D, turns: Sequence[Fact]) -> list[Fact]:
    """The live turns of one conversation in order, from before the earliest of `turns` to
    after the latest, wide enough that every turn whose document holds one of them has
    its own neighbours in it too (`BEFORE` + `AFTER` on each side)."""
    first = min(turns, key=lambda t: t.created_at)
    last = max(turns, key=lambda t: t.created_at)
    between = db.all(
        f"SELECT {_COLUMNS} FROM facts WHERE conversation_id = ? AND scope = ? "
        f"AND deleted = ? AND {among('role', TURN_ROLES)} AND created_at >= ? "
        f"AND created_at <= ? ORDER BY created_at, {db.seq}",
        first.conversation_id,
        first.scope,
        False,
        *TURN_ROLES,
        db.time(first.created_at),
        db.time(last.created_at),
    )
    return [
        *reversed(live_turns(db, first, "<", BEFORE + AFTER)),
        *(fact_from_row(r) for r in between),
        *live_turns(db, last, ">", BEFORE + AFTER),
    ]


def _neighbourhood(db: D, fact: Fact) -> tuple[str | None, list[Fact]]:
    """A turn's document, and the turns whose documents hold its words (the one before
    it; those after it, when it came late); None and none for any other entry."""
    if not is_turn(fact):
        return None, []
    before = live_turns(db, fact, "<", BEFORE)
    after = live_turns(db, fact, ">", BEFORE)
    document = turn_document(
        fact, [t.text for t in reversed(before)], [t.text for t in after[:AFTER]]
    )
    return document, [*before[:AFTER], *after[:BEFORE]]


def rebuild_turns(
    db: D,
    retext: Callable[[D, str, str], int],
    progress: Progress | None = None,
    *,
    conversations: Sequence[str] | None = None,
) -> int:
    """Index live turns again with their neighbours (a migration, a load, `memory
    reindex`), all of them or those of `conversations`; returns how many changed.
    `retext(db, ref, document)` replaces one turn's indexed words, returning 1 if changed."""
    only = "" if conversations is None else f"AND {among('conversation_id', conversations)} "
    # Every column, whatever they are: a migration runs this on the table as it was then.
    rows = db.all(
        f"SELECT * FROM facts WHERE deleted = ? AND {among('role', TURN_ROLES)} "
        f"{only}ORDER BY scope, conversation_id, created_at, {db.seq}",
        False,
        *TURN_ROLES,
        *(conversations or ()),
    )
    facts = [fact_from_row(r) for r in rows]
    changed = 0
    done = 0
    for _, group in itertools.groupby(facts, key=lambda f: (f.scope, f.conversation_id)):
        turns = list(group)
        for ref, document in documents_of_turns(turns).items():
            changed += retext(db, ref, document)
        done += len(turns)
        if progress is not None:
            progress(done, len(facts))
    return changed


def loaded_documents(
    db: D, facts: Sequence[Fact], retext: Callable[[D, str, str], int]
) -> list[tuple[Doc, str | None]]:
    """The search documents of facts a load has just inserted, in their order, each built
    once (a turn with its neighbours: those the batch brought and those stored before,
    whose own documents `retext` indexes again where the batch changed their window).
    What a bulk load inserts in one go, instead of indexing each turn twice."""
    new = {f.id: f for f in facts}
    built: dict[str, tuple[Doc, str | None]] = {
        f.id: (fact_doc(f), None) for f in facts if not is_turn(f)
    }
    conversations = sorted({f.conversation_id for f in facts if is_turn(f)})
    if conversations:
        rows = db.all(
            f"SELECT * FROM facts WHERE deleted = ? AND {among('role', TURN_ROLES)} "
            f"AND {among('conversation_id', conversations)} "
            f"ORDER BY scope, conversation_id, created_at, {db.seq}",
            False,
            *TURN_ROLES,
            *conversations,
        )
        turns = [fact_from_row(r) for r in rows]
        for _, group in itertools.groupby(turns, key=lambda f: (f.scope, f.conversation_id)):
            for ref, document in documents_of_turns(list(group)).items():
                if ref in new:
                    built[ref] = (fact_doc(new[ref]), document)
                else:
                    retext(db, ref, document)
    return [built[f.id] for f in facts if f.id in built]


class SqlFacts(SqlStore[D]):
    @abstractmethod
    def _retext_turn(self, db: D, ref: str, document: str) -> int:
        """Replace the indexed words of a turn's document; 1 if they changed, else 0."""

    def _put_docs(self, db: D, docs: Sequence[tuple[Doc, str | None]]) -> None:
        """Write several documents; a backend that can do it in fewer statements does."""
        for doc, document in docs:
            self._put_doc(db, doc, document)

    def put_fact(self, fact: Fact) -> None:
        self.put_facts([fact])

    def put_facts(self, facts: Sequence[Fact]) -> None:
        with self._writing() as db:
            for fact in facts:
                row = fact_to_row(fact)
                for name in FACT_TIMES:
                    moment = getattr(fact, name)
                    row[name] = None if moment is None else db.time(moment)
                db.run(_UPSERT, *[row[c] for c in FACT_COLUMNS])
            index_facts(db, facts, self._put_docs)

    def reindex_turns(self, progress: Progress | None = None) -> int:
        with self._writing() as db:
            return rebuild_turns(db, self._retext_turn, progress)

    def get_fact(self, fact_id: str) -> Fact | None:
        with self._reading() as db:
            row = db.one(f"SELECT {_COLUMNS} FROM facts WHERE id = ?", fact_id)
        return fact_from_row(row) if row else None

    def list_facts(self, **query: Unpack[FactQuery]) -> list[Fact]:
        where = Where().equal("scope", query.get("scope"))
        where.equal("conversation_id", query.get("conversation_id"))
        roles = query.get("roles")
        if roles is not None:
            where.add(among("role", roles), *roles)
        ids = query.get("ids")
        if ids is not None:
            where.add(among("id", ids), *ids)
        if not query.get("include_deleted", False):
            where.add("deleted = ?", False)
        with self._reading() as db:
            order = f"created_at, {db.seq}"
            rows = select(db, _COLUMNS, "facts", where, order, query.get("limit"))
        return [fact_from_row(r) for r in rows]

    def delete_fact(self, fact_id: str, **tombstone: Unpack[Tombstone]) -> bool:
        stamp = now()
        at, updated_at = tombstone.get("at"), tombstone.get("updated_at")
        with self._writing() as db:
            turn = self._live_turn(db, fact_id)
            deleted = db.run(
                "UPDATE facts SET deleted = ?, replaced_by = coalesce(?, replaced_by), "
                "valid_to = coalesce(valid_to, ?), updated_at = ?, source_turns = NULL "
                "WHERE id = ?",
                True,
                tombstone.get("replaced_by"),
                db.time(at or stamp),
                db.time(updated_at or stamp),
                fact_id,
            )
            db.run("UPDATE docs SET active = ? WHERE kind = 'fact' AND ref = ?", False, fact_id)
            if turn is not None:
                self._reindex_around(db, turn)
        return deleted > 0

    def purge_fact(self, fact_id: str) -> bool:
        with self._writing() as db:
            turn = self._live_turn(db, fact_id)
            db.run("DELETE FROM docs WHERE kind = 'fact' AND ref = ?", fact_id)
            purged = db.run("DELETE FROM facts WHERE id = ?", fact_id) > 0
            if turn is not None:
                self._reindex_around(db, turn)
            return purged

    def _live_turn(self, db: D, fact_id: str) -> Fact | None:
        row = db.one(f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND deleted = ?", fact_id, False)
        found = fact_from_row(row) if row else None
        return found if found is not None and is_turn(found) else None

    def _reindex_around(self, db: D, gone: Fact) -> None:
        """The turns whose documents held `gone`'s words as a neighbour's, indexed again
        without them: a deleted turn must not stay findable through the turns beside it."""
        for other in (*live_turns(db, gone, "<", AFTER), *live_turns(db, gone, ">", BEFORE)):
            index_fact(db, other, self._put_doc)
