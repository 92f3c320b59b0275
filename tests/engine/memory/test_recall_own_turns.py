"""A request that still carries its conversation is not searched against its own turns.

Agents resend the whole conversation on every request, so recall's search found the
conversation's remembered turns in the request and dropped each of them afterwards:
most of what the search read. While the request's client messages begin with every one
the session's digest stands for (`recall.carries_its_turns`), the search leaves them
out (`SearchFilter.turns_left_out`); the conversation's other entries are found as
always, and once the client compacts its history, or governance drops part of it, the
turns it no longer carries are recalled again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import openai
import pytest

from memlane.engine.memory import recall as recall_module
from memlane.engine.memory import reuse, scopes
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.recall import Ahead, carries_its_turns, recall_for_turn, search_ahead
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.retrieval.search import Query
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.children import open_session
from memlane.engine.turn import Turn
from memlane.store import NewMessage
from memlane.types import Fact, FactRole, Message, Session
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    closing,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EARLIER = [
    Message("system", "You are a careful coding agent."),
    Message("user", "Let us look at the ledger service."),
    Message("assistant", "The ledger service reads conf/ledger.toml at start."),
    Message("user", "Good, now the billing job."),
    Message("assistant", "Billing runs nightly from cron."),
]
QUESTION = "Which file does the ledger service read at start?"
KEPT = "The ledger service config must never be edited by hand"
"""A memory a person put in the conversation's scope: found whatever the request carries."""


@pytest.fixture(autouse=True)
def no_kept_searches() -> None:
    reuse.SEARCHES.forget()


@pytest.fixture
def searched(monkeypatch: pytest.MonkeyPatch) -> list[Query]:
    """The searches recall ran, in order."""
    asked: list[Query] = []
    real = recall_module.ranked

    def counted(rt: Runtime, query: Query) -> Any:
        asked.append(query)
        return real(rt, query)

    monkeypatch.setattr(recall_module, "ranked", counted)
    return asked


def entry(number: int, scope: str, role: FactRole, text: str) -> Fact:
    return Fact(
        id=f"entry-{number}", scope=scope, conversation_id="c", role=role, text=text,
        created_at=NOW, updated_at=NOW,
    )  # fmt: skip


def remembered(rt: Runtime) -> Session:
    """A conversation whose messages are stored (its digest set) and remembered as turns,
    with a memory of its own beside them; the session as a turn's shape reads it."""
    session = open_session(rt.store, "key-1", namespace="")
    rt.store.sync_messages(session.id, [NewMessage(m) for m in EARLIER])
    scope = scopes.conversation_scope(session.id, "")
    for number, message in enumerate(EARLIER[1:]):
        rt.store.put_fact(entry(number, scope, message.role, message.text))  # type: ignore[arg-type]
    rt.store.put_fact(entry(99, scope, "memory", KEPT))
    found = rt.store.find_session_state("key-1")
    assert found is not None
    return found[0]


def request(session: Session, *history: Message) -> Turn:
    turn = Turn(
        key=session.key, namespace="", model="m", wire="chat",
        messages=[*history, Message("user", QUESTION)],
    )  # fmt: skip
    turn.session = session
    return turn


def ahead(rt: Runtime, turn: Turn) -> Ahead:
    search = search_ahead(rt, turn)
    assert search is not None
    return search(list(turn.messages))


async def test_a_request_carrying_its_conversation_searches_without_its_turns(
    rt: Runtime, searched: list[Query]
) -> None:
    session = remembered(rt)
    assert session.client_digest is not None
    turn = request(session, *EARLIER)

    assert carries_its_turns(turn)
    found = ahead(rt, turn)
    own = scopes.conversation_scope(session.id, "")
    assert [q.flt.turns_left_out for q in searched] == [own]
    assert found.turns_left_out
    assert [r.text for r in found.found] == [KEPT]  # the conversation's memory still comes


async def test_a_client_that_compacted_its_history_gets_its_dropped_turns_again(
    rt: Runtime, searched: list[Query]
) -> None:
    session = remembered(rt)
    compacted = [EARLIER[0], Message("user", "Summary so far: we looked at two services.")]
    turn = request(session, *compacted)

    assert not carries_its_turns(turn)
    found = ahead(rt, turn)
    assert [q.flt.turns_left_out for q in searched] == [None]
    assert "The ledger service reads conf/ledger.toml at start." in [r.text for r in found.found]


async def test_a_session_without_a_digest_or_an_edited_history_is_searched_whole(
    rt: Runtime,
) -> None:
    session = remembered(rt)
    edited = [*EARLIER[:3], Message("user", "Good, now the payments job."), EARLIER[4]]
    assert not carries_its_turns(request(session, *edited))
    bare = request(session, *EARLIER)
    bare.session = rt.store.find_session("key-1")  # a read that does not carry the digest
    assert bare.session is not None
    assert bare.session.client_digest is None
    assert not carries_its_turns(bare)


async def test_turns_governance_dropped_are_searched_for_again(
    rt: Runtime, searched: list[Query]
) -> None:
    """The search ran ahead without the turns the request carried; governance then dropped
    one of them, so recall searches again with every turn, and finds it."""
    session = remembered(rt)
    turn = request(session, *EARLIER)
    first = ahead(rt, turn)
    governed = [EARLIER[0], *EARLIER[3:], Message("user", QUESTION)]

    out = await recall_for_turn(rt, turn, governed, _settled(first))
    assert [q.flt.turns_left_out for q in searched] == [first.scopes[0], None]
    injected = "\n".join(m.text for m in out if m not in governed)
    assert "The ledger service reads conf/ledger.toml at start." in injected


def nothing_learned(request: RecordedRequest) -> Reply | None:
    """memlane's own prompts find nothing to learn; the client's requests take the queue."""
    system = request.messages[0].get("content") if request.messages else None
    return Reply(text="[]") if system in (FACT_PROMPT, RECONCILE_PROMPT) else None


def _settled(value: Ahead) -> Any:
    async def result() -> Ahead:
        return value

    return result()


def test_through_the_proxy_a_resent_history_skips_its_turns_and_a_compacted_one_finds_them(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, searched: list[Query]
) -> None:
    """The wiring, end to end: the session the proxy reads carries its digest, a client
    resending its conversation is searched without its own turns, and once it compacts,
    its own earlier turn is recalled into the request forwarded."""
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(nothing_learned)
    openai_client = closing(
        openai.OpenAI(
            base_url=proxy.url, api_key="sk-x", max_retries=0,
            default_headers={"X-Memlane-Session": "ledger-work"},
        )
    )  # fmt: skip
    said = "The ledger service reads conf/ledger.toml at start."
    history: list[dict[str, str]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": said},
    ]
    upstream.script(Reply(text="Noted."))
    openai_client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    proxy.drain()
    history += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": QUESTION}]
    upstream.script(Reply(text="conf/ledger.toml"))
    openai_client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    proxy.drain()
    session = proxy.store.find_session("ledger-work")
    assert session is not None
    own = scopes.conversation_scope(session.id, "")
    assert searched[-1].flt.turns_left_out == own

    compacted = [history[0], {"role": "user", "content": "Summary: we set up the ledger."}]
    upstream.script(Reply(text="conf/ledger.toml"))
    openai_client.chat.completions.create(  # type: ignore[call-overload]
        model="m", messages=[*compacted, {"role": "user", "content": QUESTION}]
    )
    assert searched[-1].flt.turns_left_out is None
    forwarded = upstream.model_requests[-1].messages
    assert any(said in str(m["content"]) for m in forwarded[len(compacted) : -1])
