"""The search index: keyword ranking and filters, turn documents, vectors.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

import numpy as np
import pytest

from memlane.store import (
    NewEvent,
    SearchFilter,
    SearchIndex,
    Store,
)
from memlane.store import facts as facts_module
from memlane.store.bm25 import MAX_QUERY_TERMS
from memlane.store.facts import live_turns
from memlane.types import Fact
from tests.store.contract.support import MODEL, fact, unit


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("src/app/main.py", "m-path"),
        ("parse_config_file", "m-snake"),
        ("loadUserProfile", "m-camel"),
        ("E1234", "m-code"),
        ("main.py", "m-path"),
        ("profile", "m-camel"),
    ],
)
def test_keyword_search_finds_identifiers(store: Store, query: str, expected: str) -> None:
    docs = {
        "m-path": "the bug is in src/app/main.py near the top",
        "m-snake": "call parse_config_file before starting",
        "m-camel": "loadUserProfile returns None for guests",
        "m-code": "the linter reports E1234 on every line",
        "m-other": "E1235 is a different warning about src/app/other.py",
    }
    for ref, text in docs.items():
        store.put_fact(fact(ref, text))
    hits = store.keyword_search(query, SearchFilter(), limit=3)
    assert hits
    assert hits[0].ref == expected
    assert all(h.score > 0 for h in hits)
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)


def test_a_long_message_is_searched_by_its_rarest_words(store: Store) -> None:
    """Past `MAX_QUERY_TERMS` words a query is scored by those fewest documents hold: a
    memory holding only its commonest words is not found by the long message, though a
    short query of those words finds it."""
    rare = [f"rare{i}" for i in range(MAX_QUERY_TERMS)]
    common = [f"common{i}" for i in range(10)]
    for i, word in enumerate(rare):
        store.put_fact(fact(f"r{i}", f"{word} noted"))
    for i in range(5):
        store.put_fact(fact(f"c{i}", " ".join(common)))

    long_message = " ".join(common + rare)
    found = {h.ref for h in store.keyword_search(long_message, SearchFilter(), limit=100)}

    assert found == {f"r{i}" for i in range(MAX_QUERY_TERMS)}
    short = store.keyword_search(" ".join(common), SearchFilter(), limit=100)
    assert {h.ref for h in short} == {f"c{i}" for i in range(5)}


def test_keyword_search_ranks_and_filters(store: Store) -> None:
    a = store.ensure_session("a", namespace="repo-a")
    b = store.ensure_session("b", namespace="repo-b")
    crash = store.add_event(a.id, "dropped", {}, text="the parser crashes on unicode input")
    store.add_event(b.id, "dropped", {}, text="the parser is fast")
    store.put_fact(fact("f", "the parser crashes when given unicode", scope="repo-a"))
    store.put_fact(fact("s", "parser summary", scope="repo-a", role="summary"))

    everything = store.keyword_search("parser unicode crash", SearchFilter(), limit=10)
    assert {h.ref for h in everything[:2]} == {"f", str(crash.id)}
    assert len(everything) == 4
    scoped = store.keyword_search("parser", SearchFilter(scopes=("repo-b",)))
    assert [(h.kind, h.session_id, h.scope) for h in scoped] == [("event", b.id, "repo-b")]
    by_session = store.keyword_search("parser", SearchFilter(session_id=a.id))
    assert {h.session_id for h in by_session} == {a.id}
    assert {h.kind for h in by_session} == {"event"}
    facts_only = store.keyword_search("parser", SearchFilter(kinds=("fact",)))
    assert {h.ref for h in facts_only} == {"f", "s"}
    memories = store.keyword_search("parser", SearchFilter(kinds=("fact",), fact_roles=("memory",)))
    assert [h.ref for h in memories] == ["f"]
    assert store.keyword_search("parser", SearchFilter(scopes=())) == []
    assert store.keyword_search("", SearchFilter()) == []
    assert store.keyword_search("the of and", SearchFilter()) == []
    assert store.keyword_search('"parser" OR (NEAR', SearchFilter())  # no query syntax leaks
    assert everything[0].created_at.tzinfo is not None


def test_fact_documents_belong_to_their_conversation(store: Store) -> None:
    session = store.ensure_session("s", namespace="repo-a")
    store.put_fact(fact("f", "uses poetry", conversation_id=session.id))
    hits = store.keyword_search("poetry", SearchFilter(session_id=session.id))
    assert [(h.kind, h.ref, h.scope, h.session_id) for h in hits] == [
        ("fact", "f", "repo-a", session.id)
    ]


def turn(fact_id: str, text: str, minutes: int, role: str = "user") -> Fact:
    return fact(fact_id, text, scope="conv:c", conversation_id="c", role=role, minutes=minutes)


def test_a_turn_is_found_by_its_neighbours_words_and_shown_alone(store: Store) -> None:
    store.put_fact(turn("t1", "We adopted a greyhound last week", 0))
    store.put_fact(turn("t2", "What did you name her?", 1, role="assistant"))
    store.put_fact(turn("t3", "Biscuit, after her colour", 2))
    store.put_fact(fact("m", "The user has a dog", scope="conv:c", conversation_id="c", minutes=3))
    flt = SearchFilter(kinds=("fact",))
    found = {h.ref: h.text for h in store.keyword_search("greyhound", flt)}
    # t2 and t3 hold "greyhound" only through t1, their earlier neighbour
    assert set(found) == {"t1", "t2", "t3"}
    assert found["t3"] == "Biscuit, after her colour"  # the hit is the turn itself
    # the turn's own words outrank its neighbours'
    assert store.keyword_search("greyhound", flt)[0].ref == "t1"
    assert [h.ref for h in store.keyword_search("name", flt)][:1] == ["t2"]
    assert "t1" in {h.ref for h in store.keyword_search("name", flt)}  # its next turn
    assert [h.ref for h in store.keyword_search("dog", flt)] == ["m"]  # facts stand alone
    # the date words of the turn's day are indexed
    assert {h.ref for h in store.keyword_search("January 2026", flt)} == {"t1", "t2", "t3"}


def test_a_turn_that_arrives_late_joins_its_neighbours_documents(store: Store) -> None:
    store.put_fact(turn("a", "first words", 0))
    store.put_fact(turn("c", "third words", 2))
    store.put_fact(turn("b", "the marathon in Berlin", 1))  # written after its next turn
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("marathon", flt)} == {"a", "b", "c"}


def test_turns_written_together_get_the_documents_written_one_by_one_would(
    store: Store,
) -> None:
    """`put_facts` indexes each turn once, with the neighbours it has once all are in,
    and the turns before them again once: what a full rebuild makes, nothing stale."""
    store.put_fact(turn("a", "we planned the trip", 0))
    store.put_facts(
        [
            turn("d", "the ferry leaves at nine", 3),
            turn("b", "to the island of Hydra", 1),  # earlier than "d": out of order
            turn("c", "what should we pack", 2, role="assistant"),
            turn("e", "sunscreen, mostly", 4, role="assistant"),
        ]
    )
    assert store.reindex_turns() == 0  # every document already as a rebuild makes it
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("Hydra", flt)} == {"a", "b", "c", "d"}
    assert {h.ref for h in store.keyword_search("sunscreen", flt)} == {"d", "e"}


def test_turns_written_together_read_their_neighbours_once_per_conversation(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy's batch holds an exchange of each of many conversations: the turns around
    them are read once a conversation (before, between, after), not once an entry and
    again for each neighbour indexed anew."""
    for n, (role, text) in enumerate([("user", "we sail to Hydra"), ("assistant", "when?")]):
        for c in ("c", "k"):
            store.put_fact(
                fact(f"{c}{n}", text, scope=f"conv:{c}", conversation_id=c, role=role, minutes=n)
            )
    reads: list[str] = []

    def counted(db: object, of: Fact, direction: str, limit: int) -> list[Fact]:
        reads.append(of.conversation_id)
        return live_turns(db, of, direction, limit)  # type: ignore[type-var]

    monkeypatch.setattr(facts_module, "live_turns", counted)
    store.put_facts(
        [
            fact(f"{c}{n}", text, scope=f"conv:{c}", conversation_id=c, role=role, minutes=n)
            for n, role, text in [(2, "user", "on Tuesday"), (3, "assistant", "pack light")]
            for c in ("c", "k")
        ]
    )
    assert sorted(reads) == ["c", "c", "k", "k"]
    monkeypatch.undo()
    assert store.reindex_turns() == 0  # every document as a rebuild makes it
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("Tuesday", flt)} == {
        "c1",
        "c2",
        "c3",
        "k1",
        "k2",
        "k3",
    }


def test_reindex_turns_rebuilds_documents_and_is_idempotent(store: Store) -> None:
    store.put_fact(turn("a", "we booked the ferry", 0))
    store.put_fact(turn("b", "for Tuesday", 1))
    assert store.reindex_turns() == 0  # already current
    done: list[tuple[int, int]] = []
    assert store.reindex_turns(lambda n, total: done.append((n, total))) == 0
    assert done[-1] == (2, 2)
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("ferry", flt)} == {"a", "b"}


def test_vector_knn_with_scope_filter(store: Store) -> None:
    for i in range(30):
        store.put_fact(fact(f"f{i}", f"fact number {i}", scope="a" if i % 2 else "b"))
    store.put_vectors("fact", [(f"f{i}", unit(i)) for i in range(30)], model=MODEL)
    query = (unit(7) + 0.1 * unit(100)).astype(np.float32)
    hits = store.vector_search(query, SearchFilter(), model=MODEL, limit=3)
    assert hits[0].ref == "f7"
    assert hits[0].score == pytest.approx(float(unit(7) @ query / np.linalg.norm(query)), abs=1e-4)
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)
    scoped = store.vector_search(unit(7), SearchFilter(scopes=("b",)), model=MODEL, limit=5)
    assert len(scoped) == 5
    assert all(h.scope == "b" and int(h.ref[1:]) % 2 == 0 for h in scoped)
    assert "f7" not in {h.ref for h in scoped}
    assert store.vector_search(unit(7), SearchFilter(), model="other-model") == []
    assert store.vector_search(unit(7), SearchFilter(scopes=("zzz",)), model=MODEL) == []


def dropped(store: Store, session_id: str, *texts: str) -> list[str]:
    events = store.add_events(session_id, [NewEvent("dropped", {}, text) for text in texts])
    return [str(e.id) for e in events]


def test_vector_search_sees_new_and_replaced_vectors(store: Store) -> None:
    session = store.ensure_session("s", namespace="ns")
    refs = dropped(store, session.id, "one", "two")
    store.put_vectors("event", [(refs[0], unit(1))], model=MODEL)
    assert [h.ref for h in store.vector_search(unit(1), SearchFilter(), model=MODEL)] == [refs[0]]
    store.put_vectors("event", [(refs[1], unit(2))], model=MODEL)
    hits = store.vector_search(unit(2), SearchFilter(session_id=session.id), model=MODEL)
    assert [h.ref for h in hits] == [refs[1], refs[0]]
    store.put_vectors("event", [(refs[0], unit(2))], model=MODEL)
    hits = store.vector_search(unit(2), SearchFilter(), model=MODEL)
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0], abs=1e-5)
    assert hits[0].kind == "event"
    assert hits[0].scope == "ns"


def test_missing_get_and_drop_vectors(store: Store) -> None:
    for ref, text in [("a", "alpha"), ("b", "beta"), ("c", "gamma")]:
        store.put_fact(fact(ref, text))
    assert store.missing_vectors("fact", model=MODEL) == [
        ("a", "alpha"),
        ("b", "beta"),
        ("c", "gamma"),
    ]
    store.put_vectors("fact", [("a", unit(1)), ("b", unit(2))], model=MODEL)
    store.put_vectors("fact", [("c", unit(3, dim=8))], model="old-model")
    assert store.missing_vectors("fact", model=MODEL) == [("c", "gamma")]
    assert store.missing_vectors("fact", model=MODEL, limit=0) == []
    got = store.get_vectors("fact", ["a", "c", "missing"], model=MODEL)
    assert set(got) == {"a"}
    np.testing.assert_allclose(got["a"], unit(1), rtol=1e-6)
    assert store.vector_search(unit(3, dim=8), SearchFilter(), model="old-model")
    assert store.drop_vectors(except_model=MODEL) == 1
    assert store.get_vectors("fact", ["c"], model="old-model") == {}
    assert store.vector_search(unit(3, dim=8), SearchFilter(), model="old-model") == []
    assert store.drop_vectors(except_model=MODEL) == 0
    assert len(store.vector_search(unit(1), SearchFilter(), model=MODEL)) == 2


def test_changed_fact_text_needs_a_new_vector(store: Store) -> None:
    store.put_fact(fact("f", "first text"))
    store.put_vectors("fact", [("f", unit(1))], model=MODEL)
    store.put_fact(fact("f", "first text"))
    assert store.missing_vectors("fact", model=MODEL) == []
    store.put_fact(fact("f", "second text"))
    assert store.missing_vectors("fact", model=MODEL) == [("f", "second text")]
    assert store.vector_search(unit(1), SearchFilter(), model=MODEL) == []


def test_a_fact_written_twice_in_one_call_is_indexed_as_its_last_version(store: Store) -> None:
    """A group of documents is written together (in one statement on PostgreSQL): the
    same document twice in it is the later one, as when each was written in turn."""
    store.put_facts([fact("f", "draft wording about kiwis"), fact("f", "final wording on mangos")])
    assert [h.ref for h in store.keyword_search("mangos", SearchFilter())] == ["f"]
    assert store.keyword_search("kiwis", SearchFilter()) == []
    assert store.missing_vectors("fact", model=MODEL) == [("f", "final wording on mangos")]


def test_backend_plays_the_search_index_role(store: Store) -> None:
    assert isinstance(store, SearchIndex)


def test_rare_term_hits_name_the_few_documents_whose_own_text_says_a_word(store: Store) -> None:
    turns = [
        ("t0", "I visited Sweden last spring"),
        ("t1", "that sounds lovely"),  # its document holds t0's words, as a neighbour
        ("t2", "the garden needs water"),
    ]
    for minute, (ref, text) in enumerate(turns):
        store.put_fact(
            fact(ref, text, scope="conv:c", conversation_id="c", role="user", minutes=minute)
        )
    for i in range(6):
        store.put_fact(fact(f"w{i}", f"water the plants, note {i}", scope="conv:c", minutes=10 + i))
    store.put_fact(fact("far", "Sweden again", scope="conv:other", conversation_id="other"))
    store.put_fact(fact("gone", "Sweden, deleted", scope="conv:c", minutes=30))
    store.delete_fact("gone")
    flt = SearchFilter(kinds=("fact",), scopes=("conv:c",))

    found = store.rare_term_hits(["sweden", "water", "lovely", "absent"], flt, max_df=5)
    assert {word: [h.ref for h in hits] for word, hits in found.items()} == {
        "sweden": ["t0"],  # not t1 (a neighbour's word), nor another scope's, nor a deleted one
        "lovely": ["t1"],
    }  # "water": 7 documents hold it, more than 5; "absent": none
    assert found["sweden"][0].text == "I visited Sweden last spring"
    assert found["sweden"][0].scope == "conv:c"
    assert set(store.rare_term_hits(["water"], flt, max_df=10)) == {"water"}
    # a limit on the documents read takes the rarest words first (ties: by the word)
    both = ["sweden", "water", "lovely"]
    assert set(store.rare_term_hits(both, flt, max_df=10, limit=6)) == {"lovely", "sweden"}
    assert set(store.rare_term_hits(both, flt, max_df=10, limit=5)) == {"lovely"}
    assert store.rare_term_hits(both, flt, max_df=10, limit=2) == {}
    # nor is a word rare that many of the few visible documents hold (9 here, 3 hold each)
    assert set(store.rare_term_hits(both, flt, max_df=10, max_share=0.4)) == {"lovely", "sweden"}
    assert store.rare_term_hits(both, flt, max_df=10, max_share=0.3) == {}
    assert (
        store.rare_term_hits(["sweden"], SearchFilter(kinds=("fact",), scopes=()), max_df=5) == {}
    )
    assert store.rare_term_hits([], flt, max_df=5) == {}
    roles = SearchFilter(kinds=("fact",), scopes=("conv:c",), fact_roles=("memory",))
    assert store.rare_term_hits(["sweden"], roles, max_df=5) == {}  # t0 is a turn


@pytest.mark.parametrize("how", ["delete", "purge"])
def test_a_deleted_turn_is_not_found_through_its_neighbours(store: Store, how: str) -> None:
    store.put_fact(turn("t0", "the weather was fine", 0))
    store.put_fact(turn("t1", "my sister Ingrid moved to Tromsø", 1))
    store.put_fact(turn("t2", "that sounds lovely", 2, role="assistant"))
    store.put_fact(turn("t3", "we visit in March", 3))
    store.put_fact(turn("t4", "bring boots", 4, role="assistant"))
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("Ingrid", flt)} == {"t0", "t1", "t2", "t3"}

    store.delete_fact("t1") if how == "delete" else store.purge_fact("t1")

    assert store.keyword_search("Ingrid Tromsø", flt) == []
    # the neighbours were indexed again around the gap: t2's earlier turns are now t0 alone
    assert {h.ref for h in store.keyword_search("weather", flt)} == {"t0", "t2", "t3"}
    assert {h.ref for h in store.keyword_search("boots", flt)} == {"t3", "t4"}


def test_every_kind_of_hit_names_the_role_it_was_indexed_with(store: Store) -> None:
    store.put_fact(turn("t1", "I prefer tabs in Go code", 0))
    store.put_fact(turn("t2", "Noted: tabs in Go code", 1, role="assistant"))
    store.put_fact(fact("m", "The user prefers tabs in Go code", scope="conv:c", minutes=2))
    store.put_vectors("fact", [("t1", unit(1)), ("t2", unit(2)), ("m", unit(3))], model=MODEL)
    flt = SearchFilter(kinds=("fact",))
    expected = {"t1": "user", "t2": "assistant", "m": "memory"}
    assert {h.ref: h.role for h in store.keyword_search("tabs", flt)} == expected
    vectors = store.vector_search(unit(3), flt, model=MODEL, limit=3)
    assert {h.ref: h.role for h in vectors} == expected
    holders = store.rare_term_hits(["go"], flt, max_df=5, max_share=1.0, limit=10)
    assert {h.ref: h.role for found in holders.values() for h in found} == expected


def test_a_scope_searched_without_its_turns_still_gives_its_other_entries(store: Store) -> None:
    """`SearchFilter.turns_left_out`: a request that carries its conversation searches its
    scope without the remembered turns it sends; the scope's other entries, and another
    scope's turns, are found as always, by keyword, by rare word and by vector."""
    own = {"scope": "conv:c", "conversation_id": "c"}
    entries = [
        fact("own-user", "the ferry leaves at nine", role="user", **own),
        fact("own-answer", "the ferry is late", role="assistant", **own),
        fact("own-memory", "ferry tickets are in the drawer", **own),
        fact("other-user", "a ferry to Skye", scope="conv:d", conversation_id="d", role="user"),
        fact("shared", "the ferry company is Calmac", scope="ns:trips"),
    ]
    for number, entry in enumerate(entries):
        store.put_fact(entry)
        store.put_vectors("fact", [(entry.id, unit(1 + number % 2))], model=MODEL)
    every = SearchFilter(kinds=("fact",), scopes=("conv:c", "conv:d", "ns:trips"))
    left_out = SearchFilter(
        kinds=("fact",), scopes=("conv:c", "conv:d", "ns:trips"), turns_left_out="conv:c"
    )

    def keyword(flt: SearchFilter) -> set[str]:
        return {h.ref for h in store.keyword_search("ferry", flt, limit=10)}

    assert keyword(every) == {e.id for e in entries}
    assert keyword(left_out) == {"own-memory", "other-user", "shared"}
    rare = store.rare_term_hits(["nine", "late", "drawer", "skye"], left_out, max_df=5)
    assert {word: [h.ref for h in hits] for word, hits in rare.items()} == {
        "drawer": ["own-memory"],
        "skye": ["other-user"],
    }
    near = {h.ref for h in store.vector_search(unit(1), left_out, model=MODEL, limit=10)}
    assert near == {"own-memory", "other-user", "shared"}
    assert {h.ref for h in store.vector_search(unit(1), every, model=MODEL, limit=10)} == {
        e.id for e in entries
    }
    # a scope not searched, or one that holds no turn, changes nothing
    elsewhere = SearchFilter(kinds=("fact",), scopes=("ns:trips",), turns_left_out="conv:c")
    assert keyword(elsewhere) == {"shared"}
    assert keyword(SearchFilter(kinds=("fact",), turns_left_out="conv:none")) == keyword(every)
