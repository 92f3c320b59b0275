"""The SQLite schema as named migrations, each applied once, in a transaction, at open.

Add a migration by appending a new `mNNN_*` function to `MIGRATIONS`; never
edit one that has shipped. The `migrations` table records what was applied, so
a database written by a newer memlane is recognised and left alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memlane.store.codec import now, ts_to_text
from memlane.store.sqlite.tags import doc_tags

# Characters the analyser keeps inside a term (`src/app.py`, `snake_case`, `a:b`, `#12`, `c++`);
# FTS5's tokenizer in the migrations that kept an FTS5 index (m001-m010, dropped by m011).
FTS_TOKENIZER = "unicode61 remove_diacritics 0 tokenchars '_./-:#@+'"


_SESSION_FIELDS = """namespace TEXT NOT NULL,
            title TEXT,
            parent_id TEXT,
            fork_position INTEGER,
            summary TEXT NOT NULL DEFAULT '',
            summarized_count INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            message_count INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL"""
"""The sessions columns after `id` and `key` as m001 created them, which m008's rebuild
keeps as they were (`_SESSION_COLUMNS` names them). Part of two migrations: never changed;
a new column is a new migration."""


def m001_initial(conn: sqlite3.Connection) -> None:
    statements = [
        f"""CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            key TEXT NOT NULL UNIQUE,
            {_SESSION_FIELDS}
        )""",
        "CREATE INDEX sessions_updated ON sessions(updated_at)",
        "CREATE INDEX sessions_namespace ON sessions(namespace, updated_at)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            origin TEXT NOT NULL,
            wire TEXT NOT NULL,
            content TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            content_hash TEXT NOT NULL,
            token_count INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'ok',
            created_at TEXT NOT NULL,
            UNIQUE (session_id, position)
        )""",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            text TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX events_session ON events(session_id, kind, id)",
        """CREATE TABLE session_state (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (session_id, name)
        )""",
        """CREATE TABLE facts (
            id TEXT PRIMARY KEY,
            scope TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0,
            replaced_by TEXT,
            summary_kind TEXT,
            source_session TEXT,
            source_message INTEGER,
            content_hash TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX facts_scope ON facts(scope, created_at)",
        "CREATE INDEX facts_conversation ON facts(conversation_id, created_at)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        # The search index: one row per searchable text, derived from the tables above.
        """CREATE TABLE docs (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            scope TEXT NOT NULL,
            session_id TEXT,
            role TEXT,
            text TEXT NOT NULL,
            terms TEXT NOT NULL,
            created_at TEXT NOT NULL,
            active INTEGER NOT NULL DEFAULT 1,
            UNIQUE (kind, ref)
        )""",
        "CREATE INDEX docs_session ON docs(session_id)",
        f"""CREATE VIRTUAL TABLE docs_fts USING fts5(
            terms, content='docs', content_rowid='rowid', tokenize="{FTS_TOKENIZER}"
        )""",
        """CREATE TRIGGER docs_fts_insert AFTER INSERT ON docs BEGIN
            INSERT INTO docs_fts(rowid, terms) VALUES (new.rowid, new.terms);
        END""",
        """CREATE TRIGGER docs_fts_delete AFTER DELETE ON docs BEGIN
            INSERT INTO docs_fts(docs_fts, rowid, terms) VALUES ('delete', old.rowid, old.terms);
        END""",
        """CREATE TRIGGER docs_fts_update AFTER UPDATE OF terms ON docs BEGIN
            INSERT INTO docs_fts(docs_fts, rowid, terms) VALUES ('delete', old.rowid, old.terms);
            INSERT INTO docs_fts(rowid, terms) VALUES (new.rowid, new.terms);
        END""",
        """CREATE TABLE vectors (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            doc_id INTEGER NOT NULL REFERENCES docs(rowid) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vec BLOB NOT NULL,
            UNIQUE (doc_id, model)
        )""",
        "CREATE INDEX vectors_model ON vectors(model, id)",
        # Bumped whenever cached vector rows become stale (a vector removed, a document
        # moved to another scope), so every process's in-memory vector cache reloads.
        "CREATE TABLE vector_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)",
        "INSERT INTO vector_epoch (id, n) VALUES (1, 0)",
        """CREATE TRIGGER vectors_deleted AFTER DELETE ON vectors BEGIN
            UPDATE vector_epoch SET n = n + 1 WHERE id = 1;
        END""",
        """CREATE TRIGGER docs_moved AFTER UPDATE OF kind, scope, session_id, role ON docs
            WHEN old.kind IS NOT new.kind OR old.scope IS NOT new.scope
              OR old.session_id IS NOT new.session_id OR old.role IS NOT new.role
        BEGIN
            UPDATE vector_epoch SET n = n + 1 WHERE id = 1;
        END""",
    ]
    for statement in statements:
        conn.execute(statement)


def m002_fts_filter_tags(conn: sqlite3.Connection) -> None:
    """Index scope, session and kind tags in a second FTS5 column (see `doc_tags`)."""
    conn.execute("ALTER TABLE docs ADD COLUMN tags TEXT NOT NULL DEFAULT ''")
    rows = conn.execute("SELECT rowid, kind, scope, session_id FROM docs").fetchall()
    conn.executemany(
        "UPDATE docs SET tags = ? WHERE rowid = ?",
        [(doc_tags(kind, scope, session), rowid) for rowid, kind, scope, session in rows],
    )
    for statement in [
        "DROP TRIGGER docs_fts_insert",
        "DROP TRIGGER docs_fts_delete",
        "DROP TRIGGER docs_fts_update",
        "DROP TABLE docs_fts",
        f"""CREATE VIRTUAL TABLE docs_fts USING fts5(
            terms, tags, content='docs', content_rowid='rowid', tokenize="{FTS_TOKENIZER}"
        )""",
        """CREATE TRIGGER docs_fts_insert AFTER INSERT ON docs BEGIN
            INSERT INTO docs_fts(rowid, terms, tags) VALUES (new.rowid, new.terms, new.tags);
        END""",
        """CREATE TRIGGER docs_fts_delete AFTER DELETE ON docs BEGIN
            INSERT INTO docs_fts(docs_fts, rowid, terms, tags)
            VALUES ('delete', old.rowid, old.terms, old.tags);
        END""",
        """CREATE TRIGGER docs_fts_update AFTER UPDATE OF terms, tags ON docs BEGIN
            INSERT INTO docs_fts(docs_fts, rowid, terms, tags)
            VALUES ('delete', old.rowid, old.terms, old.tags);
            INSERT INTO docs_fts(rowid, terms, tags) VALUES (new.rowid, new.terms, new.tags);
        END""",
        "INSERT INTO docs_fts(docs_fts) VALUES ('rebuild')",
    ]:
        conn.execute(statement)


def m003_fts_insert_without_trigger(conn: sqlite3.Connection) -> None:
    """The store writes FTS rows itself when it inserts documents (2.5x faster than a
    trigger); the delete and update triggers stay."""
    conn.execute("DROP TRIGGER docs_fts_insert")


# How many recent changes `doc_changes` keeps; a cache further behind reloads.
DOC_CHANGES_KEPT = 65_536


def m004_doc_changes(conn: sqlite3.Connection) -> None:
    """A log of documents deleted or changed in a way the keyword index sees.

    Each process keeps its own in-memory keyword index (`sqlite.keyword_index`);
    new documents it finds by rowid, and this log tells it which older ones
    to read again. Inserts are not logged (rowids only grow); the log prunes
    itself, and a reader that fell behind the pruning reloads.
    """
    for statement in [
        """CREATE TABLE doc_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            doc_id INTEGER NOT NULL
        )""",
        """CREATE TRIGGER docs_logged_delete AFTER DELETE ON docs BEGIN
            INSERT INTO doc_changes (doc_id) VALUES (old.rowid);
        END""",
        """CREATE TRIGGER docs_logged_update AFTER UPDATE ON docs
            WHEN old.terms IS NOT new.terms OR old.tags IS NOT new.tags
              OR old.active IS NOT new.active OR old.kind IS NOT new.kind
              OR old.scope IS NOT new.scope OR old.session_id IS NOT new.session_id
              OR old.role IS NOT new.role
        BEGIN
            INSERT INTO doc_changes (doc_id) VALUES (new.rowid);
        END""",
        f"""CREATE TRIGGER doc_changes_pruned AFTER INSERT ON doc_changes
            WHEN new.seq % 1024 = 0
        BEGIN
            DELETE FROM doc_changes WHERE seq <= new.seq - {DOC_CHANGES_KEPT};
        END""",
    ]:
        conn.execute(statement)


def m005_turn_context(conn: sqlite3.Connection) -> None:
    """Remembered turns are indexed with their date and neighbours (`store.documents`)."""
    from memlane.store.sqlite.index import rebuild_turn_documents  # the store's own indexing

    rebuild_turn_documents(conn)


def m006_inspector(conn: sqlite3.Connection) -> None:
    """What the inspector's pages read: counters per day, events by kind across sessions, and
    live entries per scope."""
    conn.execute(
        """CREATE TABLE daily_counts (
            day TEXT NOT NULL,
            name TEXT NOT NULL,
            value INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (day, name)
        )"""
    )
    conn.execute("CREATE INDEX events_kind ON events(kind, id)")
    # live entries per scope, counted from the index alone (no table read per entry)
    conn.execute("CREATE INDEX facts_live_scope ON facts(deleted, scope)")
    conn.execute("CREATE INDEX facts_created ON facts(created_at)")  # newest first, any scope


def m007_fact_validity(conn: sqlite3.Connection) -> None:
    """Facts know when they were true (`valid_from`, `valid_to`) and what they replaced
    (`supersedes`). Existing data carries over: a tombstone's validity ends when it was
    deleted, and a fact an update put in place links back to the tombstone it replaced."""
    for statement in [
        "ALTER TABLE facts ADD COLUMN valid_from TEXT",
        "ALTER TABLE facts ADD COLUMN valid_to TEXT",
        "ALTER TABLE facts ADD COLUMN supersedes TEXT",
        # what a search at a moment leaves out: the facts replaced, and those not yet true
        "CREATE INDEX facts_valid_to ON facts (valid_to) WHERE valid_to IS NOT NULL",
        "CREATE INDEX facts_valid_from ON facts (coalesce(valid_from, created_at))",
        "UPDATE facts SET valid_to = updated_at WHERE deleted = 1",
        """UPDATE facts SET supersedes = (
            SELECT old.id FROM facts old WHERE old.replaced_by = facts.id
            ORDER BY old.updated_at, old.rowid LIMIT 1
        ) WHERE EXISTS (SELECT 1 FROM facts old WHERE old.replaced_by = facts.id)""",
    ]:
        conn.execute(statement)


_SESSION_COLUMNS = (
    "id, key, namespace, title, parent_id, fork_position, summary, summarized_count, metadata, "
    "prompt_tokens, completion_tokens, cost_usd, message_count, created_at, updated_at"
)


def m008_session_tenants(conn: sqlite3.Connection) -> None:
    """Every session belongs to a tenant ('' without tenancy) and a key is unique within
    its tenant, so two credentials using one key get two sessions.

    SQLite cannot drop the old `UNIQUE (key)`: the table is rebuilt (foreign keys are
    off while migrations run, so nothing cascades), keeping rowid order for ties.
    """
    for statement in [
        f"""CREATE TABLE sessions_new (
            id TEXT PRIMARY KEY,
            key TEXT NOT NULL,
            {_SESSION_FIELDS},
            tenant TEXT NOT NULL DEFAULT '',
            UNIQUE (tenant, key)
        )""",
        f"INSERT INTO sessions_new ({_SESSION_COLUMNS}) "
        f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY rowid",
        "DROP TABLE sessions",
        "ALTER TABLE sessions_new RENAME TO sessions",
        "CREATE INDEX sessions_updated ON sessions(updated_at)",
        "CREATE INDEX sessions_namespace ON sessions(namespace, updated_at)",
        "CREATE INDEX sessions_tenant ON sessions(tenant, updated_at)",
    ]:
        conn.execute(statement)


def m009_fact_sources(conn: sqlite3.Connection) -> None:
    """An extracted fact records the remembered turns it came from (`Fact.source_turns`, a
    JSON array of entry ids), so recall can bring them with it. Facts stored before carry
    none: their files are the truth, and they hold no such links."""
    conn.execute("ALTER TABLE facts ADD COLUMN source_turns TEXT")


def m010_session_documents(conn: sqlite3.Connection) -> None:
    """A session that session indexing summarised is a search document of its namespace
    (`store.documents.session_doc`), found by recall in the namespace's other sessions."""
    from memlane.store.sqlite.index import index_session_summaries  # the store's own indexing

    index_session_summaries(conn)


def m011_keyword_index_in_process(conn: sqlite3.Connection) -> None:
    """Drop FTS5: the in-process keyword index (`sqlite.keyword_index`) reads `docs.terms`
    and answers every query, so keeping FTS5 in step was about half of each append's cost
    for an index nothing read. `tags` stay: the keyword index counts them in a document's
    length, as FTS5 did, so every score is what it was."""
    for statement in [
        "DROP TRIGGER IF EXISTS docs_fts_delete",
        "DROP TRIGGER IF EXISTS docs_fts_update",
        "DROP TABLE IF EXISTS docs_fts",
    ]:
        conn.execute(statement)


def m012_client_history_index(conn: sqlite3.Connection) -> None:
    """Every turn reads its session's stored client messages (`message_log.CLIENT_HISTORY`:
    their ids and content hashes, to find where a resent history departs from them). Through
    `UNIQUE (session_id, position)` each row came from the table itself, a page or more of
    its content and text per message; this index holds all the query reads (the rowid is
    in every index), so a 200-message history is read in a third of the time."""
    conn.execute(
        "CREATE INDEX IF NOT EXISTS messages_client_history "
        "ON messages(session_id, position, origin, status, content_hash)"
    )


def m013_fact_cites(conn: sqlite3.Connection) -> None:
    """A memory records the project files it names, as they were when it was noted
    (`Fact.cites`, JSON text), so recall can say when the code moved on. Memories stored
    before cite nothing: they are never checked."""
    conn.execute("ALTER TABLE facts ADD COLUMN cites TEXT")


def m014_no_message_documents(conn: sqlite3.Connection) -> None:
    """Messages are no search documents (`store.message_log` says why): their documents
    go, with any vector of theirs. Once, at the first start of this version: a store of
    a million messages takes seconds; the freed pages are reused, not returned."""
    conn.execute(
        "DELETE FROM vectors WHERE doc_id IN (SELECT rowid FROM docs WHERE kind = 'message')"
    )
    conn.execute("DELETE FROM docs WHERE kind = 'message'")


def m015_session_client_digest(conn: sqlite3.Connection) -> None:
    """A session keeps the digest of its stored client history up to a position
    (`History.digest`), so a resent history is matched without reading all of it;
    sessions stored before have none until their next turn reads their history once."""
    conn.execute("ALTER TABLE sessions ADD COLUMN client_digest TEXT")
    conn.execute("ALTER TABLE sessions ADD COLUMN client_digest_end INTEGER")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_initial,
    m002_fts_filter_tags,
    m003_fts_insert_without_trigger,
    m004_doc_changes,
    m005_turn_context,
    m006_inspector,
    m007_fact_validity,
    m008_session_tenants,
    m009_fact_sources,
    m010_session_documents,
    m011_keyword_index_in_process,
    m012_client_history_index,
    m013_fact_cites,
    m014_no_message_documents,
    m015_session_client_digest,
]


class NewerSchema(Exception):
    """The database has migrations this version of memlane does not know."""


def check(conn: sqlite3.Connection) -> set[str]:
    """The migrations already applied; reads only, so a refused file is left byte-for-byte.

    Raises `ForeignDatabase` for some other application's SQLite file and
    `NewerSchema` for a file written by a newer memlane.
    """
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "migrations" not in tables:
        if tables:
            raise ForeignDatabase(sorted(tables))
        return set()
    applied = {str(row[0]) for row in conn.execute("SELECT name FROM migrations")}
    unknown = applied - {m.__name__ for m in MIGRATIONS}
    if unknown:
        raise NewerSchema(sorted(unknown))
    return applied


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every missing migration in one IMMEDIATE transaction; return the names applied.

    Foreign keys are off while migrations run (a table rebuilt by a migration must not
    cascade its drop into the rows that reference it) and checked before the commit.
    """
    conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction: set it before
    try:
        return _migrate(conn)
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


def _migrate(conn: sqlite3.Connection) -> list[str]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = check(conn)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations"
            " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done: list[str] = []
        for migration in MIGRATIONS:
            if migration.__name__ in applied:
                continue
            migration(conn)
            conn.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                (migration.__name__, ts_to_text(now())),
            )
            done.append(migration.__name__)
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise sqlite3.IntegrityError(f"migration left rows without their parent: {broken[:3]}")
        conn.execute("COMMIT")
        return done
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class ForeignDatabase(Exception):
    """The file is a SQLite database, but not memlane's."""
