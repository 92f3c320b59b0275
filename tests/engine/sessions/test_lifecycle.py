"""Titles, fork, delete (rows, folder, memory files), export and import at the engine level."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.config import Settings
from memlane.engine.memory.reuse import SEARCHES
from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.search import Query
from memlane.engine.sessions import importing, lifecycle
from memlane.files.git_purge import PurgeError
from memlane.files.memory_files import MemoryFiles
from memlane.files.paths import session_dir
from memlane.store import StoreError
from memlane.store.base import SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.text.tokens import get_tokenizer
from memlane.types import Fact, Message
from memlane.types.messages import remembered_fingerprints
from memlane.types.resent import RESENT, Resend
from tests.engine.sessions.conftest import chat


def test_title_is_the_name_else_the_first_prompt_cut_to_100(sqlite_store: SQLiteStore) -> None:
    empty = sqlite_store.ensure_session("empty")
    assert lifecycle.session_title(sqlite_store, empty) == "(no messages yet)"
    prompt = "Refactor   the\nconfirm button " + "x" * 200
    plain = chat(sqlite_store, "plain", [prompt, "ok"])
    title = lifecycle.session_title(sqlite_store, plain)
    assert len(title) == 100
    assert title.startswith("Refactor the confirm button x")
    assert title.endswith("…")
    lifecycle.ensure_title(sqlite_store, plain)
    stored = sqlite_store.get_session(plain.id)
    assert stored is not None
    assert stored.title == title
    named = chat(sqlite_store, "named", ["hi"], name="greeting")
    assert lifecycle.session_title(sqlite_store, named) == "greeting"


KEY = "sk-proj-" + "a1B2c3D4" * 4


def test_a_title_carries_no_credential(sqlite_store: SQLiteStore) -> None:
    """`sessions list`, the admin API, the inspector and MCP show titles: a first prompt
    that holds a key is titled without it, the turn's title as `ensure_title`'s."""
    assert lifecycle.title_from_prompt(f"my key is {KEY}") == "my key is [redacted openai-key]"
    told = "my aws key is AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert lifecycle.title_from_prompt(told) == (
        "my aws key is [redacted aws-access-key] with secret [redacted secret]"
    )
    # redacted before the cut: the cut would leave a key's head too short to know
    title = lifecycle.title_from_prompt("x" * 85 + f" {KEY} and more")
    assert title == "x" * 85 + " [redacted ope…"
    session = chat(sqlite_store, "k", [f"deploy with\nOPENAI_API_KEY={KEY}", "ok"])
    assert lifecycle.session_title(sqlite_store, session) == (
        "deploy with OPENAI_API_KEY=[redacted openai-key]"
    )
    lifecycle.ensure_title(sqlite_store, session)
    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    assert stored.title == "deploy with OPENAI_API_KEY=[redacted openai-key]"


def test_titles_stored_before_they_were_redacted_are_redacted_once(
    sqlite_store: SQLiteStore,
) -> None:
    """A store written before titles were redacted: its titles are, once, every tenant's,
    and the sessions keep their place in the list (none is marked active)."""
    leaked = sqlite_store.ensure_session("old", tenant="t1")
    sqlite_store.update_session(leaked.id, title=f"my key is {KEY}")
    clean = sqlite_store.ensure_session("plain")
    sqlite_store.update_session(clean.id, title="plan the release")
    before = {s.id: s.updated_at for s in sqlite_store.list_sessions(tenant=None)}

    assert lifecycle.redact_stored_titles(sqlite_store) == 1
    titles = {s.id: s.title for s in sqlite_store.list_sessions(tenant=None)}
    assert titles == {leaked.id: "my key is [redacted openai-key]", clean.id: "plan the release"}
    assert {s.id: s.updated_at for s in sqlite_store.list_sessions(tenant=None)} == before
    sqlite_store.update_session(leaked.id, title=f"again {KEY}")
    assert lifecycle.redact_stored_titles(sqlite_store) == 0  # once per store: new ones are
    # made redacted (`title_from_prompt`), and a start does not read every session again


def test_a_fork_of_a_title_that_held_a_key_does_not_copy_it(sqlite_store: SQLiteStore) -> None:
    source = chat(sqlite_store, "src", ["a", "b"])
    source = sqlite_store.update_session(source.id, title=f"use {KEY}")  # written before
    forked = lifecycle.fork(sqlite_store, source, new_key="copy")
    assert forked.title == "fork of use [redacted openai-key]"


def test_delete_removes_rows_folder_and_memory_files(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    session = chat(sqlite_store, "k", ["remember I like tea", "noted"])
    other = chat(sqlite_store, "other", ["x"])
    moment = datetime.now(UTC)
    files = MemoryFiles(settings.memory_path)
    facts = [
        Fact(f"f{i}", "k", owner.id, "memory", f"fact {i}", moment, moment)
        for i, owner in enumerate((session, session, other))
    ]
    paths = []
    for fact in facts:
        sqlite_store.put_fact(fact)
        paths.append(files.write(fact).path)
    tomb = files.move_to_deleted(facts[1])
    sqlite_store.delete_fact("f1")
    folder = session_dir(settings.sessions_path, "k")
    folder.mkdir(parents=True)
    (folder / "pinned.md").write_text("pinned\n", encoding="utf-8")

    assert lifecycle.delete(sqlite_store, settings, session)
    assert sqlite_store.get_session(session.id) is None
    assert not folder.exists()
    assert not paths[0].exists()
    assert not tomb.path.exists()
    assert paths[2].exists()  # another session's memory stays
    assert sqlite_store.get_fact("f2") is not None


def test_a_purge_whose_store_step_fails_says_the_session_is_deleted(
    sqlite_store: SQLiteStore, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cleaning the store's files needs the rows deleted first: when it fails, the message
    says the session is deleted (the same delete could not find it again), and its folder
    is gone all the same."""
    session = chat(sqlite_store, "k", ["never share 4111", "noted"])
    folder = session_dir(settings.sessions_path, "k")
    folder.mkdir(parents=True)
    (folder / "pinned.md").write_text("never share 4111\n", encoding="utf-8")

    def busy() -> None:
        raise StoreError("the WAL could not be emptied")

    monkeypatch.setattr(sqlite_store, "purge_deleted", busy)
    with pytest.raises(PurgeError, match=r"the session is deleted .* until `memlane store purge`"):
        lifecycle.delete(sqlite_store, settings, session, purge=True)
    assert sqlite_store.get_session(session.id) is None
    assert not folder.exists()


def test_delete_leaves_nothing_said_in_the_process_memos(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    """The fingerprint, token-count and resent-items memos are keyed by message texts, and
    recall's kept searches hold them: a deleted session's words must not stay in the
    proxy's memory until they are evicted."""
    said = "my card number is 4111 1111 1111 1111"
    session = chat(sqlite_store, "k", [said, "noted"])
    Message("user", said).fingerprint()
    tokenizer = get_tokenizer("cl100k_base")
    tokenizer.count(said)
    Resend(RESENT, size=100).parse([said] * 20, lambda item, _: (Message("user", item),))
    found = Candidate("fact", "t1", "conv:x", session.id, said, session.created_at)
    SEARCHES.put(session.id, Query(said, SearchFilter(), 5, 15, session.created_at), [found], 60)
    assert remembered_fingerprints() > 0
    assert tokenizer.short_memo_entries > 0
    assert len(RESENT) > 0
    assert len(SEARCHES) > 0

    assert lifecycle.delete(sqlite_store, settings, session)
    assert remembered_fingerprints() == 0
    assert tokenizer.short_memo_entries == 0
    assert len(RESENT) == 0
    assert len(SEARCHES) == 0


def test_fork_drops_the_name_and_links_the_parent(sqlite_store: SQLiteStore) -> None:
    source = chat(sqlite_store, "src", ["a", "b", "c", "d"], name="src-name", tags=["t"])
    forked = lifecycle.fork(sqlite_store, source, new_key="copy", at_position=2)
    assert forked.parent_id == source.id
    assert forked.message_count == 2
    assert forked.metadata == {"tags": ["t"]}
    assert forked.title == "fork of src-name"


def test_import_is_all_or_nothing(sqlite_store: SQLiteStore) -> None:
    session = chat(sqlite_store, "k", ["a", "b"])
    lines = list(lifecycle.export_lines(sqlite_store, session))
    lines.append('{"type": "event", "kind": ""}')
    with pytest.raises(importing.ImportProblem, match="line 4"):
        importing.import_lines(sqlite_store, lines, key="copy")
    assert sqlite_store.find_session("copy") is None
    with pytest.raises(importing.ImportProblem, match="empty"):
        importing.import_lines(sqlite_store, ["", "  "])
    with pytest.raises(importing.ImportProblem, match="line 1 is not JSON"):
        importing.import_lines(sqlite_store, ["{"])
