"""Find a session from what a person typed: an id, an id prefix, a key or a name.

Resolution order: exact id, then the session key, then the indexed
name case-insensitively, then a fuzzy match on names. Several fuzzy candidates
are an error listing them, never a guess.
"""

from __future__ import annotations

import difflib

from memlane.store import Store
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


def describe(session: Session) -> str:
    name = session_name(session)
    return f"{name} ({session.id})" if name else session.id


def find_session(
    store: Store,
    ref: str,
    *,
    namespace: str | None = None,
    exclude: str | None = None,
    within: str | None = None,
) -> Session:
    """The one session `ref` designates; raises NoSuchSession or AmbiguousSession.

    `namespace` breaks ties between equal names (the caller's own project wins);
    `exclude` is the asking session, which never resolves to itself by name;
    `within` confines the lookup to one namespace: a session of another one is
    treated as absent (a model's tool call never learns what other namespaces hold).
    """
    ref = ref.strip()
    if not ref:
        raise NoSuchSession("empty session reference")
    exact = store.get_session(ref) or store.find_session(ref)
    if exact is not None and (within is None or exact.namespace == within):
        return exact
    sessions = [s for s in store.list_sessions(namespace=within) if s.id != exclude]
    by_prefix = [s for s in sessions if len(ref) >= MIN_ID_PREFIX and s.id.startswith(ref)]
    if len(by_prefix) == 1:
        return by_prefix[0]
    wanted = ref.lower()
    named = [s for s in sessions if (session_name(s) or "").lower() == wanted]
    if named:
        return _one(ref, named, namespace)
    fuzzy = _fuzzy(wanted, sessions)
    if fuzzy:
        return _one(ref, fuzzy, namespace)
    raise NoSuchSession(
        f"no session matches {ref!r}: it may have been deleted; see `memlane sessions list`"
    )


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
        name = (session_name(session) or "").lower()
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
