"""A tool loop's steps reuse their conversation's recall search; what changed is not.

Each step of an agent's tool loop carries the same last user message, so recall's
search is run once and its hits taken again (`engine.memory.reuse`), with every entry
it brings read again first: a memory forgotten or reworded since, or a session summary
whose session went or was summarised anew, makes the step search anew.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from memlane.engine.memory import recall as recall_module
from memlane.engine.memory import reuse, scopes
from memlane.engine.memory.recall import Ahead, recall_for_turn, search_ahead
from memlane.engine.memory.reuse import SearchReuse
from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.search import Query
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.children import open_session
from memlane.engine.turn import Turn
from memlane.types import Fact, Message, Session
from memlane.types.messages import ToolCall

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
QUESTION = "Which database does the ledger service use?"
ANSWER = "The ledger service runs on PostgreSQL"


def fact(id: str, text: str, scope: str) -> Fact:
    return Fact(
        id=id, scope=scope, conversation_id="c", role="memory", text=text,
        created_at=NOW, updated_at=NOW,
    )  # fmt: skip


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The questions recall searched the store for, in order."""
    asked: list[str] = []
    real = recall_module.ranked

    def counted(rt: Runtime, query: Query) -> Any:
        asked.append(query.text)
        return real(rt, query)

    monkeypatch.setattr(recall_module, "ranked", counted)
    return asked


@pytest.fixture(autouse=True)
def no_kept_searches() -> None:
    reuse.SEARCHES.forget()


def conversation(rt: Runtime, key: str = "key-1") -> Session:
    session = open_session(rt.store, key, namespace="")
    rt.store.put_fact(fact("fact-1", ANSWER, scopes.namespace_scope("", "")))
    return session


EARLIER = [
    Message("system", "You are a careful coding agent."),
    Message("user", "Let us look at the ledger service."),
    Message("assistant", "Sure: it lives in services/ledger."),
    Message("user", "Start with its configuration."),
    Message("assistant", "It reads conf/ledger.toml at start."),
]


def step(session: Session, *loop: Message, question: str = QUESTION) -> Turn:
    """A request of the conversation: what was said before, its user's question, then the
    tool loop so far."""
    messages = [*EARLIER, Message("user", question), *loop]
    turn = Turn(key=session.key, namespace="", model="m", wire="chat", messages=messages)
    turn.session = session
    return turn


def tool_round(n: int) -> list[Message]:
    call = ToolCall(f"call-{n}", "read_file", f'{{"path": "src/file{n}.py"}}')
    return [
        Message("assistant", kind="tool_call", tool_calls=(call,)),
        Message("tool", f"contents of file {n}", kind="tool_result", call_id=call.id),
    ]


def recalled(rt: Runtime, turn: Turn) -> Ahead:
    search = search_ahead(rt, turn)
    assert search is not None
    return search(list(turn.messages))


def texts(ahead: Ahead) -> list[str]:
    return [r.text for r in ahead.found]


async def test_a_tool_loop_searches_once(rt: Runtime, searches: list[str]) -> None:
    session = conversation(rt)
    first = recalled(rt, step(session))
    later = [recalled(rt, step(session, *tool_round(1), *tool_round(n))) for n in (2, 3)]

    assert texts(first) == [ANSWER]
    assert [texts(a) for a in later] == [[ANSWER], [ANSWER]]
    assert searches == [QUESTION]
    assert [a.reused for a in (first, *later)] == [False, True, True]


async def test_a_new_question_or_another_conversation_searches_again(
    rt: Runtime, searches: list[str]
) -> None:
    session = conversation(rt)
    other = open_session(rt.store, "key-2", namespace="")
    recalled(rt, step(session))
    recalled(rt, step(session, question="And which database does billing use?"))
    recalled(rt, step(other))

    assert searches == [QUESTION, "And which database does billing use?", QUESTION]


async def test_a_memory_forgotten_during_the_loop_is_not_recalled(
    rt: Runtime, searches: list[str]
) -> None:
    """Forgotten from another process (the CLI): nothing told this one, the store says."""
    session = conversation(rt)
    assert texts(recalled(rt, step(session))) == [ANSWER]
    rt.store.delete_fact("fact-1")

    after = recalled(rt, step(session, *tool_round(1)))
    assert texts(after) == []
    assert searches == [QUESTION, QUESTION]


async def test_a_memory_reworded_during_the_loop_is_recalled_as_it_is_now(
    rt: Runtime, searches: list[str]
) -> None:
    session = conversation(rt)
    recalled(rt, step(session))
    stored = rt.store.get_fact("fact-1")
    assert stored is not None
    rt.store.put_fact(replace(stored, text="The ledger service database is PostgreSQL 16"))

    after = recalled(rt, step(session, *tool_round(1)))
    assert texts(after) == ["The ledger service database is PostgreSQL 16"]
    assert searches == [QUESTION, QUESTION]


async def test_a_summary_whose_session_went_is_not_recalled(
    rt: Runtime, searches: list[str]
) -> None:
    session = open_session(rt.store, "key-1", namespace="")
    design = open_session(rt.store, "design", namespace="")
    summary = "Chose the ledger service database: PostgreSQL, for its row locks."
    rt.store.update_session(design.id, metadata={"name": "ledger-db", "summary": summary})
    assert texts(recalled(rt, step(session))) == [summary]

    rt.store.update_session(design.id, metadata={"name": "ledger-db", "summary": "Renamed."})
    assert summary not in texts(recalled(rt, step(session, *tool_round(1))))
    rt.store.delete_session(design.id)
    assert texts(recalled(rt, step(session, *tool_round(1), *tool_round(2)))) == []
    assert searches == [QUESTION] * 3


async def test_reuse_can_be_turned_off(rt: Runtime, searches: list[str]) -> None:
    rt.settings = rt.settings.model_copy(update={"memory_recall_reuse_seconds": 0.0})
    session = conversation(rt)
    for n in range(3):
        assert texts(recalled(rt, step(session, *tool_round(n)))) == [ANSWER]
    assert searches == [QUESTION] * 3
    assert len(reuse.SEARCHES) == 0


async def test_governance_changing_the_texts_checks_reused_hits_too(
    rt: Runtime, searches: list[str]
) -> None:
    """When governance rewrites the request, recall chooses again from the search that ran
    ahead; a reused one is read again there as well."""
    session = conversation(rt)
    recalled(rt, step(session))
    turn = step(session, *tool_round(1))
    ahead = recalled(rt, turn)
    assert ahead.reused
    rt.store.delete_fact("fact-1")

    governed = [*turn.messages, Message("user", "[earlier tool output elided]")]
    out = await recall_for_turn(rt, turn, governed, _settled(ahead))
    assert out == governed  # nothing recalled: the only memory is gone
    assert searches == [QUESTION, QUESTION]


def _settled(ahead: Ahead) -> Any:
    async def value() -> Ahead:
        return ahead

    return value()


def query(rt: Runtime, question: str = QUESTION, **terms: Any) -> Query:
    asked = Query.of(rt, question, ["ns:"], **terms)
    assert asked is not None
    return asked


def test_a_search_is_compared_by_what_it_asks_not_when(rt: Runtime) -> None:
    memo = SearchReuse()
    memo.put("s1", query(rt, top_k=8), [], 60)
    time.sleep(0.001)
    assert memo.get("s1", query(rt, top_k=8)) == []  # a new moment (facts true now)
    assert memo.get("s1", query(rt, top_k=5)) == []  # fewer asked for: the kept ones do
    assert memo.get("s1", query(rt, top_k=9)) is None  # more asked for than were kept
    assert memo.get("s1", query(rt, "another question", top_k=8)) is None
    assert memo.get("s1", query(rt, top_k=8, superseded=True)) is None
    assert memo.get("s2", query(rt, top_k=8)) is None


def test_kept_searches_expire_and_are_bounded(rt: Runtime) -> None:
    memo = SearchReuse(size=2)
    memo.put("s1", query(rt), [], 60)
    memo.put("s2", query(rt), [], 0)
    assert memo.get("s2", query(rt)) is None  # expired at once
    memo.put("s3", query(rt), [], 60)
    memo.put("s4", query(rt), [], 60)
    assert [memo.get(s, query(rt)) for s in ("s1", "s3", "s4")] == [None, [], []]
    memo.forget()
    assert len(memo) == 0


def test_kept_searches_are_bounded_by_their_texts_too(rt: Runtime) -> None:
    """A remembered turn can be long: what the kept hits hold is bounded in characters."""
    memo = SearchReuse(chars=1_000)

    def hits(n: int) -> list[Candidate]:
        return [Candidate("fact", f"t{n}", "conv:x", "s", "x" * 400, NOW)]

    for n in range(3):
        memo.put(f"s{n}", query(rt), hits(n), 60)
    assert [memo.get(f"s{n}", query(rt)) is not None for n in range(3)] == [False, True, True]
    memo.put("s2", query(rt), hits(9), 60)  # replaced, not counted twice
    memo.put("s3", query(rt), hits(3), 60)
    assert [memo.get(f"s{n}", query(rt)) is not None for n in range(4)] == [
        False, False, True, True,
    ]  # fmt: skip


async def test_forgetting_a_memory_drops_every_kept_search(
    rt: Runtime, searches: list[str]
) -> None:
    """A kept hit would not be injected once its entry is gone (above), but deleted means
    gone from the proxy's memory too: a person's forget drops what searches kept."""
    from memlane.engine.memory.manage import add_memory, forget_memory

    session = open_session(rt.store, "key-1", namespace="")
    memory = await add_memory(rt, ANSWER)
    assert [r.text for r in recalled(rt, step(session)).found] == [ANSWER]
    assert len(reuse.SEARCHES) == 1

    await forget_memory(rt, memory.id)
    assert len(reuse.SEARCHES) == 0
    assert texts(recalled(rt, step(session, *tool_round(1)))) == []
