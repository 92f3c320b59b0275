"""One request's recall search, over an empty, a tiny and a few-thousand-entry memory.

Run: .venv/bin/python benchmarks/recall_search.py [--entries 4000] [--sessions 200]
        [--searches 400] [--writes 2] [--changes 1] [--facts-every 10] [--chat-words 0]
        [--asked-share 0]

What a proxy request runs in front of its answer with the default settings (no
reranker, no embeddings): `retrieval.search.ranked` over the conversation's scope,
its namespace and `global`, kinds fact and session, for a query of one user turn.
The memory is an embedded SQLite store holding `--entries` remembered turns
(user / assistant, Zipf-distributed words plus identifiers) spread over
`--sessions` conversations (each its own scope), plus one fact every
`--facts-every` entries in the namespace. Each search asks as a different
conversation (round robin), as 200 clients do, for the question plus
`--chat-words` words of the memory (Zipf-drawn: chat words are common, and
most documents of every conversation hold some); `--asked-share` of the user
entries ask the question again (an agent asks alike turn after turn, as
`load.py`'s clients do: then the question's words are in that share of every
conversation's entries, and of the whole memory's), and
`--writes` new turns are committed before each one and `--changes` of them
rewritten (a remembered turn's document takes in its next turn's words); the
keyword index catches up in the writing thread, as after a proxy's write batch,
and that time is printed apart. Printed: the median and p95 CPU milliseconds (this
thread's) of one search, and the median of one catch-up, for each memory size.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.store_bench import Corpus  # noqa: E402  (after the path is set)

from memlane.config import Settings  # noqa: E402
from memlane.engine.memory import scopes  # noqa: E402
from memlane.engine.memory.recall import _asked  # noqa: E402
from memlane.engine.retrieval.search import ranked  # noqa: E402
from memlane.engine.runtime import Runtime  # noqa: E402
from memlane.store.sqlite import SQLiteStore  # noqa: E402
from memlane.types import Fact  # noqa: E402

STAMP = datetime(2026, 3, 1, tzinfo=UTC)
QUESTION = "Which file should I look at next in src/app/main.py, and why? Keep it short."


def entry(number: int, scope: str, role: str, text: str) -> Fact:
    return Fact(f"e{number}", scope, "c", role, text, STAMP, STAMP)  # type: ignore[arg-type]


class Memory:
    """A store with remembered turns in many conversations, and a way to add more."""

    def __init__(self, home: Path, sessions: int, args: argparse.Namespace) -> None:
        self.settings = Settings(home=home, embedding_backend="hashing")
        self.store = SQLiteStore(home / "memlane.db")
        self.rt = Runtime(self.settings, self.store)
        self.corpus = Corpus.make()
        self.sessions = [f"session-{i}" for i in range(sessions)]
        self.facts_every: int = args.facts_every
        self.chat_words: int = args.chat_words
        self.asked_share: float = args.asked_share
        self.cum_weights = list(itertools.accumulate(self.corpus.weights))
        self.count = 0
        self.catch_ups: list[float] = []
        catch_up = self.store._catch_up

        def timed_catch_up() -> None:
            self.catch_ups.append(timed(catch_up))

        self.store._catch_up = timed_catch_up  # type: ignore[method-assign]

    def add(self, entries: int) -> None:
        with self.store.batch():
            for _ in range(entries):
                self.count += 1
                session = self.sessions[self.count % len(self.sessions)]
                if self.count % self.facts_every == 0:
                    scope = scopes.namespace_scope("", "")
                    role = "memory"
                else:
                    scope = scopes.conversation_scope(session, "")
                    role = "user" if self.count % 2 else "assistant"
                self.store.put_fact(entry(self.count, scope, role, self.text(role)))

    def text(self, role: str) -> str:
        if self.asked_share and role == "user" and self.corpus.rng.random() < self.asked_share:
            return f"{QUESTION} {self.corpus.sentence()}"
        return self.corpus.sentence()

    def change(self, entries: int) -> None:
        """Rewrite the `entries` latest entries (a turn's document takes its next turn's
        words when that turn is remembered): the index kills and re-reads them."""
        with self.store.batch():
            for number in range(self.count - entries + 1, self.count + 1):
                session = self.sessions[number % len(self.sessions)]
                scope = scopes.conversation_scope(session, "")
                role = "user" if number % 2 else "assistant"
                text = f"{self.text(role)} {self.corpus.sentence()}"
                self.store.put_fact(entry(number, scope, role, text))

    def question(self, number: int) -> str:
        """The question of search `number` (the same in every run)."""
        if not self.chat_words:
            return QUESTION
        words = random.Random(number).choices(
            self.corpus.words, cum_weights=self.cum_weights, k=self.chat_words
        )
        return " ".join([QUESTION, *words])

    def search(self, number: int, question: str = QUESTION) -> int:
        session = self.sessions[number % len(self.sessions)]
        wanted = scopes.recall_scopes(self.settings, session, "", "")
        asked = _asked(self.rt, question, wanted, set(), None, session)
        assert asked.query is not None
        return len(ranked(self.rt, asked.query))


def timed(work: Callable[[], object]) -> float:
    """The CPU milliseconds `work` took in this thread (what a proxy's cores pay; a busy
    machine's waits do not count)."""
    started = time.thread_time()
    work()
    return (time.thread_time() - started) * 1000


def measure(memory: Memory, searches: int, writes: int, changes: int) -> list[float]:
    memory.search(0)  # the first search loads the index
    memory.catch_ups.clear()
    search_ms: list[float] = []
    for number in range(searches):
        if writes:
            memory.add(writes)
            memory.change(changes)
        question = memory.question(number)
        search_ms.append(timed(lambda n=number, q=question: memory.search(n, q)))
    return search_ms


def p95(samples: list[float]) -> float:
    return sorted(samples)[int(len(samples) * 0.95)] if samples else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=4000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--writes", type=int, default=2)
    parser.add_argument("--changes", type=int, default=1)
    parser.add_argument("--facts-every", type=int, default=10)
    parser.add_argument("--chat-words", type=int, default=0)
    parser.add_argument("--asked-share", type=float, default=0.0)
    args = parser.parse_args()
    print("| memory | search p50 ms | search p95 ms | catch-up p50 ms |")
    print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as folder:
        memory = Memory(Path(folder), args.sessions, args)
        for size, label in ((0, "empty"), (20, "tiny (20 entries)"), (args.entries, "")):
            memory.add(size - memory.count)
            name = label or f"{memory.count} entries, {args.sessions} conversations"
            writes_now = args.writes if label == "" else 0
            searches = measure(memory, args.searches, writes_now, args.changes)
            catch_ups = memory.catch_ups if writes_now else []
            median = statistics.median(catch_ups) if catch_ups else 0.0
            print(
                f"| {name} | {statistics.median(searches):.3f} | {p95(searches):.3f} "
                f"| {median:.3f} |"
            )
        memory.store.close()


if __name__ == "__main__":
    main()
