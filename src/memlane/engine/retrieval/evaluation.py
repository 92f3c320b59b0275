"""Retrieval evaluation on long conversations (the format of `shared/data/README.md`).

Each conversation's turns are ingested as memory entries of their own scope
(`conv:<conversation id>`, role `user`, text `Speaker: text`, the session's time
as `created_at`, list order kept within a session), embedded with the runtime's
embedder, and each scored question is asked through `search` exactly as the
read path asks it, with "now" at the conversation's last turn. With `alone`,
the turns are stored as standalone entries instead (role `memory`, so the index
reads each turn by itself, without its date or neighbours; in a store of their
own, so neither set's statistics move the other's scores): the baseline that
context-expanded documents are measured against. Metrics per
question, averaged per category and overall:

- Recall@k = |gold ∩ top-k| / |gold|;
- NDCG@10 with binary relevance, ideal DCG over min(|gold|, 10) hits.

The top-k lists for the smaller k are prefixes of the largest k's list (MMR
selects greedily, so the first k picks are those a top-k request would make
from the same pool).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlane.engine import threads
from memlane.engine.memory.scopes import conversation_scope
from memlane.engine.memory.vectors import embed_missing
from memlane.engine.retrieval.search import Method, search
from memlane.engine.runtime import Runtime
from memlane.types import Fact

SAMPLE_FILE = Path(__file__).with_name("sample_conversations.jsonl")
"""Three small made-up conversations shipped with memlane (`scripts/make_eval_sample.py`
writes them), so `memlane eval retrieval` runs from a fresh install with no data of
one's own; LoCoMo, which the published figures use, cannot be shipped (CC BY-NC)."""

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
NDCG_K = 10


class EvalFileError(ValueError):
    """The evaluation file is not in the expected format; the message names the line."""


@dataclass(frozen=True, slots=True)
class EvalTurn:
    id: str
    speaker: str
    text: str
    time: datetime


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    question: str
    evidence: tuple[str, ...]
    category: int
    scored: bool


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    turns: tuple[EvalTurn, ...]
    questions: tuple[Question, ...]


@dataclass
class Scores:
    """Sums of per-question metrics; `mean` divides by the count."""

    count: int = 0
    sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, metrics: dict[str, float]) -> None:
        self.count += 1
        for name, value in metrics.items():
            self.sums[name] += value

    def mean(self) -> dict[str, float]:
        return {name: value / self.count for name, value in self.sums.items()} if self.count else {}


@dataclass
class EvalResult:
    method: str
    ks: tuple[int, ...]
    overall: Scores = field(default_factory=Scores)
    by_category: dict[int, Scores] = field(default_factory=lambda: defaultdict(Scores))
    by_conversation: dict[str, Scores] = field(default_factory=lambda: defaultdict(Scores))
    latencies_ms: list[float] = field(default_factory=list)
    """Wall time of each question's `search` call, as the read path pays it."""
    turns: int = 0

    def latency(self, quantile: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]

    def as_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "turns": self.turns,
            "questions": self.overall.count,
            "overall": self.overall.mean(),
            "categories": {
                CATEGORIES.get(c, str(c)): {"questions": s.count, **s.mean()}
                for c, s in sorted(self.by_category.items())
            },
            "conversations": {
                name: {"questions": s.count, **s.mean()}
                for name, s in sorted(self.by_conversation.items())
            },
            "latency_ms": {"p50": round(self.latency(0.5), 3), "p95": round(self.latency(0.95), 3)},
        }


def load_conversations(path: Path) -> list[Conversation]:
    """Parse the JSONL file; raises `EvalFileError` naming the first bad line."""
    out = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                out.append(_conversation(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise EvalFileError(f"{path}:{number}: not a conversation record: {exc}") from None
    if not out:
        raise EvalFileError(f"{path}: no conversations")
    return out


def _conversation(data: dict[str, Any]) -> Conversation:
    turns = tuple(
        EvalTurn(str(t["id"]), str(t.get("speaker", "")), str(t["text"]), _time(t["time"]))
        for t in data["turns"]
    )
    questions = tuple(
        Question(
            str(q["id"]),
            str(q["question"]),
            tuple(str(e) for e in q.get("evidence", [])),
            int(q.get("category", 0)),
            bool(q.get("scored", True)) and bool(q.get("evidence")),
        )
        for q in data.get("questions", [])
    )
    return Conversation(str(data["id"]), turns, questions)


def _time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def turn_facts(conversation: Conversation, *, alone: bool = False) -> list[Fact]:
    """The conversation's turns as memory entries (order kept within a session); `alone`:
    as standalone entries of the baseline's scope, each indexed by its own words only."""
    scope = _scope(conversation.id, alone=alone)
    facts = []
    for index, turn in enumerate(conversation.turns):
        when = turn.time + timedelta(microseconds=index)
        text = f"{turn.speaker}: {turn.text}" if turn.speaker else turn.text
        facts.append(
            Fact(
                id=entry_id(conversation.id, turn.id, alone=alone),
                scope=scope,
                conversation_id=conversation.id,
                role="memory" if alone else "user",
                text=text,
                created_at=when,
                updated_at=when,
            )
        )
    return facts


def entry_id(conversation_id: str, turn_id: str, *, alone: bool = False) -> str:
    key = f"{conversation_id}\0{turn_id}" + ("\0alone" if alone else "")
    return "e" + hashlib.sha256(key.encode()).hexdigest()[:24]


def _scope(conversation_id: str, *, alone: bool) -> str:
    return conversation_scope(conversation_id + ("#alone" if alone else ""))


def metrics(ranked: Sequence[str], gold: Iterable[str], ks: Sequence[int]) -> dict[str, float]:
    """Recall@k for each k and NDCG@10 of one ranked list against its gold ids."""
    gold_set = set(gold)
    out = {f"recall@{k}": len(gold_set & set(ranked[:k])) / len(gold_set) for k in ks}
    dcg = sum(1 / math.log2(i + 2) for i, ref in enumerate(ranked[:NDCG_K]) if ref in gold_set)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold_set), NDCG_K)))
    out[f"ndcg@{NDCG_K}"] = dcg / ideal
    return out


async def ingest(
    rt: Runtime,
    conversations: Sequence[Conversation],
    progress: Callable[[int], None] | None = None,
    *,
    embed: bool = False,
    alone: bool = False,
) -> int:
    """Write every turn into the store's index (and embed them when a configuration
    measured needs vectors; `alone`: as the standalone baseline's entries); returns the
    turn count."""
    facts = [f for c in conversations for f in turn_facts(c, alone=alone)]

    def write() -> None:
        for fact in facts:
            rt.store.put_fact(fact)

    await threads.to_thread(write)
    if embed:
        report = (lambda done, _total: progress(done)) if progress else None
        await threads.to_thread(embed_missing, rt, report, force=True)
    return len(facts)


async def evaluate(
    rt: Runtime,
    conversations: Sequence[Conversation],
    *,
    ks: Sequence[int] = (5, 10),
    method: Method = "memlane",
    alone: bool = False,
    progress: Callable[[int], None] | None = None,
) -> EvalResult:
    """Ask every scored question of already ingested conversations; average the metrics
    (`alone`: against the standalone baseline's entries)."""
    ks = tuple(sorted(set(ks)))
    result = EvalResult(method=method, ks=ks)
    depth = max(*ks, NDCG_K)
    done = 0
    for conversation in conversations:
        ids = {entry_id(conversation.id, t.id, alone=alone): t.id for t in conversation.turns}
        now = max(t.time for t in conversation.turns)
        scope = _scope(conversation.id, alone=alone)
        for question in conversation.questions:
            if not question.scored:
                continue
            started = time.perf_counter()
            found = await search(
                rt, question.question, scopes=(scope,), top_k=depth, method=method, now=now
            )
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
            ranked = [ids.get(c.ref, "") for c in found]
            scores = metrics(ranked, question.evidence, ks)
            result.overall.add(scores)
            result.by_category[question.category].add(scores)
            result.by_conversation[conversation.id].add(scores)
            done += 1
            if progress is not None:
                progress(done)
    return result
