"""A session's life outside a turn: title, fork, delete, export and import.

Export is JSON lines: one `session` line, then every message (superseded ones
too, with their status), event and state entry of the session. Import
(`engine.sessions.importing`) checks every line as it writes it, in one
transaction, so a bad file changes nothing; it recreates the session under its
key (or a new one), with new ids and the same content. `delete` removes
everything of the session: its rows (messages, events, state, facts, index),
its folder (todo, pinned, summary, offloaded outputs, meta.json), the
memory files it produced and its own memory folder (`entries/<its conversation
scope>` with its `.scope` file); its forks stay, unlinked from it.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from memlane.config import Settings
from memlane.engine.governance.ledger import RECALL_MEMO
from memlane.engine.memory import reuse
from memlane.engine.sessions.asked import first_asked
from memlane.engine.sessions.importing import EXPORT_FORMAT, EXPORT_VERSION
from memlane.engine.sessions.lookup import session_name
from memlane.engine.sessions.naming import NAME_PINNED
from memlane.files.entry_lookup import locate
from memlane.files.git import commit_now
from memlane.files.git_purge import PurgeError, purge_history
from memlane.files.locks import GIT_LOCK, MEMORY_LOCK, HomeLock
from memlane.files.memory_files import SCOPE_FILE, MemoryFiles
from memlane.files.memory_snapshot import Snapshot
from memlane.files.paths import session_dir
from memlane.store import Store, StoreError
from memlane.store.codec import message_to_json
from memlane.store.documents import NAME_NUMBERED
from memlane.text import tokens
from memlane.text.redact import redact
from memlane.types import Fact, Session
from memlane.types.messages import forget_fingerprints
from memlane.types.resent import forget_resent
from memlane.types.scopes import conversation_scope

TITLE_CHARS = 100
TITLE_SCAN_CHARS = 2_048
"""How much of a prompt its title is redacted from: the title's 100 characters and room
for a credential that starts in them to end (a private key cut short still goes whole)."""


# --- titles -----------------------------------------------------------------------


def first_prompt(store: Store, session_id: str) -> str | None:
    """The first thing the user asked (not the client's scaffolding), or None: read from
    the user's messages only, not the tool results of an agent's session."""
    stored = store.list_messages(session_id, transcript_only=True, roles=("user",))
    return first_asked(item.message for item in stored) or None


def title_from_prompt(prompt: str) -> str:
    """The first prompt on one line, credentials redacted, cut to 100 characters.

    Every title goes through here (a turn's, `ensure_title`, a fork's, one typed in the
    inspector): session metadata carries no credential (`text.redact`). The prompt is
    redacted before it is put on one line (a detector reads lines) and cut (a key cut in
    half no longer has its shape)."""
    line = " ".join(redact(prompt.lstrip()[:TITLE_SCAN_CHARS]).split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def session_title(store: Store, session: Session) -> str:
    """The indexed name, else the stored title, else the first prompt cut to 100 chars."""
    name = session_name(session)
    if name:
        return name
    if session.title:
        return session.title
    prompt = first_prompt(store, session.id)
    return title_from_prompt(prompt) if prompt else "(no messages yet)"


def ensure_title(store: Store, session: Session) -> None:
    """Record the first-prompt title once, so listing never has to read messages."""
    if session.title:
        return
    prompt = first_prompt(store, session.id)
    if prompt:
        store.update_session(session.id, title=title_from_prompt(prompt))


TITLES_REDACTED = "titles_redacted"
"""The store's meta key set once the titles stored before titles were redacted are."""


def redact_stored_titles(store: Store) -> int:
    """Redact every stored title once per store (every tenant's): titles made before they
    were redacted (`title_from_prompt`) kept the first prompt's credentials. A title
    whose redaction changes nothing is left alone, and no session is marked active.
    Returns how many titles changed."""
    if store.get_meta(TITLES_REDACTED) is not None:
        return 0
    changed = 0
    for session in store.list_sessions(tenant=None):
        if session.title and (clean := redact(session.title)) != session.title:
            store.retitle(session.id, clean)
            changed += 1
    store.set_meta(TITLES_REDACTED, "1")
    return changed


# --- fork and delete ---------------------------------------------------------------


def fork_key(source: Session, now: datetime | None = None) -> str:
    """The key of a new fork of `source`: `<key>~fork-<UTC time>-<6 random hex>`.

    Readable (whose fork, and when) and unique without asking the store: two forks made
    in the same second differ by their random part.
    """
    moment = now or datetime.now(UTC)
    return f"{source.key}~fork-{moment:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


class ForkPointOutOfRange(ValueError):
    """A fork point outside the source's messages: `end` is the largest one (it copies
    every message), 0 the smallest (a fork with no history)."""

    def __init__(self, session_id: str, at_position: int, end: int) -> None:
        self.session_id = session_id
        self.at_position = at_position
        self.end = end
        super().__init__(self.explain("the fork point"))

    def explain(self, option: str) -> str:
        """What was wrong and the valid range, naming the fork point as the face does
        (`--at` on the CLI, `at` on the HTTP API)."""
        if self.end == 0:
            return f"session {self.session_id} has no messages; {option} must be 0"
        return (
            f"session {self.session_id} has messages at positions 0..{self.end - 1}; "
            f"{option} must be 0..{self.end} (the fork copies the messages before it), "
            f"not {self.at_position}"
        )


def fork_end(store: Store, source: Session) -> int:
    """One past the source's last message position (superseded messages hold theirs too):
    the largest fork point, which copies everything. Positions are unique, so past
    `message_count` (superseded ones left out) lie only the superseded tail's: that is
    all that is read."""
    tail = store.list_message_texts(
        source.id, include_superseded=True, since_position=source.message_count
    )
    return tail[-1].position + 1 if tail else source.message_count


def fork(
    store: Store, source: Session, *, new_key: str | None = None, at_position: int | None = None
) -> Session:
    """A new session with a parent link and a copy of the history before `at_position`.

    The fork keeps the source's description, summary and tags as context but not
    its name, so `@@name` still designates one session. Its key is `new_key`, else
    `fork_key(source)`. An `at_position` outside 0..`fork_end` raises
    `ForkPointOutOfRange`: past the end it would copy everything and say nothing.
    """
    if at_position is not None:
        end = fork_end(store, source)
        if not 0 <= at_position <= end:
            raise ForkPointOutOfRange(source.id, at_position, end)
    key = new_key or fork_key(source)
    forked = store.fork_session(source.id, new_key=key, at_position=at_position)
    dropped = ("name", NAME_PINNED, NAME_NUMBERED)
    metadata = {k: v for k, v in forked.metadata.items() if k not in dropped}
    title = f"fork of {session_title(store, source)}"
    return store.update_session(forked.id, metadata=metadata, title=title_from_prompt(title))


def delete(store: Store, settings: Settings, session: Session, *, purge: bool = False) -> bool:
    """Remove the session's rows, its folder and the memory files of its facts.

    The files go first: memory files are the truth the index is rebuilt from, so
    a file left behind would bring a deleted session's facts back. With `purge`
    the deletion also leaves no copy behind (`_purge_files`, then `Store.purge_deleted`
    once the rows are gone); a purge that stops raises `PurgeError` saying what is
    done and what finishes it. Under the home's memory lock: no other process writes
    those files or their index meanwhile.
    """
    files = MemoryFiles(settings.memory_path)
    own_scope = conversation_scope(session.id, session.tenant)
    with HomeLock(settings.home_path, MEMORY_LOCK).held():
        facts = store.list_facts(conversation_id=session.id, include_deleted=True)
        if purge:
            _purge_files(settings, session, files, facts)
            removed_files = 0
        else:
            removed_files, _ = _remove_files(files, facts)
        if _remove_scope_folder(files, own_scope) or removed_files:
            # the repository is left clean: its own commit
            commit_now(
                settings.memory_path,
                f"memory: deleted session {session.id}",
                home=settings.home_path,
            )
        try:
            removed = store.delete_session(session.id)
        except StoreError as exc:
            if not purge:
                raise
            raise PurgeError(
                "the session's memories are purged from the memory history, but the session "
                f"is not deleted: {exc}; the same delete can run again once the cause is fixed"
            ) from None
        RECALL_MEMO.forget(session.id)
        reuse.SEARCHES.forget()
        forget_fingerprints()  # the in-process memos keyed by what was said
        forget_resent()
        tokens.forget_texts()
    folder = session_dir(settings.sessions_path, session.key, session.tenant)
    if folder.exists():
        shutil.rmtree(folder)
    if purge:
        _purge_store(store)
    return removed


def _purge_files(
    settings: Settings, session: Session, files: MemoryFiles, facts: list[Fact]
) -> None:
    """Rewrite the memory repository's history without the files of `facts` and any text
    they had (`files.git_purge`) while they and the rows are still in place, so a purge
    that fails deletes nothing and can run again; then remove the files under the same
    git lock, so no commit takes them back into the history. A file that could not be
    removed or read stops the delete (`PurgeError` saying what), the session still there
    for the same delete again."""
    with HomeLock(settings.home_path, GIT_LOCK).held():
        try:
            purge_history(
                settings.memory_path,
                [f.id for f in facts],
                [f.text for f in facts],
                message=f"memory: deleted session {session.id}",
            )
        except PurgeError as exc:
            raise PurgeError(
                f"nothing is deleted: {exc}; the same delete can run again once the cause is fixed"
            ) from None
        _, left = _remove_files(files, facts, every=True)
    if left:
        raise PurgeError(
            "the session's memories are purged from the memory history, but not all of "
            f"them: {'; '.join(left)}. Until that is fixed, a file holding one brings it back "
            "and the next commit takes it into the history again; then run the same delete again"
        )


def _remove_files(
    files: MemoryFiles, facts: list[Fact], *, every: bool = False
) -> tuple[int, list[str]]:
    """Remove the memory files of `facts`, active or deleted, wherever a person put them
    (`files.entry_lookup`: `every` file looked at, else by name and the snapshot's paths);
    returns how many there were, and with `every`, what could not be done instead of
    raising it (a file left, one that could not be read)."""
    snapshot = None if every else Snapshot.load(files.root)
    located = locate(files, facts, snapshot=snapshot, every=every)
    left: list[str] = []
    removed = 0
    for path in located.every():
        try:
            files.remove(path)
        except OSError as exc:
            if not every:
                raise
            left.append(f"{path} still holds one: it could not be removed ({exc})")
            continue
        removed += 1
    unread = located.unread_note()
    if every and unread is not None:
        left.append(unread)
    return removed, left


def _remove_scope_folder(files: MemoryFiles, scope: str) -> bool:
    """Remove the session's own memory folder (`entries/<scope>`, its `.scope` file and the
    sub-folders its entries left empty) once its entries are gone; True if it did. Only
    that scope's folder: the namespace's and the global one are shared. A folder still
    holding a file that is not one of the session's entries (written there by hand) stays,
    with its `.scope`, which says what scope that file is in."""
    folder = files.scope_dir(scope)
    if not folder.is_dir():
        return False
    marker = folder / SCOPE_FILE
    for path in folder.rglob("*"):
        if path != marker and (path.is_symlink() or not path.is_dir()):
            return False
    shutil.rmtree(folder)
    return True


def _purge_store(store: Store) -> None:
    """Clean the store's files of the deleted rows (`Store.purge_deleted`): it needs them
    deleted first, so a failure leaves the session deleted, and a later purge finishes it
    (each cleans every deleted row)."""
    try:
        store.purge_deleted()
    except StoreError as exc:
        raise PurgeError(
            "the session is deleted and its memories purged from the memory history, but the "
            "database's files may still hold a copy of it until `memlane store purge` "
            f"succeeds: {exc}"
        ) from None


# --- export and import --------------------------------------------------------------


def export_lines(store: Store, session: Session) -> Iterator[str]:
    """The session as JSON lines (see the module docstring)."""
    head = {
        "type": "session",
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "id": session.id,
        "key": session.key,
        "namespace": session.namespace,
        "title": session.title,
        "parent_id": session.parent_id,
        "summary": session.summary,
        "summarized_count": session.summarized_count,
        "metadata": dict(session.metadata),
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
        "cost_usd": session.cost_usd,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }
    yield _dumps(head)
    for item in store.list_messages(session.id, include_superseded=True):
        yield _dumps(
            {
                "type": "message",
                "position": item.position,
                "status": item.status,
                "token_count": item.token_count,
                "created_at": item.created_at.isoformat(),
                "message": message_to_json(item.message),
            }
        )
    for event in store.list_events(session.id):
        yield _dumps(
            {
                "type": "event",
                "kind": event.kind,
                "payload": dict(event.payload),
                "text": event.text,
                "created_at": event.created_at.isoformat(),
            }
        )
    for name, value in store.get_state(session.id).items():
        yield _dumps({"type": "state", "name": name, "value": value})


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
