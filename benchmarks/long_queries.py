"""Long messages as recall queries: what scoring only their rarest words keeps, and saves.

Run: .venv/bin/python benchmarks/long_queries.py [FILE.jsonl] [--words 100 300 1000]
     (default: shared/data/locomo_dev.jsonl beside the checkout, or beside its parent)

A user turn is the recall query, and agents' users paste logs, diffs and earlier
chat in front of their question. Each scored LoCoMo question is asked as such a
message: `--words` words pasted first (each length given), then the question,
through the default read path (`retrieval.search`, as `memlane eval retrieval` asks
it, one SQLite store holding every conversation). The paste is consecutive turns of
another conversation: text about something else than the memory asked about, as a
log or a document is.
(A paste of the memory's own turns is not measured: the proxy leaves out of recall
what the request already holds, `memory.recall`, which this path does not.) Each cap
on the words scored (`store.bm25.MAX_QUERY_TERMS`) is measured, none included; the
cap is then chosen leave-one-conversation-out (for each conversation, the cap best on
the other four by Recall@10 over every length, ties to the larger), and the held-out
conversations are pooled per length. The questions asked as they are are checked to
score alike with the default cap and without. Printed: Markdown tables of
Recall@5/@10 and NDCG@10, Recall@10 per category. What the cap saves in time is
`recall_search.py --chat-words N`'s to measure (CPU time of one search).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.retrieval_experiments import DEFAULT_FILE  # noqa: E402

from memlane.config import Settings  # noqa: E402
from memlane.engine.retrieval import evaluation  # noqa: E402
from memlane.engine.retrieval.evaluation import (  # noqa: E402
    CATEGORIES,
    Conversation,
    EvalResult,
    load_conversations,
)
from memlane.engine.runtime import Runtime  # noqa: E402
from memlane.store import bm25  # noqa: E402
from memlane.store.analysis import query_terms  # noqa: E402
from memlane.store.sqlite import SQLiteStore  # noqa: E402

CAPS: tuple[int | None, ...] = (8, 16, 24, 32, 48, 64, None)
"""The caps measured; None scores every word (no cap)."""
NO_CAP = 1_000_000


def paste(source: Conversation, words: int, rng: random.Random) -> str:
    """`words` words of consecutive turns of `source`, from a random start."""
    turns = list(source.turns)
    start = rng.randrange(len(turns))
    taken: list[str] = []
    for turn in turns[start:] + turns[:start]:
        taken.extend(f"{turn.speaker}: {turn.text}".split())
        if len(taken) >= words:
            break
    return " ".join(taken[:words])


def long_messages(conversations: Sequence[Conversation], words: int) -> list[Conversation]:
    """Each conversation with its questions asked after a paste of the next one's turns."""
    out = []
    for index, conversation in enumerate(conversations):
        rng = random.Random(conversation.id)
        other = conversations[(index + 1) % len(conversations)]
        questions = []
        for question in conversation.questions:
            text = paste(other, words, rng)
            questions.append(replace(question, question=f"{text}\n\n{question.question}"))
        out.append(replace(conversation, questions=tuple(questions)))
    return out


Results = dict[tuple[int, int | None, str], EvalResult]
"""One conversation's scores, by (words pasted, cap, conversation id)."""


async def ask(rt: Runtime, conversation: Conversation, cap: int | None) -> EvalResult:
    bm25.MAX_QUERY_TERMS = NO_CAP if cap is None else cap
    return await evaluation.evaluate(rt, [conversation])


def pooled(results: Sequence[EvalResult]) -> EvalResult:
    """Several conversations' scores as one result."""
    out = EvalResult(method="memlane", ks=(5, 10))
    for result in results:
        for source, target in (
            (result.overall, out.overall),
            *((result.by_category[c], out.by_category[c]) for c in result.by_category),
        ):
            target.count += source.count
            for name, value in source.sums.items():
                target.sums[name] += value
    return out


def held_out(
    results: Results, lengths: Sequence[int], conversations: Sequence[Conversation]
) -> tuple[dict[int, EvalResult], list[int | None]]:
    """Each conversation asked with the cap whose Recall@10, over every length measured,
    is best on the other four (ties to the larger cap); pooled per length."""
    chosen: list[int | None] = []
    for held in conversations:
        others = [c.id for c in conversations if c.id != held.id]

        def train(cap: int | None, others: list[str] = others) -> tuple[float, float]:
            taken = [results[(words, cap, c)].overall for words in lengths for c in others]
            recall = sum(t.sums["recall@10"] for t in taken) / sum(t.count for t in taken)
            return recall, NO_CAP if cap is None else cap

        chosen.append(max(CAPS, key=train))
    per_length = {
        words: pooled(
            [results[(words, cap, c.id)] for cap, c in zip(chosen, conversations, strict=True)]
        )
        for words in lengths
    }
    return per_length, chosen


def row(name: str, result: EvalResult) -> str:
    overall = result.overall.mean()
    cells = [f"{result.by_category[c].mean()['recall@10']:.3f}" for c in (1, 2, 3, 4)]
    return (
        f"| {name} | {overall['recall@5']:.3f} | {overall['recall@10']:.3f} | "
        f"{overall['ndcg@10']:.3f} | {' | '.join(cells)} |"
    )


def header(first: str) -> str:
    categories = " | ".join(f"R@10 {CATEGORIES[c]}" for c in (1, 2, 3, 4))
    return (
        f"| {first} | R@5 | R@10 | NDCG@10 | {categories} |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |"
    )


async def run(file: Path, lengths: Sequence[int]) -> None:
    conversations = load_conversations(file)
    with tempfile.TemporaryDirectory(prefix="memlane-long-") as folder:
        home = Path(folder)
        settings = Settings(home=home, memory_git=False)
        store = SQLiteStore(home / "memlane.db")
        rt = Runtime(settings, store)
        try:
            await evaluation.ingest(rt, conversations)
            await check_short_questions(rt, conversations)
            results: Results = {}
            for words in lengths:
                for conversation in long_messages(conversations, words):
                    for cap in CAPS:
                        results[(words, cap, conversation.id)] = await ask(rt, conversation, cap)
        finally:
            store.close()
    for words in lengths:
        print(f"**{words} words of another conversation, then the question**\n")
        print(header("words scored"))
        for cap in CAPS:
            result = pooled([results[(words, cap, c.id)] for c in conversations])
            print(row("all" if cap is None else str(cap), result))
        print()
    per_length, chosen = held_out(results, lengths, conversations)
    print(f"**Leave one conversation out** (caps chosen: {chosen})\n")
    print(header("words pasted"))
    for words, result in per_length.items():
        print(row(str(words), result))


async def check_short_questions(rt: Runtime, conversations: Sequence[Conversation]) -> None:
    """The questions as asked are scored alike with the default cap and without."""
    default = bm25.MAX_QUERY_TERMS
    longest = max(len(query_terms(q.question)) for c in conversations for q in c.questions)
    same = True
    for conversation in conversations:
        capped = (await ask(rt, conversation, default)).overall.mean()
        same = same and capped == (await ask(rt, conversation, None)).overall.mean()
    bm25.MAX_QUERY_TERMS = default
    print(
        f"questions as asked: at most {longest} distinct terms; scored alike with the cap of "
        f"{default} and without: {same}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument(
        "--words", type=int, nargs="+", default=[100, 300, 1000], help="words pasted"
    )
    args = parser.parse_args()
    if not args.file.exists():
        sys.exit(f"{args.file}: no such file (give the evaluation file's path)")
    asyncio.run(run(args.file, args.words))


if __name__ == "__main__":
    main()
