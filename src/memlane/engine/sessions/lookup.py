"""Find a session from what a person typed: an id, an id prefix, a key or a name.

Resolution order: exact id, then the session key, then a unique id prefix, then
the indexed name (or, for a session not yet named, the title the list shows)
case-insensitively, then a fuzzy match on names and titles. Several
candidates are an error listing them, never a guess: a reference that is both an id
prefix of one session and the whole name of another is one of those (the name is not
shadowed by the prefix). Only the sessions of the
caller's tenant take part (`engine.tenancy`), and, for `@@` references, only those
of the caller's namespace unless `references_across_namespaces` is on.

A lookup for an operation that changes or destroys a session (`exact=True`: delete,
rename, todo, pinned, title, Spec Mode, compaction, indexing) stops before the fuzzy match.
A fuzzy match is a guess that is convenient for reading; for a delete it turned a
retry or a typo into the loss of an unrelated session whose title held the words.
"""

from __future__ import annotations

import difflib

from memlane.store import SessionStore
from memlane.types import Session

MIN_ID_PREFIX = 6
FUZZY_CUTOFF = 0.75
FUZZY_MARGIN = 0.05
"""Fuzzy candidates this close to the best one are equally plausible: the name is ambiguous."""
MAX_LISTED = 8


class SessionLookupError(LookupError):
    """No session, or several, match a reference; the message says what to type instead."""


class NoSuchSession(SessionLookupError):
    pass


class AmbiguousSession(SessionLookupError):
    def __init__(self, ref: str, candidates: list[Session]) -> None:
        super().__init__(ref)
        self.ref = ref
        self.candidates = candidates

    def __str__(self) -> str:
        listed = ", ".join(describe(s) for s in self.candidates[:MAX_LISTED])
        more = len(self.candidates) - MAX_LISTED
        tail = f" and {more} more" if more > 0 else ""
        return f"{self.ref!r} matches several sessions: {listed}{tail}; use a full name or an id"


def session_name(session: Session) -> str | None:
    name = session.metadata.get("name")
    return name if isinstance(name, str) and name else None


def shown_name(session: Session) -> str:
    """What `memlane sessions list` shows a session as: its indexed name, else its title."""
    return session_name(session) or session.title or ""


def describe(session: Session) -> str:
    name = session_name(session)
    return f"{name} ({session.id})" if name else session.id


def find_session(
    store: SessionStore,
    ref: str,
    *,
    tenant: str | None,
    namespace: str | None = None,
    exclude: str | None = None,
    within: str | None = None,
    only_namespace: bool = False,
    exact: bool = False,
) -> Session:
    """The one session `ref` designates; raises NoSuchSession or AmbiguousSession.

    `tenant` is whose sessions may match (None: every tenant's, for the operator's
    faces); another tenant's session is never found, by any kind of reference, and
    its existence is never revealed. `namespace` breaks ties between equal names
    (the caller's own project wins); `exclude` is the asking session, which never
    resolves to itself by name. `within` confines the lookup to one namespace: a
    session of another one is treated as absent (a model's tool call never learns
    what other namespaces hold); `only_namespace` confines it to `namespace` and
    says so when the reference names a session of another namespace of the tenant
    (a person typed it, as `@@name`). `exact` leaves out the fuzzy match: only an id,
    a unique id prefix, a key or a whole name (the title the list shows) finds a
    session, as an operation that changes or destroys one requires.
    """
    ref = ref.strip()
    if not ref:
        raise NoSuchSession("empty session reference")
    confine = within if within is not None else namespace if only_namespace else None
    direct = _direct(store, ref, tenant)
    if direct is not None and (confine is None or direct.namespace == confine):
        return direct
    sessions = store.list_sessions(tenant=tenant)
    if confine is None:
        return _resolve(ref, sessions, namespace, exclude, exact=exact)
    local = [s for s in sessions if s.namespace == confine]
    try:
        return _resolve(ref, local, namespace, exclude, exact=exact)
    except NoSuchSession:
        if within is not None:
            raise
        try:
            _resolve(ref, sessions, namespace, exclude, exact=exact)
        except NoSuchSession:
            raise NoSuchSession(_missing(ref, exact=exact)) from None
        except AmbiguousSession:
            pass  # names sessions of other namespaces: say so below
        raise NoSuchSession(
            f"{ref!r} names a session of another namespace; a reference stays in its own "
            "namespace unless MEMLANE_REFERENCES_ACROSS_NAMESPACES=true"
        ) from None


def _direct(store: SessionStore, ref: str, tenant: str | None) -> Session | None:
    """The session whose id (or, within one tenant, whose key) is `ref`: one query each."""
    exact = store.get_session(ref)
    if exact is not None and (tenant is None or exact.tenant == tenant):
        return exact  # another tenant's id is no better than a made-up one
    return store.find_session(ref, tenant=tenant) if tenant is not None else None


def _resolve(
    ref: str,
    sessions: list[Session],
    namespace: str | None,
    exclude: str | None,
    *,
    exact: bool,
) -> Session:
    by_id = [s for s in sessions if s.id == ref]
    if by_id:
        return by_id[0]
    by_key = [s for s in sessions if s.key == ref]
    if len(by_key) == 1:
        return by_key[0]
    if by_key:  # one key in several tenants: only the operator sees them all
        raise AmbiguousSession(ref, by_key)
    others = [s for s in sessions if s.id != exclude]
    by_prefix = [s for s in others if len(ref) >= MIN_ID_PREFIX and s.id.startswith(ref)]
    wanted = ref.lower()
    named = [s for s in others if shown_name(s).lower() == wanted]
    if len(by_prefix) == 1:
        if any(s.id != by_prefix[0].id for s in named):  # a whole name is no less meant
            raise AmbiguousSession(ref, [*by_prefix, *named])
        return by_prefix[0]
    if named:
        return _one(ref, named, namespace)
    fuzzy = [] if exact else _fuzzy(wanted, others)
    if fuzzy:
        return _one(ref, fuzzy, namespace)
    raise NoSuchSession(_missing(ref, exact=exact))


def _missing(ref: str, *, exact: bool) -> str:
    if len(ref) < MIN_ID_PREFIX and all(c in "0123456789abcdef-" for c in ref.lower()):
        return (
            f"no session matches {ref!r}: an id prefix needs at least {MIN_ID_PREFIX} "
            "characters; see `memlane sessions list`"
        )
    if exact:
        return (
            f"no session matches {ref!r} exactly: it may have been deleted; a session is "
            "changed or deleted only by its id, key or whole name, never by part of its "
            "title; find its id with `memlane sessions list`"
        )
    return f"no session matches {ref!r}: it may have been deleted; see `memlane sessions list`"


def _one(ref: str, candidates: list[Session], namespace: str | None) -> Session:
    if len(candidates) == 1:
        return candidates[0]
    local = [s for s in candidates if namespace is not None and s.namespace == namespace]
    if len(local) == 1:
        return local[0]
    raise AmbiguousSession(ref, candidates)


def _fuzzy(wanted: str, sessions: list[Session]) -> list[Session]:
    scored: list[tuple[float, Session]] = []
    for session in sessions:
        name = shown_name(session).lower()
        if not name:
            continue
        score = 1.0 if wanted in name else difflib.SequenceMatcher(None, wanted, name).ratio()
        if score >= FUZZY_CUTOFF:
            scored.append((score, session))
    scored.sort(key=lambda pair: -pair[0])
    if not scored:
        return []
    best = scored[0][0]
    return [session for score, session in scored if score >= best - FUZZY_MARGIN]
