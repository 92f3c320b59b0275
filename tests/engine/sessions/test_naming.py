"""A session's name: renamed by hand, unique in its namespace, kept by indexing."""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle, naming
from memlane.engine.sessions.indexing import index_session
from memlane.engine.sessions.lookup import find_session
from memlane.engine.sessions.metafile import meta_path, read_meta, write_meta
from memlane.engine.sessions.references import parse_references
from memlane.store import Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from tests.engine.sessions.conftest import chat
from tests.support.text import ScriptedLLM


def test_rename_names_the_session_and_lookups_find_it(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    session = chat(sqlite_store, "k", ["plan the queue", "ok"], name="old-name", tags=["q"])
    renamed = naming.rename(sqlite_store, settings, session, "  Queue-Design ")
    assert renamed.metadata == {"name": "Queue-Design", "tags": ["q"], naming.NAME_PINNED: True}
    assert lifecycle.session_title(sqlite_store, renamed) == "Queue-Design"
    for ref in ("queue-design", "Queue-Design"):
        assert find_session(sqlite_store, ref, tenant="", exact=True).id == session.id
    assert naming.rename(sqlite_store, settings, renamed, "queue-design").id == session.id


def test_a_name_another_session_of_the_namespace_shows_is_refused(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    """`@@name` finds a session by its name, or by its title when it has none, among its
    namespace's: a second holder would make it ambiguous. Another namespace's is free."""
    mine = chat(sqlite_store, "mine", ["x"])
    chat(sqlite_store, "named", ["y"], name="billing")
    titled = chat(sqlite_store, "titled", ["z"])
    sqlite_store.update_session(titled.id, title="launch-plan")
    chat(sqlite_store, "elsewhere", ["w"], namespace="other", name="shared-name")

    with pytest.raises(naming.NameProblem, match=r"'Billing' already names session \w+ in "):
        naming.rename(sqlite_store, settings, mine, "Billing")
    with pytest.raises(naming.NameProblem, match="already names session"):
        naming.rename(sqlite_store, settings, mine, "launch-plan")
    with pytest.raises(naming.NameProblem, match="is the key of session"):
        naming.rename(sqlite_store, settings, mine, "titled")  # the key would find that one
    stored = sqlite_store.get_session(mine.id)
    assert stored is not None
    assert "name" not in stored.metadata  # nothing was written
    assert naming.rename(sqlite_store, settings, mine, "shared-name").metadata["name"] == (
        "shared-name"
    )


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "cannot be empty"),
        ("two words", "cannot be referenced as @@two words"),
        ("-dash", "starts with a letter or digit"),
        ("trailing.", "cannot be referenced"),
        ("x" * 101, "at most 100 characters"),
        ("sk-proj-" + "a1B2c3D4" * 4, "looks like a credential"),
    ],
)
def test_a_name_at_mentions_cannot_read_is_refused(
    sqlite_store: SQLiteStore, settings: Settings, name: str, reason: str
) -> None:
    session = chat(sqlite_store, "k", ["x"])
    with pytest.raises(naming.NameProblem, match=reason):
        naming.rename(sqlite_store, settings, session, name)


@pytest.mark.parametrize("name", ["queue-design", "v2.1_final", "Q", "café-notes", "a_"])
def test_every_accepted_name_is_read_whole_by_at_mentions(name: str) -> None:
    assert naming.name_problem(name) is None
    (found,) = parse_references(f"like in @@{name}, right?")
    assert found.ref == name


def test_rename_rewrites_the_name_in_meta_json(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    session = chat(sqlite_store, "k", ["x"], name="generated")
    path = meta_path(settings.sessions_path, "k")
    path.parent.mkdir(parents=True)
    write_meta(path, {"session_id": session.id, "name": "generated", "summary": "s"})
    naming.rename(sqlite_store, settings, session, "chosen")
    mirrored = read_meta(path)
    assert mirrored is not None
    assert (mirrored["name"], mirrored["summary"]) == ("chosen", "s")
    other = chat(sqlite_store, "no-meta", ["y"])
    naming.rename(sqlite_store, settings, other, "plain")
    assert not meta_path(settings.sessions_path, "no-meta").exists()  # none made


async def test_indexing_keeps_a_name_given_by_hand(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    session = chat(sqlite_store, "k", [f"turn {i}" for i in range(10)])
    answer: dict[str, Any] = {
        "name": "generated-name",
        "description": "d",
        "summary": "s",
        "tags": ["t"],
    }
    naming.rename(sqlite_store, rt.settings, session, "my-name")
    scripted_llm.push(json.dumps(answer))
    result = await index_session(rt, session.id)
    assert result.ok
    assert result.meta is not None
    assert result.meta.name == "my-name"
    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    assert (stored.metadata["name"], stored.metadata["summary"]) == ("my-name", "s")
    on_disk = read_meta(meta_path(rt.settings.sessions_path, "k"))
    assert on_disk is not None
    assert on_disk["name"] == "my-name"

    forked = lifecycle.fork(sqlite_store, stored, new_key="copy")
    assert "name" not in forked.metadata
    assert naming.NAME_PINNED not in forked.metadata  # the fork is indexed a name of its own


def test_free_name_counts_up_past_every_holder(sqlite_store: SQLiteStore) -> None:
    chat(sqlite_store, "a", ["x"], name="notes")
    chat(sqlite_store, "b", ["y"], name="notes-2")
    assert naming.free_name(sqlite_store, "notes", namespace="repo", tenant="") == "notes-3"
    assert naming.free_name(sqlite_store, "notes", namespace="other", tenant="") == "notes"
    assert naming.free_name(sqlite_store, "fresh", namespace="repo", tenant="") == "fresh"


def test_a_rename_leaves_the_session_where_the_lists_show_it(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    """Lists sort by last use; renaming an old session by hand is not using it."""
    old = chat(sqlite_store, "old", ["x"])
    newer = chat(sqlite_store, "newer", ["y"])
    renamed = naming.rename(sqlite_store, settings, old, "archive")
    assert renamed.updated_at == old.updated_at
    assert [s.id for s in sqlite_store.list_sessions()] == [newer.id, old.id]


def test_two_replicas_renaming_to_one_name_at_once_give_it_to_one_session(
    pg_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rename checks that the name is free, then writes it. Two PostgreSQL replicas
    doing so at once both found it free (neither had committed), and two sessions of
    one namespace got one name. The check here waits (up to a second) for the other
    rename's check: without the lock, both pass it."""
    store = PostgresStore(pg_url)
    try:
        first, second = chat(store, "a", ["x"]), chat(store, "b", ["y"])  # type: ignore[arg-type]
        checked = threading.Barrier(2, timeout=1.0)
        free_holder = naming.holder

        def slow_holder(store: Store, name: str, **where: Any) -> Any:
            found = free_holder(store, name, **where)
            # the other rename may wait for the lock: this one then goes on alone
            with contextlib.suppress(threading.BrokenBarrierError):
                checked.wait()
            return found

        monkeypatch.setattr(naming, "holder", slow_holder)
        outcomes: list[str] = []

        def rename(session: Any) -> None:
            try:
                naming.rename(store, settings, session, "release-plan")
                outcomes.append("renamed")
            except naming.NameProblem:
                outcomes.append("refused")

        threads = [threading.Thread(target=rename, args=(s,)) for s in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert sorted(outcomes) == ["refused", "renamed"]
        names = [s.metadata.get("name") for s in store.list_sessions()]
        assert names.count("release-plan") == 1
    finally:
        store.close()
