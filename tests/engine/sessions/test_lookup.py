"""Finding a session from a reference: fuzzy to read one, exact to change or delete one."""

from __future__ import annotations

import pytest

from memlane.engine.sessions.lookup import AmbiguousSession, NoSuchSession, find_session
from memlane.store.sqlite import SQLiteStore
from memlane.types import Session
from tests.engine.sessions.conftest import chat


def titled(store: SQLiteStore, key: str, title: str) -> Session:
    """A session whose list title is `title` (no indexed name)."""
    session = chat(store, key, [title, "ok"])
    return store.update_session(session.id, title=title)


def test_a_read_finds_a_session_by_part_of_its_title(sqlite_store: SQLiteStore) -> None:
    work = titled(sqlite_store, "important-work", "plan the zulu launch")
    assert find_session(sqlite_store, "zulu", tenant=None).id == work.id


def test_an_exact_lookup_never_falls_back_to_a_title_match(sqlite_store: SQLiteStore) -> None:
    titled(sqlite_store, "important-work", "plan the zulu launch")
    with pytest.raises(NoSuchSession) as raised:
        find_session(sqlite_store, "zulu", tenant=None, exact=True)
    message = str(raised.value)
    assert "no session matches 'zulu' exactly" in message
    assert "memlane sessions list" in message


def test_a_repeated_exact_lookup_of_a_deleted_session_finds_nothing(
    sqlite_store: SQLiteStore,
) -> None:
    zulu = titled(sqlite_store, "zulu", "zulu")
    work = titled(sqlite_store, "important-work", "plan the zulu launch")
    assert find_session(sqlite_store, "zulu", tenant=None, exact=True).id == zulu.id
    sqlite_store.delete_session(zulu.id)
    with pytest.raises(NoSuchSession):
        find_session(sqlite_store, "zulu", tenant=None, exact=True)
    assert sqlite_store.get_session(work.id) is not None


def test_an_exact_lookup_takes_an_id_a_prefix_a_key_or_a_whole_name(
    sqlite_store: SQLiteStore,
) -> None:
    named = chat(sqlite_store, "k-one", ["x"], name="billing-report")
    chat(sqlite_store, "k-two", ["x"], name="billing-export")
    for ref in (named.id, named.id[:8], "k-one", "Billing-Report"):
        assert find_session(sqlite_store, ref, tenant=None, exact=True).id == named.id, ref
    assert find_session(sqlite_store, "billing-repor", tenant=None).id == named.id
    with pytest.raises(NoSuchSession):
        find_session(sqlite_store, "billing-repor", tenant=None, exact=True)


def test_an_exact_lookup_in_a_namespace_says_no_session_matches_exactly(
    sqlite_store: SQLiteStore,
) -> None:
    chat(sqlite_store, "elsewhere", ["x"], namespace="other", name="billing-report")
    with pytest.raises(NoSuchSession) as raised:
        find_session(
            sqlite_store,
            "billing-repor",
            tenant=None,
            namespace="repo",
            only_namespace=True,
            exact=True,
        )
    assert "exactly" in str(raised.value)


def test_a_whole_name_that_is_also_an_id_prefix_is_ambiguous_not_shadowed(
    sqlite_store: SQLiteStore,
) -> None:
    """A name that happens to begin another session's id was found as that id's prefix:
    `@@name` silently reached the wrong session. Both are plausible: the error lists them."""
    other = chat(sqlite_store, "k-other", ["x"])
    prefix = other.id[:8]
    named = chat(sqlite_store, "k-named", ["y"], name=prefix)
    with pytest.raises(AmbiguousSession) as raised:
        find_session(sqlite_store, prefix, tenant=None, exact=True)
    assert {s.id for s in raised.value.candidates} == {other.id, named.id}
    assert find_session(sqlite_store, other.id[:9], tenant=None, exact=True).id == other.id
    assert find_session(sqlite_store, named.id, tenant=None, exact=True).id == named.id
