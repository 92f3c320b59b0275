"""The PostgreSQL schema as named migrations, applied once each at start-up.

Every replica runs `migrate` when it opens the store. A session-level advisory
lock makes replicas that start at the same moment take turns: the first one
applies what is missing, the others find it recorded and go on. Each migration
runs in its own transaction, so a crash leaves the schema at a named step.
Migration names follow the same `mNNN_name` list as the SQLite backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import psycopg

from memlane.store.base import StoreError
from memlane.store.postgres.advisory import LOCK_CLASS, MIGRATION_LOCK

Migration = Callable[[psycopg.Connection[tuple[object, ...]]], None]


def m001_initial(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Sessions, their messages, events and state; facts; the derived search index.

    `seq` columns keep insertion order (SQLite's rowid) for ties; they are not dumped.
    """
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(
        """
        CREATE TABLE sessions (
            id text PRIMARY KEY,
            seq bigserial NOT NULL,
            key text NOT NULL UNIQUE,
            namespace text NOT NULL,
            title text,
            parent_id text,
            fork_position integer,
            summary text NOT NULL DEFAULT '',
            summarized_count integer NOT NULL DEFAULT 0,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            prompt_tokens bigint NOT NULL DEFAULT 0,
            completion_tokens bigint NOT NULL DEFAULT 0,
            cost_usd double precision NOT NULL DEFAULT 0,
            message_count integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX sessions_namespace ON sessions (namespace, updated_at, seq)")
    conn.execute("CREATE INDEX sessions_updated ON sessions (updated_at, seq)")
    conn.execute(
        """
        CREATE TABLE session_state (
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            name text NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (session_id, name)
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE messages (
            id bigserial PRIMARY KEY,
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            position integer NOT NULL,
            role text NOT NULL,
            kind text NOT NULL,
            origin text NOT NULL,
            wire text NOT NULL,
            content jsonb NOT NULL,
            text text NOT NULL DEFAULT '',
            content_hash text NOT NULL,
            token_count integer NOT NULL DEFAULT 0,
            status text NOT NULL DEFAULT 'ok',
            created_at timestamptz NOT NULL,
            UNIQUE (session_id, position)
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE events (
            id bigserial PRIMARY KEY,
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            kind text NOT NULL,
            payload jsonb NOT NULL,
            text text NOT NULL DEFAULT '',
            created_at timestamptz NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX events_session ON events (session_id, id)")
    conn.execute(
        """
        CREATE TABLE facts (
            id text PRIMARY KEY,
            seq bigserial NOT NULL,
            scope text NOT NULL,
            conversation_id text NOT NULL,
            role text NOT NULL,
            text text NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            deleted boolean NOT NULL DEFAULT false,
            replaced_by text,
            summary_kind text,
            source_session text,
            source_message bigint,
            content_hash text NOT NULL DEFAULT ''
        )
        """
    )
    conn.execute("CREATE INDEX facts_scope ON facts (scope, created_at, seq)")
    conn.execute("CREATE INDEX facts_conversation ON facts (conversation_id, created_at, seq)")
    conn.execute("CREATE INDEX facts_order ON facts (created_at, seq)")
    # The search index is derived from the rows above (never dumped, rebuilt on load).
    conn.execute(
        """
        CREATE TABLE docs (
            seq bigserial NOT NULL,
            kind text NOT NULL,
            ref text NOT NULL,
            scope text NOT NULL,
            session_id text,
            role text,
            text text NOT NULL,
            terms tsvector NOT NULL,
            length integer NOT NULL,
            created_at timestamptz NOT NULL,
            active boolean NOT NULL DEFAULT true,
            PRIMARY KEY (kind, ref)
        )
        """
    )
    conn.execute("CREATE INDEX docs_terms ON docs USING gin (terms)")
    conn.execute("CREATE INDEX docs_session ON docs (session_id)")
    conn.execute("CREATE INDEX docs_scope ON docs (scope)")
    conn.execute("CREATE UNIQUE INDEX docs_seq ON docs (seq)")
    # One row per (document, model); an HNSW index per dimension is added on first use.
    conn.execute(
        """
        CREATE TABLE vectors (
            kind text NOT NULL,
            ref text NOT NULL,
            model text NOT NULL,
            dim integer NOT NULL,
            embedding vector NOT NULL,
            PRIMARY KEY (kind, ref, model),
            FOREIGN KEY (kind, ref) REFERENCES docs (kind, ref) ON DELETE CASCADE
        )
        """
    )
    conn.execute("CREATE INDEX vectors_model ON vectors (model, dim)")
    conn.execute("CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)")


def m002_turn_context(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Remembered turns are indexed with their date and neighbours (`store.documents`)."""
    from memlane.store.postgres.index import rebuild_turn_documents  # the store's own indexing

    rebuild_turn_documents(conn)


def m003_inspector(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """What the inspector's pages read: counters per day, and events by kind across sessions."""
    conn.execute(
        """
        CREATE TABLE daily_counts (
            day text NOT NULL,
            name text NOT NULL,
            value bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (day, name)
        )
        """
    )
    conn.execute("CREATE INDEX events_kind ON events (kind, id)")
    conn.execute("CREATE INDEX facts_live_scope ON facts (deleted, scope)")


def m004_fact_validity(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Facts know when they were true (`valid_from`, `valid_to`) and what they replaced
    (`supersedes`). Existing data carries over: a tombstone's validity ends when it was
    deleted, and a fact an update put in place links back to the tombstone it replaced."""
    conn.execute(
        "ALTER TABLE facts ADD COLUMN valid_from timestamptz, "
        "ADD COLUMN valid_to timestamptz, ADD COLUMN supersedes text"
    )
    # what a search at a moment leaves out: the facts replaced, and those not yet true
    conn.execute("CREATE INDEX facts_valid_to ON facts (valid_to) WHERE valid_to IS NOT NULL")
    conn.execute("CREATE INDEX facts_valid_from ON facts ((coalesce(valid_from, created_at)))")
    conn.execute("UPDATE facts SET valid_to = updated_at WHERE deleted")
    conn.execute(
        "UPDATE facts f SET supersedes = (SELECT old.id FROM facts old "
        "WHERE old.replaced_by = f.id ORDER BY old.updated_at, old.seq LIMIT 1) "
        "WHERE EXISTS (SELECT 1 FROM facts old WHERE old.replaced_by = f.id)"
    )


def m005_session_tenants(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Every session belongs to a tenant ('' without tenancy) and a key is unique within
    its tenant, so two credentials using one key get two sessions."""
    conn.execute("ALTER TABLE sessions ADD COLUMN tenant text NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_key_key")
    conn.execute("ALTER TABLE sessions ADD CONSTRAINT sessions_tenant_key UNIQUE (tenant, key)")
    conn.execute("CREATE INDEX sessions_tenant ON sessions (tenant, updated_at, seq)")


def m006_fact_sources(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """An extracted fact records the remembered turns it came from (`Fact.source_turns`, a
    JSON array of entry ids), so recall can bring them with it; facts stored before carry
    none."""
    conn.execute("ALTER TABLE facts ADD COLUMN source_turns text")


def m007_session_documents(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """A session that session indexing summarised is a search document of its namespace
    (`store.documents.session_doc`), found by recall in the namespace's other sessions."""
    from memlane.store.postgres.index import index_session_summaries  # the store's indexing

    index_session_summaries(conn)


def m008_fact_cites(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """A memory records the project files it names, as they were when it was noted
    (`Fact.cites`, JSON text), so recall can say when the code moved on; memories stored
    before cite nothing."""
    conn.execute("ALTER TABLE facts ADD COLUMN cites text")


def m009_no_message_documents(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Messages are no search documents (`store.message_log` says why): their documents
    go, with any vector of theirs."""
    conn.execute("DELETE FROM vectors WHERE kind = 'message'")
    conn.execute("DELETE FROM docs WHERE kind = 'message'")


def m010_session_client_digest(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """A session keeps the digest of its stored client history up to a position
    (`History.digest`), so a resent history is matched without reading all of it;
    sessions stored before have none until their next turn reads their history once."""
    conn.execute(
        "ALTER TABLE sessions ADD COLUMN client_digest text, ADD COLUMN client_digest_end integer"
    )


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("m001_initial", m001_initial),
    ("m002_turn_context", m002_turn_context),
    ("m003_inspector", m003_inspector),
    ("m004_fact_validity", m004_fact_validity),
    ("m005_session_tenants", m005_session_tenants),
    ("m006_fact_sources", m006_fact_sources),
    ("m007_session_documents", m007_session_documents),
    ("m008_fact_cites", m008_fact_cites),
    ("m009_no_message_documents", m009_no_message_documents),
    ("m010_session_client_digest", m010_session_client_digest),
)


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Apply the missing migrations in order; return the names applied now.

    `conn` must be in autocommit mode: the advisory lock is held across the
    per-migration transactions.
    """
    conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, MIGRATION_LOCK))
    try:
        _refuse_foreign(conn)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations ("
            " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = {str(r[0]) for r in conn.execute("SELECT name FROM migrations")}
        known = {name for name, _ in MIGRATIONS}
        unknown = sorted(applied - known)
        if unknown:
            raise StoreError(
                f"the database has migrations this memlane does not know ({', '.join(unknown)}): "
                "it was written by a newer memlane; upgrade memlane"
            )
        done: list[str] = []
        for name, step in MIGRATIONS:
            if name in applied:
                continue
            with conn.transaction():
                step(conn)
                conn.execute("INSERT INTO migrations (name) VALUES (%s)", (name,))
            done.append(name)
        return done
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, MIGRATION_LOCK))


def _refuse_foreign(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Tables of ours without our migrations record belong to another application."""
    row = conn.execute(
        "SELECT to_regclass('migrations') IS NULL, "
        "array_remove(ARRAY[to_regclass('sessions')::text, to_regclass('messages')::text, "
        "to_regclass('facts')::text], NULL)"
    ).fetchone()
    assert row is not None
    missing_record, clashes = row[0], cast("list[str]", row[1])
    if missing_record and clashes:
        raise StoreError(
            f"the database already has tables named {', '.join(clashes)} that are not "
            "memlane's; memlane leaves them alone: give it its own database or schema"
        )
