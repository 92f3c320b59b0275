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
from memlane.store import NewMessage, StoreError
from memlane.store.base import SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.text.tokens import get_tokenizer
from memlane.types import Fact, Message
from memlane.types.messages import remembered_fingerprints
from memlane.types.resent import RESENT, Resend
from memlane.types.scopes import conversation_scope, namespace_scope
from tests.engine.sessions.conftest import chat
from tests.support.gitrepo import every_object, git, make_repo


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


@pytest.mark.parametrize("purge", [False, True])
def test_delete_removes_the_sessions_own_memory_folder_and_nothing_shared(
    sqlite_store: SQLiteStore, settings: Settings, purge: bool
) -> None:
    """Deleted means gone: the folder of the session's conversation scope goes with its
    `.scope` file and the sub-folders its entries left empty, committed like its files;
    the namespace's folder, which other sessions share, stays as it is."""
    session = chat(sqlite_store, "k", ["remember I like tea", "noted"])
    other = chat(sqlite_store, "other", ["x"])
    moment = datetime.now(UTC)
    files = MemoryFiles(settings.memory_path)
    own = conversation_scope(session.id)
    shared = namespace_scope(session.namespace)
    written = [
        Fact("t1", own, session.id, "user", "I like tea", moment, moment),
        Fact("t2", own, session.id, "assistant", "noted", moment, moment),
        Fact("f1", shared, session.id, "memory", "likes tea", moment, moment),
        Fact("f2", shared, other.id, "memory", "likes coffee", moment, moment),
    ]
    for fact in written:
        sqlite_store.put_fact(fact)
        files.write(fact)
    files.move_to_deleted(written[1])  # a deleted/ sub-folder too
    make_repo(settings.memory_path, {})

    assert lifecycle.delete(sqlite_store, settings, session, purge=purge)
    assert not files.scope_dir(own).exists()
    assert (files.scope_dir(shared) / ".scope").read_text(encoding="utf-8") == f"{shared}\n"
    assert [p.name for p in files.scope_dir(shared).rglob("*.md")] == [
        files.path_for(written[3]).name
    ]
    assert git(settings.memory_path, "status", "--porcelain") == ""
    assert files.scope_dir(own).name not in git(settings.memory_path, "ls-files")


@pytest.mark.parametrize("purge", [False, True])
def test_delete_finds_the_memory_files_a_person_renamed(
    sqlite_store: SQLiteStore, settings: Settings, purge: bool
) -> None:
    """The front matter's id says whose file it is: renamed and committed under its new
    name, it still goes, and a purge takes both names out of the history."""
    session = chat(sqlite_store, "k", ["remember I like oolong", "noted"])
    moment = datetime.now(UTC)
    files = MemoryFiles(settings.memory_path)
    scope = namespace_scope(session.namespace)
    fact = Fact("f1", scope, session.id, "memory", "likes oolong-5521 tea", moment, moment)
    sqlite_store.put_fact(fact)
    written = files.write(fact).path
    make_repo(settings.memory_path, {})
    renamed = written.with_name("tea.md")
    written.rename(renamed)
    git(settings.memory_path, "add", "-A")
    git(settings.memory_path, "commit", "-q", "-m", "renamed by hand")

    assert lifecycle.delete(sqlite_store, settings, session, purge=purge)
    assert not renamed.exists()
    assert (b"oolong-5521" in every_object(settings.memory_path)) is not purge


def test_a_hand_written_file_keeps_the_sessions_memory_folder(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    """A file memlane did not write for the session is not memlane's to delete: the
    folder stays, with the `.scope` that says which scope that file is in."""
    session = chat(sqlite_store, "k", ["hi"])
    moment = datetime.now(UTC)
    files = MemoryFiles(settings.memory_path)
    own = conversation_scope(session.id)
    files.write(Fact("t1", own, session.id, "user", "hi", moment, moment))
    sqlite_store.put_fact(Fact("t1", own, session.id, "user", "hi", moment, moment))
    note = files.scope_dir(own) / "facts" / "mine.md"
    note.parent.mkdir()
    note.write_text("a note of my own\n", encoding="utf-8")

    assert lifecycle.delete(sqlite_store, settings, session)
    assert note.exists()
    assert (files.scope_dir(own) / ".scope").exists()
    assert list(files.scope_dir(own).rglob("*__t1.md")) == []


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


def test_a_fork_point_past_the_sessions_messages_is_refused(sqlite_store: SQLiteStore) -> None:
    """`at_position` is a position (0-based, superseded messages hold theirs): 0 is an
    empty fork, one past the last position copies everything, anything else is refused
    with the range instead of being taken as "everything"."""
    source = chat(sqlite_store, "src", ["a", "b", "c", "d"])
    with pytest.raises(lifecycle.ForkPointOutOfRange) as refused:
        lifecycle.fork(sqlite_store, source, new_key="far", at_position=999)
    assert refused.value.end == 4
    assert str(refused.value) == (
        f"session {source.id} has messages at positions 0..3; the fork point must be 0..4 "
        "(the fork copies the messages before it), not 999"
    )
    assert refused.value.explain("--at").startswith(f"session {source.id} has messages")
    assert sqlite_store.find_session("far") is None
    assert lifecycle.fork(sqlite_store, source, new_key="all", at_position=4).message_count == 4
    assert lifecycle.fork(sqlite_store, source, new_key="none", at_position=0).message_count == 0

    (stale,) = sqlite_store.list_messages(source.id)[-1:]
    sqlite_store.set_message_status(stale.id, "superseded")
    sqlite_store.append_messages(source.id, [NewMessage(Message("assistant", "e"), 1)])
    again = sqlite_store.get_session(source.id)
    assert again is not None
    assert again.message_count == 4  # a, b, c, e: e is at position 4
    assert lifecycle.fork_end(sqlite_store, again) == 5
    assert lifecycle.fork(sqlite_store, again, new_key="to-e", at_position=5).message_count == 4
    with pytest.raises(lifecycle.ForkPointOutOfRange, match=r"must be 0\.\.5"):
        lifecycle.fork(sqlite_store, again, new_key="past", at_position=6)

    empty = sqlite_store.ensure_session("empty")
    with pytest.raises(lifecycle.ForkPointOutOfRange, match="has no messages; the fork point"):
        lifecycle.fork(sqlite_store, empty, new_key="e1", at_position=1)
    assert lifecycle.fork(sqlite_store, empty, new_key="e0", at_position=0).message_count == 0


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
