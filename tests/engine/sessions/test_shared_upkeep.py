"""A session's upkeep (its index, its running summary) runs once when two processes finish
its turns at the same moment, as two workers of `serve --workers` may.

Each "process" is a runtime with its own store connection and its own event loop, in its
own thread: nothing is shared but the database and the home's lock files.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.history import fold_once
from memlane.engine.sessions.indexing import schedule_index
from memlane.store.sqlite import SQLiteStore
from memlane.text.llm import Completion
from memlane.text.tokens import BPETokenizer
from tests.engine.sessions.test_indexing import GOOD, add_exchanges, turn_for
from tests.support.text import ScriptedLLM


class SlowLLM(ScriptedLLM):
    """Answers like `ScriptedLLM`, a while later: long enough for the other to start."""

    async def complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Completion:
        answer = await super().complete(messages, **kwargs)
        await asyncio.sleep(0.5)
        return answer


@pytest.fixture
def two_processes(
    settings: Settings, tmp_path: Path, tokenizer: BPETokenizer
) -> Iterator[tuple[list[Runtime], SlowLLM]]:
    llm = SlowLLM(default=GOOD)
    runtimes = [
        Runtime(
            settings.model_copy(
                update={"summary_enabled": True, "summary_threshold": 4, "summary_keep_last": 2}
            ),
            SQLiteStore(tmp_path / "memlane.db"),
            _llm=llm,
            _tokenizer=tokenizer,
        )
        for _ in range(2)
    ]
    yield runtimes, llm
    for runtime in runtimes:
        runtime.close()


def at_once(runtimes: list[Runtime], work: Callable[[Runtime], Awaitable[None]]) -> None:
    """Run `work` in each runtime at the same moment, each on its own thread and loop."""
    start = threading.Barrier(len(runtimes))

    def run(runtime: Runtime) -> None:
        async def main() -> None:
            start.wait()
            await work(runtime)
            await runtime.background.drain()

        asyncio.run(main())

    threads = [threading.Thread(target=run, args=(rt,)) for rt in runtimes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def test_a_session_due_for_indexing_is_indexed_once(
    two_processes: tuple[list[Runtime], SlowLLM],
) -> None:
    runtimes, llm = two_processes
    store = runtimes[0].store
    assert isinstance(store, SQLiteStore)
    add_exchanges(store, "k", 5)

    async def finish_a_turn(runtime: Runtime) -> None:
        schedule_index(runtime, turn_for(runtime, "k"))

    at_once(runtimes, finish_a_turn)
    assert len(llm.calls) == 1


def test_a_session_past_its_summary_threshold_is_folded_once(
    two_processes: tuple[list[Runtime], SlowLLM],
) -> None:
    runtimes, llm = two_processes
    llm.default = "They talked."
    store = runtimes[0].store
    assert isinstance(store, SQLiteStore)
    add_exchanges(store, "k", 4)
    session = store.find_session("k")
    assert session is not None

    async def fold(runtime: Runtime) -> None:
        await fold_once(runtime, session.id, model="m")

    at_once(runtimes, fold)
    assert len(llm.calls) == 1
    folded = store.get_session(session.id)
    assert folded is not None
    assert (folded.summary, folded.summarized_count) == ("They talked.", 6)
