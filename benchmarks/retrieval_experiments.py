"""Read-path ideas for recall on long conversations, each checked leave-one-conversation-out.

Run: .venv/bin/python benchmarks/retrieval_experiments.py [FILE.jsonl]
     (default: shared/data/locomo_dev.jsonl beside the checkout, or beside its parent)

Every idea here is a change to what the keyword stage reads or how its list is
re-ordered, with no model in the read path. Each is measured the same way:

- documents are memlane's own (`store.documents.turn_documents`: the turn, its
  date and its neighbours) analysed by memlane's analyser (`store.analysis`),
  scored with FTS5's BM25 (k1 1.2, b 0.75, idf floored), one index over every
  conversation as `memlane eval retrieval` builds it;
- an idea with a knob is tuned leave-one-conversation-out: for each
  conversation, the knob value best on the other four is chosen and the held-out
  conversation is scored with it; the table gives the pooled held-out Recall@10
  (overall and per category) and how many held-out conversations moved up or down
  against the context-expanded documents alone.

An idea is worth building only when its held-out figure is up in every category.
The script prints Markdown tables (docs/benchmarks.md, Retrieval quality). It reads the
evaluation file only; nothing is stored.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from memlane.engine.retrieval.evaluation import CATEGORIES, load_conversations, turn_facts
from memlane.engine.retrieval.expand import MAX_READ
from memlane.store.analysis import query_terms, terms
from memlane.store.documents import turn_documents

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("shared") / "data" / "locomo_dev.jsonl"
DEFAULT_FILE = next(
    (p / DATA for p in (ROOT.parent, ROOT.parent.parent) if (p / DATA).exists()), ROOT.parent / DATA
)
K1, B, IDF_FLOOR = 1.2, 0.75, 1e-6
TOP = 10
Scores = npt.NDArray[np.float64]


class BM25:
    """FTS5's BM25 over term lists: the scores memlane's keyword index gives."""

    def __init__(self, docs: Sequence[Sequence[str]]) -> None:
        self.n = len(docs)
        self.length = np.array([len(d) for d in docs], float)
        self.avgdl = float(self.length.mean()) if self.n else 1.0
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for index, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                self.postings[term].append((index, tf))

    def score(self, words: Sequence[str]) -> Scores:
        out = np.zeros(self.n)
        for word in words:
            found = self.postings.get(word)
            if not found:
                continue
            idf = max(math.log((self.n - len(found) + 0.5) / (len(found) + 0.5)), IDF_FLOOR)
            index = np.array([i for i, _ in found])
            tf = np.array([f for _, f in found], float)
            norm = K1 * (1 - B + B * self.length[index] / self.avgdl)
            out[index] += idf * tf * (K1 + 1) / (tf + norm)
        return out


WINDOWS = [(b, a, w) for b in (0, 1, 2, 3) for a in (0, 1, 2) for w in (1, 2, 3)]
"""Turn documents to choose from: (turns before, turns after, weight of the turn's words)."""


@dataclass
class Corpus:
    """Every conversation's turns in one index, with what the ideas need per turn."""

    turn: list[str]  # the evaluation's turn id ("D3:7")
    conversation: npt.NDArray[np.str_]
    day: list[str]  # conversation + calendar day: an episode
    text: list[str]
    expanded: BM25  # context-expanded documents (today's default)
    alone: BM25  # each turn by itself
    questions: list[tuple[str, str, tuple[str, ...], int]]  # conversation, text, gold, category
    doc_terms: list[list[str]]
    path: Path


def build(path: Path) -> Corpus:
    conversations = load_conversations(path)
    turn, conversation, day, text, doc_terms = [], [], [], [], []
    for conv in conversations:
        facts = turn_facts(conv)
        documents = turn_documents(facts)
        for fact, source in zip(facts, conv.turns, strict=True):
            turn.append(source.id)
            conversation.append(conv.id)
            day.append(f"{conv.id}/{source.time.date().isoformat()}")
            text.append(fact.text)
            doc_terms.append(terms(documents[fact.id]))
    questions = [
        (c.id, q.question, q.evidence, q.category)
        for c in conversations
        for q in c.questions
        if q.scored
    ]
    return Corpus(
        turn,
        np.array(conversation),
        day,
        text,
        BM25(doc_terms),
        BM25([terms(t) for t in text]),
        questions,
        doc_terms,
        path,
    )


# An idea: (corpus, question index, knob) -> the turn indexes, best first.
Ranker = Callable[[Corpus, int, float], list[int]]


def _top(scores: Scores, mask: npt.NDArray[np.bool_], k: int = TOP) -> list[int]:
    masked = np.where(mask, scores, -np.inf)
    order = np.argsort(-masked, kind="stable")[:k]
    return [int(i) for i in order if masked[i] > 0]


def plain(corpus: Corpus, q: int, _: float) -> list[int]:
    conv, question, _gold, _cat = corpus.questions[q]
    return _top(corpus.alone.score(query_terms(question)), corpus.conversation == conv)


def expanded(corpus: Corpus, q: int, _: float) -> list[int]:
    conv, question, _gold, _cat = corpus.questions[q]
    return _top(corpus.expanded.score(query_terms(question)), corpus.conversation == conv)


class Window:
    """Context-expanded documents with another window or turn weight (`WINDOWS[knob]`)."""

    def __init__(self) -> None:
        self.indexes: dict[int, BM25] = {}

    def _index(self, corpus: Corpus, choice: int) -> BM25:
        if choice not in self.indexes:
            before, after, weight = WINDOWS[choice]
            docs = []
            for conv in load_conversations(corpus.path):
                facts = turn_facts(conv)
                built = turn_documents(facts, before=before, after=after, weight=weight)
                docs += [terms(built[f.id]) for f in facts]
            self.indexes[choice] = BM25(docs)
        return self.indexes[choice]

    def __call__(self, corpus: Corpus, q: int, knob: float) -> list[int]:
        conv, question, _gold, _cat = corpus.questions[q]
        index = self._index(corpus, int(knob))
        return _top(index.score(query_terms(question)), corpus.conversation == conv)


class EpisodePrior:
    """A turn's score plus `w` × its episode's: the episode (one conversation's turns of
    one day) scored as one document made of its turns' documents, with the episodes'
    own statistics (`scope`: over every conversation, or the question's only)."""

    def __init__(self, corpus: Corpus, *, every_conversation: bool) -> None:
        self.names = sorted(set(corpus.day))
        index = {name: i for i, name in enumerate(self.names)}
        self.of_turn = np.array([index[d] for d in corpus.day])
        merged: dict[str, list[str]] = defaultdict(list)
        for doc, name in zip(corpus.doc_terms, corpus.day, strict=True):
            merged[name] += doc
        if every_conversation:
            self.index = {"": BM25([merged[n] for n in self.names])}
            self.rows = {"": np.arange(len(self.names))}
        else:
            self.index, self.rows = {}, {}
            for conv in sorted(set(corpus.conversation.tolist())):
                mine = [i for i, n in enumerate(self.names) if n.startswith(conv + "/")]
                self.index[conv] = BM25([merged[self.names[i]] for i in mine])
                self.rows[conv] = np.array(mine)

    def __call__(self, corpus: Corpus, q: int, weight: float) -> list[int]:
        conv, question, _gold, _cat = corpus.questions[q]
        words = query_terms(question)
        mask = corpus.conversation == conv
        turn = np.where(mask, corpus.expanded.score(words), 0.0)
        key = "" if "" in self.index else conv
        episode = np.zeros(len(self.names))
        episode[self.rows[key]] = self.index[key].score(words)
        per_turn = episode[self.of_turn]
        top_turn = turn.max() or 1.0
        top_episode = per_turn[mask].max() or 1.0
        return _top(turn / top_turn + weight * per_turn / top_episode, mask)


_CAPITAL = re.compile(r"\b[A-Z][\w'-]+")


def _entities(text: str) -> set[str]:
    """Capitalised words not opening a sentence (after a leading `Speaker:` label)."""
    body = re.sub(r"^[^:]{1,40}: ", "", text)
    found = set()
    for match in _CAPITAL.finditer(body):
        before = body[: match.start()].rstrip()
        if before and before[-1] not in '.!?"(':
            found.add(match.group(0).lower())
    return found


class EntityExpansion:
    """Turns sharing a rare named entity (in at most 5 turns of the conversation) with
    one of the top 3 hits get `w` × that hit's score."""

    def __init__(self, corpus: Corpus) -> None:
        self.entities = [_entities(t) for t in corpus.text]
        self.df: dict[str, Counter[str]] = defaultdict(Counter)
        for conv, found in zip(corpus.conversation.tolist(), self.entities, strict=True):
            self.df[conv].update(found)

    def __call__(self, corpus: Corpus, q: int, weight: float) -> list[int]:
        conv, question, _gold, _cat = corpus.questions[q]
        mask = corpus.conversation == conv
        scores = np.where(mask, corpus.expanded.score(query_terms(question)), 0.0)
        bonus = np.zeros_like(scores)
        members = np.flatnonzero(mask)
        for hit in _top(scores, mask, 3):
            rare = {e for e in self.entities[hit] if self.df[conv][e] <= 5}
            for other in members:
                if other != hit and rare & self.entities[other]:
                    bonus[other] = max(bonus[other], weight * scores[hit])
        return _top(scores + bonus, mask)


class RareWordExpansion:
    """What the read path does (`engine.retrieval.expand`), with its knobs chosen per fold:
    the top 30 hits (3 x the 10 asked for) scaled to [0, 1]; each of the best `seeds`
    links the turns whose own text says one of its words that at most `max_df` of the
    conversation's documents hold (the rarest first, MAX_READ documents read at most); a
    linked turn gets `weight` x the seed's relevance added to its own (0 outside the 30),
    the best link counting (`GRID[knob]`)."""

    GRID: ClassVar[list[tuple[int, int, float]]] = [
        (seeds, max_df, weight)
        for seeds in (1, 2, 3)
        for max_df in (8, 12, 16, 20, 30)
        for weight in (0.05, 0.1, 0.15, 0.2, 0.3)
    ]
    POOL = 30

    def __init__(self, corpus: Corpus) -> None:
        self.own = [set(terms(t)) for t in corpus.text]
        self.said: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        self.df: dict[str, Counter[str]] = defaultdict(Counter)
        convs = corpus.conversation.tolist()
        for i, (conv, own, doc) in enumerate(zip(convs, self.own, corpus.doc_terms, strict=True)):
            for word in own:
                self.said[conv][word].append(i)
            self.df[conv].update(set(doc))
        self.pools: dict[int, tuple[list[int], dict[int, float]]] = {}

    def _pool(self, corpus: Corpus, q: int) -> tuple[list[int], dict[int, float]]:
        if q not in self.pools:
            conv, question, _gold, _cat = corpus.questions[q]
            mask = corpus.conversation == conv
            scores = corpus.expanded.score(query_terms(question))
            pool = _top(scores, mask, self.POOL)
            hi, lo = (scores[pool[0]], scores[pool[-1]]) if pool else (1.0, 0.0)
            scaled = {i: (scores[i] - lo) / (hi - lo) if hi > lo else 1.0 for i in pool}
            self.pools[q] = (pool, scaled)
        return self.pools[q]

    def __call__(self, corpus: Corpus, q: int, knob: float) -> list[int]:
        seeds, max_df, weight = self.GRID[int(knob)]
        conv = corpus.questions[q][0]
        df = self.df[conv]
        pool, relevance = self._pool(corpus, q)
        rare = {w for seed in pool[:seeds] for w in self.own[seed] if df[w] <= max_df}
        read = 0
        bonus: dict[int, float] = {}
        for word in sorted(rare, key=lambda w: (df[w], w)):  # rarest first, MAX_READ read
            read += df[word]
            if read > MAX_READ:
                break
            for seed in pool[:seeds]:
                if word in self.own[seed]:
                    for other in self.said[conv][word]:
                        if other != seed:
                            bonus[other] = max(bonus.get(other, 0.0), weight * relevance[seed])
        final = {i: relevance.get(i, 0.0) + bonus.get(i, 0.0) for i in {*relevance, *bonus}}
        return sorted(final, key=lambda i: (-final[i], i))[:TOP]


def pooled_episode(corpus: Corpus, q: int, weight: float) -> list[int]:
    """No episode index: an episode's score is the sum of its best 3 turns among the
    top 30 keyword hits (min-max scaled), added with weight `w`."""
    conv, question, _gold, _cat = corpus.questions[q]
    mask = corpus.conversation == conv
    scores = corpus.expanded.score(query_terms(question))
    pool = _top(scores, mask, 30)
    if not pool:
        return []
    hi, lo = scores[pool[0]], scores[pool[-1]]
    relevance = {i: (scores[i] - lo) / (hi - lo) if hi > lo else 1.0 for i in pool}
    by_episode: dict[str, list[float]] = defaultdict(list)
    for i in pool:
        by_episode[corpus.day[i]].append(relevance[i])
    episode = {name: sum(sorted(v)[-3:]) for name, v in by_episode.items()}
    best = max(episode.values()) or 1.0
    pool.sort(key=lambda i: -(relevance[i] + weight * episode[corpus.day[i]] / best))
    return pool[:TOP]


def session_cap(corpus: Corpus, q: int, cap: float) -> list[int]:
    """At most `cap` hits per episode (diversity across days for multi-hop questions)."""
    conv, question, _gold, _cat = corpus.questions[q]
    mask = corpus.conversation == conv
    out: list[int] = []
    taken: Counter[str] = Counter()
    for i in _top(corpus.expanded.score(query_terms(question)), mask, 1000):
        if taken[corpus.day[i]] < cap:
            taken[corpus.day[i]] += 1
            out.append(i)
        if len(out) == TOP:
            break
    return out


@dataclass
class Outcome:
    recall: dict[str, list[float]]  # key: "all", a category, a conversation
    chosen: list[float]


def run(corpus: Corpus, ranker: Ranker, grid: Sequence[float]) -> Outcome:
    """Score every question at every knob value, then pick per held-out conversation."""
    per_knob: dict[float, list[float]] = {}
    for knob in grid:
        per_knob[knob] = [
            _recall([corpus.turn[i] for i in ranker(corpus, q, knob)], gold)
            for q, (_c, _t, gold, _cat) in enumerate(corpus.questions)
        ]
    conv_of = [c for c, _t, _g, _cat in corpus.questions]
    recall: dict[str, list[float]] = defaultdict(list)
    chosen = []
    for held in sorted(set(conv_of)):

        def train_score(knob: float, held: str = held) -> float:
            values = [r for r, c in zip(per_knob[knob], conv_of, strict=True) if c != held]
            return float(np.mean(values))

        knob = max(grid, key=train_score)
        chosen.append(knob)
        for q, (conv, _t, _g, category) in enumerate(corpus.questions):
            if conv == held:
                value = per_knob[knob][q]
                recall["all"].append(value)
                recall[CATEGORIES[category]].append(value)
                recall[conv].append(value)
    return Outcome(recall, chosen)


def _recall(ranked: Sequence[str], gold: Sequence[str]) -> float:
    return len(set(gold) & set(ranked[:TOP])) / len(set(gold))


def _knob(idea: str, value: float) -> str:
    if idea.startswith("window"):
        return "/".join(map(str, WINDOWS[int(value)]))
    if "rare-word" in idea:
        return "/".join(f"{v:g}" for v in RareWordExpansion.GRID[int(value)])
    return f"{value:g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    args = parser.parse_args()
    if not args.file.exists():
        sys.exit(f"{args.file}: no such file (give the evaluation file's path)")
    corpus = build(args.file)
    weights = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
    ideas: list[tuple[str, Ranker, Sequence[float]]] = [
        ("each turn alone (plain BM25)", plain, (0.0,)),
        ("context-expanded turns (2 before, 1 after, turn x2)", expanded, (0.0,)),
        (
            "window and turn weight chosen per fold (before, after, weight)",
            Window(),
            [float(i) for i in range(len(WINDOWS))],
        ),
        (
            "+ episode prior, episode statistics over every conversation",
            EpisodePrior(corpus, every_conversation=True),
            weights,
        ),
        (
            "+ episode prior, statistics of the question's conversation",
            EpisodePrior(corpus, every_conversation=False),
            weights,
        ),
        ("+ episode prior from the top 30 hits (no episode index)", pooled_episode, weights),
        ("+ rare-entity expansion from the top 3 hits", EntityExpansion(corpus), weights),
        (
            "+ rare-word expansion (default: seeds / holders / weight)",
            RareWordExpansion(corpus),
            [float(i) for i in range(len(RareWordExpansion.GRID))],
        ),
        ("at most N hits per episode", session_cap, (2.0, 3.0, 4.0, 6.0, 10.0)),
    ]
    outcomes = [(name, run(corpus, ranker, grid)) for name, ranker, grid in ideas]
    base = outcomes[1][1]
    conversations = sorted({c for c, _t, _g, _cat in corpus.questions})
    categories = [CATEGORIES[c] for c in sorted({c for *_, c in corpus.questions})]
    print(f"\n{args.file.name}: {len(corpus.turn)} turns, {len(corpus.questions)} questions; ")
    print("held-out Recall@10 (leave one conversation out)\n")
    print(
        "| idea | knob chosen per fold | "
        + " | ".join(categories)
        + " | **R@10** | conversations up / down |"
    )
    print("| --- | --- | " + " | ".join("---" for _ in categories) + " | --- | --- |")
    for name, outcome in outcomes:
        mean = {k: float(np.mean(v)) for k, v in outcome.recall.items()}
        up = sum(mean[c] > float(np.mean(base.recall[c])) + 1e-9 for c in conversations)
        down = sum(mean[c] < float(np.mean(base.recall[c])) - 1e-9 for c in conversations)
        knobs = ", ".join(_knob(name, k) for k in outcome.chosen)
        cells = " | ".join(f"{mean[c]:.3f}" for c in categories)
        print(f"| {name} | {knobs} | {cells} | **{mean['all']:.3f}** | {up} / {down} |")


if __name__ == "__main__":
    main()
