"""Names indexing generates, kept distinct: a model names two sessions of one topic alike.

A generated name that another session of the namespace already shows gets the first
free `<name>-N` from N = 2, so `@@name` and every lookup by name still designate one
session (`naming`). Finding the free one by reading every session of the tenant on
each index cost 16% of the proxy's requests per second under `load.py --clients 200`
(232 → 190), and grows with the sessions. So each process reads the names sessions
show once, the first time a generated name needs one (`Names.load`), and from then on
keeps them up to date with the names it gives out itself: each later index costs a
set lookup. A numbered name is flagged (`store.documents.NAME_NUMBERED`), so its
summary document indexes the model's name, not the number.

What another process names meanwhile (a CLI `rename`, another worker's index) is not
seen until this process starts again: two sessions may then show one name, which
lookups answer as ambiguous, listing both, as they did before names were kept
distinct. A name a person gives (`naming.rename`) checks the store itself.
"""

from __future__ import annotations

import threading
import weakref

from memlane.engine.sessions.lookup import session_name, shown_name
from memlane.engine.sessions.naming import pinned_name
from memlane.store import Store
from memlane.types import Session


class Names:
    """The names (or titles, for a session with none) shown per tenant and namespace, and
    every session's key and id per tenant, as this process knows them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._shown: dict[tuple[str, str], dict[str, str]] = {}
        """(tenant, namespace) → lower-cased shown name → the session showing it."""
        self._exact: dict[str, set[str]] = {}
        """tenant → keys and ids (looked up as typed, before names)."""
        self._held: dict[str, str] = {}
        """session id → the lower-cased name it shows, let go when it shows another."""

    def load(self, store: Store) -> None:
        """Read every session's shown name, key and id once (a no-op after the first)."""
        with self._lock:
            if self._loaded:
                return
            for session in store.list_sessions(tenant=None):
                self._note(session, shown_name(session))
            self._loaded = True

    def free(self, session: Session, name: str) -> str:
        """`name`, or the first `<name>-N` no other session of `session`'s namespace shows
        and no session's key or id is; noted as `session`'s from now on."""
        with self._lock:
            shown = self._shown.setdefault((session.tenant, session.namespace), {})
            exact = self._exact.setdefault(session.tenant, set())
            candidate, number = name, 1
            while candidate in exact or shown.get(candidate.lower(), session.id) != session.id:
                number += 1
                candidate = f"{name}-{number}"
            self._note(session, candidate)
            return candidate

    def _note(self, session: Session, name: str) -> None:
        self._exact.setdefault(session.tenant, set()).update((session.key, session.id))
        if not name:
            return
        shown = self._shown.setdefault((session.tenant, session.namespace), {})
        before = self._held.get(session.id)
        if before is not None and before != name.lower() and shown.get(before) == session.id:
            del shown[before]
        if shown.setdefault(name.lower(), session.id) == session.id:
            self._held[session.id] = name.lower()


_NAMES: weakref.WeakKeyDictionary[Store, Names] = weakref.WeakKeyDictionary()
_NAMES_LOCK = threading.Lock()


def names_of(store: Store) -> Names:
    """The names kept for one store (one per runtime's store object)."""
    with _NAMES_LOCK:
        found = _NAMES.get(store)
        if found is None:
            found = _NAMES[store] = Names()
        return found


def generated_name(store: Store, session: Session, name: str) -> tuple[str, bool]:
    """The name `session` gets when indexing generates `name`, and whether it is `name`
    with a number added (`store.documents.NAME_NUMBERED`): a name a person gave it stays
    (`naming.pinned_name`); one it already has from `name` (`name` itself, or a
    `<name>-N` given before) stays, with no look at the other sessions; else the first
    free one (`Names.free`)."""
    kept = pinned_name(session)
    if kept is not None:
        return kept, False
    current = session_name(session)
    if current is not None and (current == name or _numbered(current, name)):
        return current, current != name
    names = names_of(store)
    names.load(store)
    chosen = names.free(session, name)
    return chosen, chosen != name


def _numbered(current: str, name: str) -> bool:
    """Whether `current` is `<name>-N` with N from 2 (what `Names.free` makes of `name`)."""
    number = current.removeprefix(f"{name}-")
    return number != current and number.isdigit() and int(number) >= 2
