"""The write path end to end over a real store and real files, with a scripted LLM."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.memory import scopes
from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.ingest import TurnInput, evict_conversation, ingest_turn
from memlane.engine.memory.summary import summary_id
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from memlane.text.llm import Completion, LLMError
from tests.engine.memory.conftest import agree
from tests.support.gitrepo import every_object
from tests.support.text import ScriptedLLM


def turn(
    user: str, assistant: str = "Noted.", *, session: str = "s1", ns: str = "repo"
) -> TurnInput:
    return TurnInput(
        session_id=session,
        namespace=ns,
        model="m",
        user_text=user,
        user_message_id=1,
        assistant_text=assistant,
    )


def facts_of(rt: Runtime, scope: str) -> list[str]:
    return [f.text for f in rt.store.list_facts(scope=scope, roles=("memory",))]


def git_files(book: MemoryBook) -> str:
    assert book.files is not None
    return subprocess.run(
        ["git", "ls-files"], cwd=book.files.root, capture_output=True, text=True, check=True
    ).stdout


def git_log(book: MemoryBook, fmt: str = "%s") -> list[str]:
    out = subprocess.run(
        ["git", "log", f"--format={fmt}%x1e"],
        cwd=book.files.root,  # type: ignore[union-attr]
        capture_output=True,
        text=True,
        check=True,
    )
    return [entry.strip("\n") for entry in out.stdout.split("\x1e") if entry.strip("\n")]


async def test_a_turn_becomes_turn_entries_a_fact_and_a_summary(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user\'s wife is named Anne"]', "The user is married to Anne.")
    report = await ingest_turn(rt, turn("My wife is Anne", "Nice to meet her!"))
    assert report.turns == 2
    assert report.facts_added == ["The user's wife is named Anne"]
    assert report.summary
    assert facts_of(rt, scopes.namespace_scope("repo")) == ["The user's wife is named Anne"]
    conversation = rt.store.list_facts(scope=scopes.conversation_scope("s1"))
    assert sorted((f.role, f.text) for f in conversation) == [
        ("assistant", "Nice to meet her!"),
        ("summary", "The user is married to Anne."),
        ("user", "My wife is Anne"),
    ]
    fact = rt.store.list_facts(roles=("memory",))[0]
    assert (fact.source_session, fact.source_message, fact.conversation_id) == ("s1", 1, "s1")
    on_disk = agree(book)
    assert len(on_disk) == 4
    roots = sorted(p.relative_to(book.files.entries).parts[1] for p in book.files.scan())  # type: ignore[union-attr]
    assert roots == ["facts", "summaries", "turns", "turns"]
    hits = await search(rt, "wife Anne", scopes=[scopes.namespace_scope("repo")])
    assert hits[0].text == "The user's wife is named Anne"


async def test_update_closes_the_old_fact_and_links_both_ways(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user loves pizza"]', "Loves pizza.")
    first = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
    await ingest_turn(rt, replace(turn("I love pizza"), said_at=first))
    (old,) = rt.store.list_facts(roles=("memory",))
    assert (old.valid_from, old.since) == (first, first)
    scripted_llm.push(
        '["The user hates pizza"]',
        '[{"event": "UPDATE", "id": "0", "text": "The user hates pizza now"}]',
        "Hates pizza.",
    )
    said = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    report = await ingest_turn(rt, replace(turn("Actually I hate pizza"), said_at=said))
    assert report.facts_updated == 1
    assert report.facts_deleted == 0
    assert "EXISTING" in scripted_llm.prompts[-2]  # the reconciliation saw the old fact
    assert current(rt) == ["The user hates pizza now"]
    new = next(f for f in rt.store.list_facts(roles=("memory",)) if f.id != old.id)
    assert new.text == "The user hates pizza now"
    closed = rt.store.get_fact(old.id)
    assert closed is not None
    assert (closed.deleted, closed.text, closed.valid_to) == (False, "The user loves pizza", said)
    assert (closed.replaced_by, new.supersedes, new.valid_from) == (new.id, old.id, said)
    assert [p for p in book.files.scan() if "/deleted/" in p.as_posix()] == []  # type: ignore[union-attr]
    on_disk = book.files.read(book.files.find(closed)).fact  # type: ignore[union-attr,arg-type]
    assert (on_disk.valid_to, on_disk.replaced_by) == (said, new.id)
    agree(book)
    hits = await search(rt, "pizza", scopes=[scopes.namespace_scope("repo")], roles=("memory",))
    assert [h.ref for h in hits] == [new.id]
    assert await book.flush()
    body = git_log(book, "%B")[0]
    assert "+ The user hates pizza now" in body
    assert "- The user loves pizza (2026-04-01 → 2026-05-01, replaced)" in body


def current(rt: Runtime) -> list[str]:
    """The texts of the memory facts true now."""
    now = datetime.now(UTC)
    return sorted(f.text for f in rt.store.list_facts(roles=("memory",)) if f.valid_at(now))


class DecidingLLM(ScriptedLLM):
    """A scripted LLM whose reconciliation answer is computed from the prompt's short ids."""

    def __init__(self, facts: list[str], decide: Callable[[dict[str, str]], list[dict[str, str]]]):
        super().__init__(default="Summary.")
        self.facts = facts
        self.decide = decide

    async def complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Completion:
        body = str(messages[-1]["content"])
        if body.startswith("User message"):
            self.push(json.dumps(self.facts))
        elif body.startswith("EXISTING"):
            listed = json.loads(body.split("\n")[0].removeprefix("EXISTING "))
            self.push(json.dumps(self.decide({item["text"]: item["id"] for item in listed})))
        return await super().complete(messages, **kwargs)


async def test_delete_with_its_replacement_and_none(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user lives in Lyon", "The user likes tea"]', "Lyon, tea.")
    first = Runtime(settings, sqlite_store, _llm=scripted_llm)
    await ingest_turn(first, turn("I live in Lyon and like tea"))
    lyon = next(f for f in sqlite_store.list_facts() if f.text == "The user lives in Lyon")

    llm = DecidingLLM(
        ["The user moved to Oslo", "The user likes tea"],
        lambda short: [
            {"event": "DELETE", "id": short["The user lives in Lyon"]},
            {"event": "ADD", "text": "The user moved to Oslo"},
            {"event": "NONE", "id": short["The user likes tea"]},
        ],
    )
    rt = Runtime(settings, sqlite_store, _llm=llm)
    report = await ingest_turn(rt, turn("I moved to Oslo; still like tea"))
    assert report.facts_added == ["The user moved to Oslo"]
    # the delete came with its replacement: the old fact is closed and linked, not deleted
    assert (report.facts_updated, report.facts_deleted) == (1, 0)
    assert current(rt) == ["The user likes tea", "The user moved to Oslo"]
    closed = sqlite_store.get_fact(lyon.id)
    assert closed is not None
    assert not closed.deleted
    assert closed.valid_to is not None
    oslo = sqlite_store.get_fact(closed.replaced_by or "")
    assert oslo is not None
    assert (oslo.text, oslo.supersedes) == ("The user moved to Oslo", lyon.id)
    agree(rt.memory_book)


async def test_a_delete_alone_is_a_soft_delete_ended_at_the_message(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user lives in Lyon", "The user likes tea"]', "Lyon, tea.")
    first = replace(turn("Lyon and tea"), said_at=datetime(2026, 1, 2, tzinfo=UTC))
    await ingest_turn(Runtime(settings, sqlite_store, _llm=scripted_llm), first)
    tea = next(f for f in sqlite_store.list_facts() if f.text == "The user likes tea")
    llm = DecidingLLM(
        ["The user gave up tea", "The user has a dog", "The user has a cat"],
        lambda short: [
            {"event": "DELETE", "id": short["The user likes tea"]},
            {"event": "ADD", "text": "The user has a dog"},
            {"event": "ADD", "text": "The user has a cat"},
            {"event": "NONE", "id": short["The user lives in Lyon"]},
        ],
    )
    rt = Runtime(settings, sqlite_store, _llm=llm)
    said = datetime(2026, 6, 2, 8, 0, tzinfo=UTC)
    report = await ingest_turn(rt, replace(turn("No tea; a dog and a cat"), said_at=said))
    # nothing ties the dog or the cat to the tea: the delete stays a delete
    assert (report.facts_updated, report.facts_deleted) == (0, 1)
    tomb = sqlite_store.get_fact(tea.id)
    assert tomb is not None
    assert (tomb.deleted, tomb.valid_to, tomb.replaced_by) == (True, said, None)
    assert current(rt) == ["The user has a cat", "The user has a dog", "The user lives in Lyon"]
    agree(rt.memory_book)


async def test_only_deletes_returned_still_adds_the_new_fact(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user lives in Lyon"]', "Lyon.")
    await ingest_turn(Runtime(settings, sqlite_store, _llm=scripted_llm), turn("I live in Lyon"))
    llm = DecidingLLM(
        ["The user lives in Oslo"],
        lambda short: [{"event": "DELETE", "id": short["The user lives in Lyon"]}],
    )
    rt = Runtime(settings, sqlite_store, _llm=llm)
    report = await ingest_turn(rt, turn("I live in Oslo"))
    assert report.reason.startswith("safeguard")
    assert current(rt) == ["The user lives in Oslo"]
    assert report.facts_updated == 1  # the delete was the replacement's: Lyon is closed
    agree(rt.memory_book)


async def test_llm_down_keeps_the_turns_and_loses_nothing(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(LLMError("connection refused"))
    report = await ingest_turn(rt, turn("My cat is called Tom", "Cute!"))
    assert (report.turns, report.facts_added, report.summary) == (2, [], False)
    texts = sorted(f.text for f in rt.store.list_facts())
    assert texts == ["Cute!", "My cat is called Tom"]
    agree(book)
    hits = await search(rt, "cat Tom", scopes=[scopes.conversation_scope("s1")])
    assert hits[0].text == "My cat is called Tom"


async def test_reconciliation_failure_adds_the_facts(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user likes tea"]', "Tea.")
    await ingest_turn(rt, turn("I like tea"))
    scripted_llm.push('["The user likes green tea"]', LLMError("timeout"), "Green tea.")
    await ingest_turn(rt, turn("Green tea, mostly"))
    assert sorted(facts_of(rt, scopes.namespace_scope("repo"))) == [
        "The user likes green tea",
        "The user likes tea",
    ]
    agree(book)


async def test_eviction_soft_deletes_the_oldest_entries(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    small = settings.model_copy(update={"memory_max_entries": 3, "memory_extract_facts": False})
    rt = Runtime(small, sqlite_store, _llm=scripted_llm)
    await ingest_turn(rt, turn("first question", "first answer"))
    await ingest_turn(rt, turn("second question", "second answer"))
    report = await ingest_turn(rt, turn("third question", "third answer"))
    assert report.evicted == 2
    active = [f.text for f in sqlite_store.list_facts()]
    assert active == ["second answer", "third question", "third answer"]
    on_disk = agree(rt.memory_book)
    assert sum(deleted for _, deleted in on_disk.values()) == 3


class ListingCounter(SQLiteStore):
    """The real store, counting how often a conversation's entries are listed whole."""

    listings = 0

    def list_facts(self, **kwargs: Any) -> Any:  # type: ignore[override]
        if kwargs.get("conversation_id") is not None:
            self.listings += 1
        return super().list_facts(**kwargs)


async def test_a_conversation_under_its_limit_is_not_listed_after_every_turn(
    settings: Settings, tmp_path: Any, scripted_llm: ScriptedLLM
) -> None:
    store = ListingCounter(tmp_path / "counted.db")
    small = settings.model_copy(update={"memory_max_entries": 6, "memory_extract_facts": False})
    rt = Runtime(small, store, _llm=scripted_llm)
    try:
        for n in range(3):  # 2, 4, 6 entries: within the limit
            report = await ingest_turn(rt, turn(f"question {n}", f"answer {n}"))
            assert report.evicted == 0
        assert store.listings == 1  # the first turn's listing; the count carries on since
        report = await ingest_turn(rt, turn("question 3", "answer 3"))  # 8 > 6
        assert report.evicted == 2
        assert store.listings == 2
        assert [f.text for f in store.list_facts()][:2] == ["question 1", "answer 1"]
    finally:
        store.close()


async def test_the_entry_counts_a_process_keeps_stay_within_their_bound(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy serves new sessions as long as it runs: it remembers the entry counts of
    the latest conversations only, and one forgotten is listed again (its count right)."""
    monkeypatch.setattr("memlane.engine.memory.book.core.ENTRY_COUNTS_KEPT", 3)
    rt = Runtime(settings, sqlite_store)
    book = rt.memory_book
    for n in range(5):
        await evict_conversation(rt, book, f"conversation-{n}", added=2)
    assert book.entry_counts == {"conversation-2": 0, "conversation-3": 0, "conversation-4": 0}
    await evict_conversation(rt, book, "conversation-2", added=2)  # noted again: kept longest
    await evict_conversation(rt, book, "conversation-5")
    assert list(book.entry_counts) == ["conversation-4", "conversation-2", "conversation-5"]


async def test_turns_are_committed_together_not_one_commit_each(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user likes tea"]', "Tea.")
    await ingest_turn(rt, turn("I like tea"))
    scripted_llm.push("[]")
    await ingest_turn(rt, turn("How are you?"))
    assert not (book.files.root / ".git").exists()  # type: ignore[union-attr]  # not yet
    assert await book.flush()
    log = git_log(book)
    assert log == ["memory: 2 updates"]
    body = git_log(book, "%b")[0]
    assert "- memory: +1 fact(s), 2 turn(s), summary updated in conversation s1" in body
    assert "- memory: 2 turn(s) in conversation s1" in body
    assert not await book.flush()  # nothing left waiting
    ignored = (book.files.root / ".gitignore").read_text()  # type: ignore[union-attr]
    assert "memory_index.json" in ignored
    tracked = git_files(book)
    assert "memory_index.json" not in tracked
    assert tracked.count(".md") == 6  # 4 turns, 1 fact, 1 summary


async def test_queued_changes_commit_after_a_quiet_period_or_once_the_oldest_waited(
    rt: Runtime, book: MemoryBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.engine.memory.book import history

    await book.ready()
    monkeypatch.setattr(history, "COMMIT_QUIET_SECONDS", 0.05)
    await book.write(
        puts=[
            new_fact(scope="global", conversation_id="c", role="memory", text="one", fact_id="f1")
        ]
    )
    book.commit_later("memory: one")
    await asyncio.sleep(0.2)
    await rt.background.drain()
    assert git_log(book) == ["memory: one"]
    # changes that keep coming within the quiet period commit once the oldest is due
    monkeypatch.setattr(history, "COMMIT_QUIET_SECONDS", 60.0)
    monkeypatch.setattr(history, "COMMIT_MAX_WAIT_SECONDS", 0.2)
    for n in range(3):
        await book.write(
            puts=[
                new_fact(
                    scope="global",
                    conversation_id="c",
                    role="memory",
                    text=f"x{n}",
                    fact_id=f"x{n}",
                )
            ]
        )
    for n in range(3):
        book.commit_later(f"memory: x{n}")
    await asyncio.sleep(0.3)
    await rt.background.drain()
    assert git_log(book) == ["memory: 3 updates", "memory: one"]


async def test_namespaces_never_see_each_other(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = Runtime(settings, sqlite_store, _llm=scripted_llm)
    scripted_llm.push('["The deploy key lives in vault path ops/alpha"]', "S.")
    await ingest_turn(rt, turn("deploy key is in ops/alpha", session="a1", ns="alpha"))
    scripted_llm.push('["The deploy key lives in vault path ops/beta"]', "S.")
    await ingest_turn(rt, turn("deploy key is in ops/beta", session="b1", ns="beta"))
    for ns, session, other in (("alpha", "a2", "beta"), ("beta", "b2", "alpha")):
        found = await search(
            rt,
            "where is the deploy key vault path",
            scopes=scopes.recall_scopes(settings, session, ns),
            top_k=20,
        )
        assert found, ns
        assert all(other not in h.text for h in found)
        assert all(h.scope in (scopes.namespace_scope(ns), scopes.GLOBAL) for h in found)


async def test_summary_is_one_entry_rewritten_in_place(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user likes tea"]', "Likes tea.")
    await ingest_turn(rt, turn("I like tea"))
    scripted_llm.push(
        '["The user has a cat"]',
        '[{"event": "ADD", "text": "The user has a cat"}]',
        "Likes tea, has a cat.",
    )
    await ingest_turn(rt, turn("I have a cat"))
    summary = rt.store.get_fact(summary_id("s1"))
    assert summary is not None
    assert summary.text == "Likes tea, has a cat."
    assert "PREVIOUS:\nLikes tea." in scripted_llm.prompts[-1]
    files = [p for p in book.files.scan() if "/summaries/" in p.as_posix()]  # type: ignore[union-attr]
    assert len(files) == 1


@pytest.mark.parametrize("mode", ["conversation", "namespace"])
async def test_fact_scope_setting(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM, mode: str
) -> None:
    rt = Runtime(
        settings.model_copy(update={"memory_fact_scope": mode}), sqlite_store, _llm=scripted_llm
    )
    scripted_llm.push('["The user likes tea"]', "Tea.")
    await ingest_turn(rt, turn("I like tea"))
    (fact,) = sqlite_store.list_facts(roles=("memory",))
    expected = scopes.conversation_scope("s1") if mode == "conversation" else "ns:repo"
    assert fact.scope == expected


@pytest.mark.parametrize(
    ("update", "user_scope"),
    [
        ({}, "global"),  # the user's fact follows them: the tenant's global scope
        ({"memory_fact_scope": "conversation"}, "conv:s1"),  # every fact stays in its conversation
        ({"memory_scopes": ("conversation", "namespace")}, "ns:repo"),  # no global recall
    ],
)
async def test_a_user_fact_goes_where_it_will_be_recalled(
    settings: Settings,
    sqlite_store: SQLiteStore,
    scripted_llm: ScriptedLLM,
    update: dict[str, Any],
    user_scope: str,
) -> None:
    rt = Runtime(settings.model_copy(update=update), sqlite_store, _llm=scripted_llm)
    scripted_llm.push(
        '[{"message": 1, "fact": "The user likes tea", "about": "user"},'
        ' {"message": 1, "fact": "The project ships on Fridays", "about": "project"},'
        ' {"message": 1, "fact": "The project uses uv", "about": "nobody"}]',
        "Tea.",
    )
    await ingest_turn(rt, turn("I like tea; we ship on Fridays and use uv"))
    placed = {f.text: f.scope for f in sqlite_store.list_facts(roles=("memory",))}
    project_scope = "conv:s1" if update.get("memory_fact_scope") else "ns:repo"
    assert placed == {
        "The user likes tea": user_scope,
        "The project ships on Fridays": project_scope,
        "The project uses uv": project_scope,  # an unknown label stays in the project
    }


async def test_a_failed_first_sync_is_tried_again(
    rt: Runtime, book: MemoryBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = book.sync_files

    async def flaky(**options: bool) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk busy")
        return await real(**options)

    monkeypatch.setattr(book, "sync_files", flaky)
    with pytest.raises(OSError, match="disk busy"):
        await book.ready()
    await book.ready()  # not the cached failure: a second try that succeeds
    assert len(calls) == 2


def test_nothing_is_queued_when_no_kind_of_memory_is_written(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    from memlane.engine.memory.ingest import turn_input
    from memlane.engine.turn import Answer, Turn
    from memlane.types import Message, Session

    now = datetime.now(UTC)
    quiet = settings.model_copy(update={"memory_store_turns": False, "memory_extract_facts": False})
    session = Session(id="s", key="s", namespace="s", created_at=now, updated_at=now)
    done = Turn("s", "s", "m", "chat", [Message("user", "hi")], session=session)
    answer = Answer([Message("assistant", "hello")])
    assert turn_input(Runtime(quiet, sqlite_store), done, answer) is None
    queued = turn_input(Runtime(settings, sqlite_store), done, answer)
    assert queued is not None
    assert queued.model == "m"  # no memory_llm_model or llm_model: the request's model
    # facts only, and a turn with no new user message (a tool loop's): nothing to extract from
    facts_only = settings.model_copy(update={"memory_store_turns": False})
    tool_loop = Turn("s", "s", "m", "chat", [Message("user", "   ")], session=session)
    assert turn_input(Runtime(facts_only, sqlite_store), tool_loop, answer) is None
    assert turn_input(Runtime(facts_only, sqlite_store), done, answer) is not None


async def test_a_typed_key_never_reaches_a_fact_a_file_or_git(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    key = "sk-live-9f8e7d6c5b4a39281706abcdef"
    # a model that echoes what it was given would put the key into the fact
    scripted_llm.push("[\"The user's api key is " + key + '"]', "Noted.")
    await ingest_turn(rt, turn(f"my api_key={key} for the staging account"))
    await book.flush()
    assert scripted_llm.calls, "no extraction call was made"
    assert all(key not in json.dumps(call.messages) for call in scripted_llm.calls)
    assert all(key not in f.text for f in rt.store.list_facts(include_deleted=True))
    assert any("[redacted" in f.text for f in rt.store.list_facts())
    root = book.files.root  # type: ignore[union-attr]
    for path in root.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert key.encode() not in every_object(root)  # every object, loose or packed, decompressed


async def test_a_key_added_by_hand_never_reaches_a_commit_message(
    rt: Runtime, book: MemoryBook
) -> None:
    from memlane.engine.memory.manage import add_memory, forget_memory

    key = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    fact = await add_memory(rt, f"the deploy token is {key}")
    await forget_memory(rt, fact.id)
    root = book.files.root  # type: ignore[union-attr]
    assert key.encode() not in every_object(root)
    assert "[redacted github-token]" in git_messages(root)


def git_messages(root: Any) -> str:
    done = subprocess.run(["git", "log", "--format=%B"], cwd=root, capture_output=True, text=True)
    return done.stdout


async def test_a_batch_keeps_each_fact_with_its_own_message_through_reconciliation(
    rt: Runtime, book: MemoryBook, scripted_llm: ScriptedLLM
) -> None:
    from memlane.engine.memory.ingest import ingest_turns

    scripted_llm.push('["The user lives in Berlin"]', "Berlin.")
    await ingest_turn(
        rt, replace(turn("I live in Berlin"), said_at=datetime(2026, 1, 1, tzinfo=UTC))
    )
    (berlin,) = rt.store.list_facts(roles=("memory",))
    cat_at, moved_at = datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 2, 2, tzinfo=UTC)
    scripted_llm.push(
        '[{"message": 1, "fact": "The user has a cat"},'
        ' {"message": 2, "fact": "The user moved to Lisbon"}]',
        '[{"event": "ADD", "text": "The user has a cat"},'
        ' {"event": "UPDATE", "id": "0", "text": "The user lives in Lisbon now"}]',
        "Cat, Lisbon.",
    )
    batch = [
        replace(turn("I have a cat"), user_message_id=11, said_at=cat_at),
        replace(turn("I moved to Lisbon"), user_message_id=12, said_at=moved_at),
    ]
    report = await ingest_turns(rt, batch)
    assert len(scripted_llm.calls) == 2 + 3  # one extraction, one reconciliation, one summary
    assert (report.turns, report.facts_updated) == (4, 1)
    now = {f.text: f for f in rt.store.list_facts(roles=("memory",)) if f.valid_to is None}
    cat, lisbon = now["The user has a cat"], now["The user lives in Lisbon now"]
    assert (cat.source_message, cat.valid_from) == (11, cat_at)
    # the rewritten text is matched to the new fact it shares words with: message 2
    assert (lisbon.source_message, lisbon.valid_from, lisbon.supersedes) == (
        12,
        moved_at,
        berlin.id,
    )
    closed = rt.store.get_fact(berlin.id)
    assert closed is not None
    assert closed.valid_to == moved_at
    agree(book)


async def test_writes_waiting_together_are_written_and_a_bad_one_fails_alone(
    rt: Runtime, book: MemoryBook
) -> None:
    from memlane.files.memory_files import new_id

    await book.ready()

    def entry(text: str) -> Any:
        return new_fact(
            scope=scopes.conversation_scope("s1"),
            conversation_id="s1",
            role="user",
            text=text,
            fact_id=new_id(),
        )

    good = [entry(f"hello {i}") for i in range(3)]
    bad = replace(entry("no such role"), role="bogus")  # type: ignore[arg-type]
    writes = [book.write(puts=[f], new={f.id}) for f in [*good[:2], bad, good[2]]]
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert [o is None for o in outcomes] == [True, True, False, True]
    assert isinstance(outcomes[2], KeyError)  # only its own caller sees the failure
    assert {f.id for f in rt.store.list_facts()} == {f.id for f in good}
    agree(book)
