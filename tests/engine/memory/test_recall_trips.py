"""Recall in front of a request reads the store in one trip to a worker thread, or none.

Each trip costs a thread wake-up and the GIL on the way back; with no reranker
configured the search, the entries it found (and the turns their facts came from) and
the conversation's summary are all read in the same one, the one that shapes the request.
On SQLite, unless recall embeds its query, a turn is shaped and searched on the event
loop itself (`pipeline.reads_on_the_loop`): the trip cost more than the reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine import pipeline, threads
from memlane.engine.memory import recall as recall_module
from memlane.engine.memory import scopes
from memlane.engine.memory.recall import recall, recall_for_turn
from memlane.engine.memory.summary import SUMMARY_KIND, summary_id
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.children import open_session
from memlane.engine.turn import Forward, Turn
from memlane.types import Fact, Message, Session

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def fact(id: str, text: str, scope: str, role: str = "memory", **fields: Any) -> Fact:
    return Fact(
        id=id, scope=scope, conversation_id="c", role=role,  # type: ignore[arg-type]
        text=text, created_at=NOW, updated_at=NOW, **fields,
    )  # fmt: skip


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to a worker thread, in order."""
    sent: list[str] = []
    real = threads.to_thread

    async def counted(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        sent.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(threads, "to_thread", counted)
    return sent


def remembered(rt: Runtime) -> Session:
    """A conversation that said which database it chose, the fact taken from that turn,
    and the conversation's summary."""
    session = open_session(rt.store, "key-1", namespace="")
    conv = scopes.fact_scope(rt.settings, session.id, "")
    said = "We chose PostgreSQL for the ledger service"
    rt.store.put_fact(fact("turn-1", said, conv, "user"))
    rt.store.put_fact(
        fact("fact-1", "The ledger service runs on PostgreSQL", conv, source_turns=("turn-1",))
    )
    summary = fact(summary_id(session.id), "Building the ledger service.", conv)
    rt.store.put_fact(replace(summary, role="summary", summary_kind=SUMMARY_KIND))
    return session


async def test_a_request_recalls_entries_sources_and_summary_in_one_trip(
    rt: Runtime, trips: list[str]
) -> None:
    session = remembered(rt)
    turn = Turn(
        key="key-1",
        namespace="",
        model="m",
        wire="chat",
        messages=[Message("user", "Which database does the ledger service use?")],
    )
    turn.session = session
    out = await recall_for_turn(rt, turn, list(turn.messages))

    block = out[0].text
    assert "The ledger service runs on PostgreSQL" in block
    assert "We chose PostgreSQL for the ledger service" in block  # the fact's source turn
    assert "Building the ledger service." in block  # the conversation's summary
    assert len(trips) == 1, trips


async def test_an_operator_search_is_one_trip_too(rt: Runtime, trips: list[str]) -> None:
    remembered(rt)
    found = await recall(rt, "ledger service database", scopes=None)
    assert {r.text for r in found} >= {
        "The ledger service runs on PostgreSQL",
        "We chose PostgreSQL for the ledger service",
    }
    assert len(trips) == 1, trips


async def test_shaping_and_recall_share_one_worker_thread_trip(
    rt: Runtime, trips: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where reads are not done on the loop (PostgreSQL, an embedded query), the session
    is read, and the request shaped and searched, in one trip: each trip is a thread's
    wake-up and the GIL on the way back, in front of the request. Recall adds none of
    its own."""
    remembered(rt)
    monkeypatch.setattr(pipeline, "reads_on_the_loop", lambda rt: False)
    shape, rank = pipeline.shape, recall_module.ranked
    ran: dict[str, str] = {}

    def shaped(rt: Runtime, turn: Turn) -> Any:
        ran["shape"] = threading.current_thread().name
        return shape(rt, turn)

    def ranked(rt: Runtime, asked: Any) -> Any:
        ran["search"] = threading.current_thread().name
        return rank(rt, asked)

    monkeypatch.setattr(pipeline, "shape", shaped)
    monkeypatch.setattr(recall_module, "ranked", ranked)
    question = Message("user", "Which database does the ledger service use?")
    turn = Turn(key="key-1", namespace="", model="m", wire="chat", messages=[question])
    prepared = await pipeline.prepare(rt, turn)
    await pipeline.stored(rt, turn)

    assert isinstance(prepared, Forward)
    block = next(m.text for m in prepared.messages if m.origin == "recall")
    assert "The ledger service runs on PostgreSQL" in block
    assert "Building the ledger service." in block  # the summary of the stored session
    assert trips == ["_found_and_shaped"]
    assert ran["shape"] == ran["search"] != threading.current_thread().name


async def test_a_read_on_the_loop_is_called_not_made_a_task(rt: Runtime) -> None:
    """A read on the loop is done when it returns: wrapping it in a task to bound its wait
    (`waits.within`) cost the request two turns of the loop and a timer, and bounded
    nothing."""
    remembered(rt)
    assert pipeline.reads_on_the_loop(rt)
    loop = asyncio.get_running_loop()
    made: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
        made.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop)

    question = Message("user", "Which database does the ledger service use?")
    turn = Turn(key="key-1", namespace="", model="m", wire="chat", messages=[question])
    loop.set_task_factory(factory)
    try:
        prepared = await pipeline.prepare(rt, turn)
    finally:
        loop.set_task_factory(None)
    await pipeline.stored(rt, turn)

    assert isinstance(prepared, Forward)
    assert any("PostgreSQL" in m.text for m in prepared.messages if m.origin == "recall")
    assert "read" not in made, made


def test_reads_stay_off_the_loop_on_postgresql(settings: Settings, sqlite_store: Any) -> None:
    """PostgreSQL's reads are network round trips: a worker thread waits for them."""
    on_pg = settings.model_copy(update={"store_url": "postgresql://memlane@127.0.0.1/memlane"})
    assert not pipeline.reads_on_the_loop(Runtime(on_pg, sqlite_store))
    assert pipeline.reads_on_the_loop(Runtime(settings, sqlite_store))


@pytest.mark.parametrize(
    ("session", "dense", "others", "where"),
    [
        pytest.param("existing", "off", 0, "loop", id="next-turn"),
        pytest.param("existing", "off", 2, "loop", id="other-requests-in-hand"),
        pytest.param("new", "off", 0, "loop", id="new-session-made-ahead"),
        pytest.param("child", "off", 0, "loop", id="new-subagent-session-opened-by-the-writer"),
        pytest.param("existing", "on", 0, "worker", id="an-embedded-query"),
        pytest.param("new", "on", 0, "worker", id="an-embedded-query-new-session"),
    ],
)
async def test_where_a_request_is_shaped_and_searched(
    rt: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    session: str,
    dense: str,
    others: int,
    where: str,
) -> None:
    """On SQLite a turn reads on the loop: no thread is woken before it is forwarded,
    whatever else is in memlane's hands, for a next turn, a new session's first (its row
    is written behind it, `engine.sessions.ahead`) and a subagent's new session (opened
    by the store's writer). A recall that embeds its query goes to a worker thread."""
    rt.settings = rt.settings.model_copy(update={"memory_dense": dense})
    assert pipeline.reads_on_the_loop(rt) is (where == "loop")
    remembered(rt)
    shape, rank = pipeline.shape, recall_module.ranked
    ran: dict[str, str] = {}

    def shaped(rt: Runtime, turn: Turn) -> Any:
        ran["shape"] = threading.current_thread().name
        return shape(rt, turn)

    def ranked(rt: Runtime, asked: Any) -> Any:
        ran["search"] = threading.current_thread().name
        return rank(rt, asked)

    monkeypatch.setattr(pipeline, "shape", shaped)
    monkeypatch.setattr(recall_module, "ranked", ranked)
    question = Message("user", "Which database does the ledger service use?")
    key = "key-1" if session == "existing" else "key-2"
    parent = "key-1" if session == "child" else None
    turn = Turn(
        key=key, namespace="", model="m", wire="chat", messages=[question], parent_key=parent
    )
    with contextlib.ExitStack() as in_hand:
        for _ in range(others + 1):  # this request, and the others
            in_hand.enter_context(threads.TRAFFIC.serving())
        prepared = await pipeline.prepare(rt, turn)
    await pipeline.stored(rt, turn)

    assert isinstance(prepared, Forward)
    assert any("PostgreSQL" in m.text for m in prepared.messages if m.origin == "recall")
    loop = threading.current_thread().name
    assert (ran["shape"] == loop) is (where == "loop"), ran
    assert (ran["search"] == loop) is (where == "loop"), ran
    assert turn.session is not None
    assert rt.store.find_session(key) is not None
