"""Every service comes from the Runtime, made one way: store kind, tokenizers, LLMs, book."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine.governance.setup import governor_for_turn
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.store.sqlite import SQLiteStore
from memlane.store.urls import store_kind
from memlane.text.llm import OpenAICompatibleLLM
from memlane.text.tokens import get_tokenizer
from memlane.types import Message, Session
from tests.support.text import ScriptedLLM


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        (None, "sqlite"),
        ("", "sqlite"),
        ("sqlite:////tmp/x.db", "sqlite"),
        ("postgresql://u@h/db", "postgres"),
        ("postgres://u@h/db", "postgres"),
        ("mysql://u@h/db", None),
        ("/tmp/x.db", None),
    ],
)
def test_the_store_kind_is_one_test_of_the_url(url: str | None, kind: str | None) -> None:
    assert store_kind(url) == kind


def turn(model: str) -> Turn:
    now = datetime.now(UTC)
    session = Session(id="s", key="s", namespace="s", created_at=now, updated_at=now)
    return Turn("s", "s", model, "chat", [Message("user", "hi")], session=session)


def test_memlanes_own_calls_follow_one_rule(tmp_path: Path, sqlite_store: SQLiteStore) -> None:
    injected = ScriptedLLM()
    settings = Settings(
        home=tmp_path, llm_model="main", summary_model="cheap", store_url="postgresql://h/db"
    )
    rt = Runtime(settings, sqlite_store, _llm=injected)
    assert rt.store_kind == "postgres"
    # no dedicated endpoint: summaries go to the runtime's client, with the summary model
    assert rt.summary_llm is injected
    assert (rt.summary_model("req"), rt.memory_model("req")) == ("cheap", "main")
    summariser = governor_for_turn(rt, turn("gpt-4o")).summariser
    assert summariser is not None
    assert (summariser.llm, summariser.model) == (injected, "cheap")

    bare = Runtime(Settings(home=tmp_path), sqlite_store)
    assert (bare.summary_model("req"), bare.memory_model("req")) == ("req", "req")
    assert bare.memory_model(None) is None


def test_a_summary_endpoint_gets_its_own_client_built_once(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    settings = Settings(home=tmp_path, summary_base_url="http://cheap.test/v1")
    rt = Runtime(settings, sqlite_store, _llm=ScriptedLLM())
    client = rt.summary_llm
    assert isinstance(client, OpenAICompatibleLLM)
    assert client.base_url == "http://cheap.test/v1"
    assert rt.summary_llm is client
    summariser = governor_for_turn(rt, turn("m")).summariser
    assert summariser is not None
    assert summariser.llm is client


def test_governance_counts_with_the_runtimes_tokenizer_for_the_model(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = Runtime(Settings(home=tmp_path, llm_model="gpt-4"), sqlite_store)
    assert rt.tokenizer is get_tokenizer("cl100k_base")
    assert governor_for_turn(rt, turn("gpt-4o")).tokenizer is get_tokenizer("o200k_base")
    forced = Runtime(Settings(home=tmp_path, tokenizer="cl100k_base"), sqlite_store)
    assert governor_for_turn(forced, turn("gpt-4o")).tokenizer is get_tokenizer("cl100k_base")


def test_the_memory_book_is_opened_once_on_first_use(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = Runtime(Settings(home=tmp_path, embedding_backend="hashing"), sqlite_store)
    assert rt.opened_memory_book is None
    book = rt.memory_book
    assert rt.memory_book is book
    assert rt.opened_memory_book is book
    assert book.files is not None  # SQLite: the Markdown files are the truth


async def test_settle_waits_for_the_work_a_committed_write_starts(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    """A turn's memory work is queued once its answer's write commits, which a client
    that resends its history is not made to wait for: a stop that only drained the
    background left that work behind (the answer was still in the writer)."""
    rt = Runtime(Settings(home=tmp_path), sqlite_store)
    done: list[str] = []

    async def remember() -> None:
        done.append("remembered")

    def slow_answer() -> str:
        time.sleep(0.2)
        return "stored"

    stored = rt.writes.queue(("t", "s"), slow_answer, read_next=False)
    stored.add_done_callback(lambda _: rt.background.spawn(remember(), name="memory"))
    await rt.settle()
    assert (stored.result(), done) == ("stored", ["remembered"])
    assert rt.writes.pending == 0
    rt.close()


async def test_settle_gives_up_on_a_stuck_write_after_the_request_wait(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    """A stop must end: a write stuck in the store (another process holding it) is waited
    for once, for `request_wait_seconds`, then left to the store's close."""
    rt = Runtime(Settings(home=tmp_path, request_wait_seconds=0.2), sqlite_store)
    release = threading.Event()
    stuck = rt.writes.queue(("t", "s"), lambda: release.wait(30))
    async with asyncio.timeout(5):
        await rt.settle()
    assert not stuck.done()
    release.set()
    assert await stuck is True
    rt.close()
