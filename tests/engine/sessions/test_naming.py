"""A session's name: renamed by hand, unique in its namespace, kept by indexing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle, naming
from memlane.engine.sessions.indexing import index_session
from memlane.engine.sessions.lookup import find_session
from memlane.engine.sessions.metafile import meta_path, read_meta, write_meta
from memlane.engine.sessions.references import parse_references
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
