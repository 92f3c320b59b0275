"""A session's name: what `@@name` and every face's lookup find it by, so one session's.

A name is found case-insensitively among the sessions of the asker's namespace
(`lookup.find_session`; a session with no name is found by its title the same way),
after an id and a key. So a name another session of the namespace shows already, or
that is another session's key, would make a reference ambiguous or never reach the
session: `rename` refuses it, and an import whose exported name is taken gets the first
free `<name>-2`, `<name>-3`… (`free_name`). A name a person chose is kept when the
session is indexed again (`NAME_PINNED`, read by `indexing`); indexing writes a
generated one otherwise.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memlane.config import Settings
from memlane.engine.sessions.lookup import session_name, shown_name
from memlane.engine.sessions.metafile import meta_path, read_meta, write_meta
from memlane.store import Store
from memlane.store.documents import NAME_NUMBERED
from memlane.text.redact import redact
from memlane.types import Session

NAME_PINNED = "name_pinned"
"""Session metadata flag: the name was chosen by a person, and indexing keeps it."""
NAME_CHARS = 100
NAME = re.compile(r"[A-Za-z0-9](?:[\w.\-]*\w)?")
"""A name `@@` reads whole (`references.REFERENCE`, which drops a trailing `.` or `-`)."""


class NameProblem(ValueError):
    """A name that cannot be the session's; the message says why and what to do."""


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a session (as `@@name` reads it), or None."""
    if not name:
        return "a session name cannot be empty"
    if len(name) > NAME_CHARS:
        return f"a session name has at most {NAME_CHARS} characters"
    if not NAME.fullmatch(name):
        return (
            f"{name!r} cannot be referenced as @@{name}: a session name starts with a letter "
            "or digit, holds only letters, digits, '_', '.' and '-', and ends with a letter, "
            "a digit or '_' (e.g. queue-design)"
        )
    if redact(name) != name:  # session metadata carries no credential (`text.redact`)
        return "the name looks like a credential; choose another name"
    return None


def pinned_name(session: Session) -> str | None:
    """The name a person gave the session (`rename`), which indexing keeps; else None."""
    name = session_name(session)
    return name if name and session.metadata.get(NAME_PINNED) is True else None


def holder(
    store: Store, name: str, *, namespace: str, tenant: str, exclude: str | None = None
) -> Session | None:
    """Another session (not `exclude`) that `name` would designate too: one of the same
    tenant whose key (or id) it is, or one of the same namespace that shows it (as its
    name, or its title when it has none); None when it is free."""
    return _holder(store.list_sessions(tenant=tenant), name, namespace, exclude)


def free_name(
    store: Store, name: str, *, namespace: str, tenant: str, exclude: str | None = None
) -> str:
    """`name` if no other session holds it (`holder`), else the first free `<name>-N`
    from N = 2: one pass over the tenant's sessions, however many already hold a
    `<name>-N` (a model names many sessions of one topic alike)."""
    exact: set[str] = set()  # keys and ids: looked up as typed
    shown: set[str] = set()  # the namespace's names (or titles): looked up in any case
    for session in store.list_sessions(tenant=tenant):
        if session.id == exclude:
            continue
        exact.update((session.key, session.id))
        if session.namespace == namespace:
            shown.add(shown_name(session).lower())
    candidate, number = name, 1
    while candidate in exact or candidate.lower() in shown:
        number += 1
        candidate = f"{name}-{number}"
    return candidate


def _holder(
    sessions: list[Session], name: str, namespace: str, exclude: str | None
) -> Session | None:
    wanted = name.lower()
    for session in sessions:
        if session.id == exclude:
            continue
        if session.key == name or session.id == name:
            return session
        if session.namespace == namespace and shown_name(session).lower() == wanted:
            return session
    return None


def rename(store: Store, settings: Settings, session: Session, name: str) -> Session:
    """Give `session` the name `name` (a person's choice: later indexing keeps it), in its
    metadata and its `meta.json` when it has one. Raises `NameProblem` when the name is
    not one `@@` reads, or another session holds it (`holder`).

    The check and the write hold the store's batch lock (`Store.batch`): on PostgreSQL two
    replicas renaming two sessions to one name at once would otherwise both find it free
    (each reads before the other commits). A rename is not activity: the session keeps
    its place in the lists, which sort by when it was last used."""
    name = name.strip()
    problem = name_problem(name)
    if problem:
        raise NameProblem(problem)
    with store.batch():  # the check and the write together, one rename at a time
        taken = holder(
            store, name, namespace=session.namespace, tenant=session.tenant, exclude=session.id
        )
        if taken is not None:
            raise NameProblem(_taken(name, taken))
        current = store.get_session(session.id) or session
        metadata = {**current.metadata, "name": name, NAME_PINNED: True}
        metadata.pop(NAME_NUMBERED, None)  # a person's name is indexed as given
        renamed = store.update_session(session.id, metadata=metadata, active=False)
    path = meta_path(settings.sessions_path, renamed.key, renamed.tenant)
    mirrored = read_meta(path) if path.exists() else None
    if mirrored is not None:  # the human-readable copy says the same
        now = datetime.now(UTC).isoformat(timespec="seconds")
        write_meta(path, {**mirrored, "name": name, "updated_at": now})
    return renamed


def _taken(name: str, other: Session) -> str:
    if other.key == name or other.id == name:
        what = "key" if other.key == name else "id"
        return (
            f"{name!r} is the {what} of session {other.id}: @@{name} would find that "
            "session; choose another name"
        )
    return (
        f"{name!r} already names session {other.id} in namespace {other.namespace!r}: a "
        f"name is unique in its namespace, so that @@{name} finds one session; choose "
        "another name"
    )
