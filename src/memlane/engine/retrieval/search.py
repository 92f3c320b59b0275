"""The retrieval entry point: one call from a query to ranked, diverse memories.

    search(rt, query, scopes=(...), kinds=("fact",), roles=RECALL_ROLES,
           session_id=None, top_k=None, method="memlane", now=None,
           as_of=None, superseded=False) -> list[Candidate]

- `scopes`: the scope strings a result may come from (see
  `engine.memory.scopes`: `conv:<session id>`, `ns:<namespace>`, `global`);
  None means every scope (CLI administration only, never a request).
- `kinds`: "fact" for long-term memory entries; governance passes ("event",)
  with `session_id` to find snippets of the session's dropped history.
- `roles`: which fact roles may come back; summaries are injected separately.
- `top_k`: how many to return (default `memory_top_k`); each first-stage list
  fetches `top_k × memory_candidates_factor`.
- `method`: "memlane" runs every stage; "bm25" and "dense" return one plain
  first-stage list (the evaluation's baselines).
- `now`: the moment recency is measured from (default: the current time).
- `as_of`: only facts true at that moment (`Fact.valid_at`); default: true at the
  current time (not `now`: an evaluation replays old conversations with `now` in
  the past). `superseded=True` lifts it: facts closed since are found too (a
  question about change). Deleted facts are never found.
- `turns_left_out`: a conversation's scope whose remembered turns are not searched (its
  other entries are): the request carries them (`engine.memory.recall`).

Stages (each a pure function in its own module): keyword + dense candidates →
`fuse` → `expand` (entity-aware expansion, `memory_entity_expansion`) → optional
`rerank` → `facts_over_echoes` → `threshold` → `apply_recency` → `mmr`. Results
are best first, each with `relevance` (0–1) and the final `score`. The store
is synchronous, so its calls run in a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal, TypedDict, Unpack

from memlane.engine import threads
from memlane.engine.retrieval.candidates import Candidate, from_hits
from memlane.engine.retrieval.echoes import facts_over_echoes
from memlane.engine.retrieval.expand import (
    MAX_HOLDERS,
    MAX_READ,
    MAX_SHARE,
    expand,
    seed_words,
)
from memlane.engine.retrieval.fuse import FusionMethod, fuse
from memlane.engine.retrieval.mmr import mmr
from memlane.engine.retrieval.recency import apply_recency
from memlane.engine.retrieval.rerank import Reranker, make_reranker_from, rerank, threshold
from memlane.engine.runtime import Runtime
from memlane.store import SearchFilter, StoreError, Vector
from memlane.text.embeddings import Embedder, EmbeddingError
from memlane.types import DocKind, FactRole, Hit

Method = Literal["memlane", "bm25", "dense"]
RECALL_ROLES: tuple[FactRole, ...] = ("memory", "user", "assistant")
FUSION: FusionMethod = "score"
"""Normalised score fusion measured better than RRF on the development set (README)."""

log = logging.getLogger("memlane.retrieval")


class Terms(TypedDict, total=False):
    """What narrows a search besides its scopes (the module docstring says each)."""

    kinds: tuple[DocKind, ...]
    roles: tuple[FactRole, ...] | None
    session_id: str | None
    top_k: int | None
    now: datetime | None
    as_of: datetime | None
    superseded: bool
    turns_left_out: str | None


async def search(
    rt: Runtime,
    query: str,
    *,
    scopes: Sequence[str] | None,
    method: Method = "memlane",
    **terms: Unpack[Terms],
) -> list[Candidate]:
    """Ranked memories for `query`; empty for an empty query or an empty scope list."""
    asked = Query.of(rt, query, scopes, **terms)
    if asked is None:
        return []
    if method != "memlane":
        keyword, dense = await threads.to_thread(
            _first_stage, rt, query, asked.flt, asked.pool, method
        )
        hits = keyword if method == "bm25" else dense
        return [_plain(hit, rank) for rank, hit in enumerate(hits[: asked.k])]
    reranker = _reranker(rt)
    if reranker is None:  # every stage in one trip to a worker thread
        return await threads.to_thread(ranked, rt, asked)
    candidates = await threads.to_thread(_candidates, rt, query, asked.flt, asked.pool)
    candidates = await rerank(reranker, query, candidates)
    return await threads.to_thread(_final, rt, asked, candidates)


@dataclass(frozen=True, slots=True)
class Query:
    """One search, as the stages need it."""

    text: str
    flt: SearchFilter
    k: int
    pool: int
    """How many each first-stage list fetches."""
    now: datetime

    @classmethod
    def of(
        cls, rt: Runtime, query: str, scopes: Sequence[str] | None, **terms: Unpack[Terms]
    ) -> Query | None:
        """None when there is nothing to search: an empty query or an empty scope list."""
        if not query.strip() or (scopes is not None and not scopes):
            return None
        settings = rt.settings
        k = terms.get("top_k") or settings.memory_top_k
        as_of = terms.get("as_of")
        flt = SearchFilter(
            kinds=terms.get("kinds", ("fact",)),
            scopes=tuple(scopes) if scopes is not None else None,
            session_id=terms.get("session_id"),
            fact_roles=terms.get("roles", RECALL_ROLES),
            turns_left_out=terms.get("turns_left_out"),
            valid_at=None if terms.get("superseded") else (as_of or datetime.now(UTC)),
        )
        now = terms.get("now") or datetime.now(UTC)
        return cls(query, flt, k, k * settings.memory_candidates_factor, now)


def ranked(rt: Runtime, asked: Query) -> list[Candidate]:
    """Every stage but an external reranker, in the calling thread (it blocks on the store).

    The request path calls this inside the one worker-thread trip that also loads what
    it found (`memory.recall`) when no reranker is configured (`reranking` says)."""
    return _final(rt, asked, _candidates(rt, asked.text, asked.flt, asked.pool))


def reranking(rt: Runtime) -> bool:
    """Whether a reranker is configured: its call is async, so `ranked` cannot run it."""
    return _reranker(rt) is not None


def _final(rt: Runtime, asked: Query, candidates: list[Candidate]) -> list[Candidate]:
    """Facts over their echoes, threshold, recency and diversity: the stages after the
    (optional) reranker."""
    settings = rt.settings
    candidates = facts_over_echoes(candidates)
    candidates = threshold(candidates, settings.memory_score_threshold)
    if not candidates:
        return []
    candidates = apply_recency(candidates, now=asked.now, weight=settings.memory_recency_weight)
    if settings.memory_mmr_lambda >= 1.0 or not settings.dense_retrieval:
        return candidates[: asked.k]  # MMR compares embeddings: none without dense retrieval
    return mmr(candidates, _vectors(rt, candidates), k=asked.k, lam=settings.memory_mmr_lambda)


def _candidates(rt: Runtime, query: str, flt: SearchFilter, pool: int) -> list[Candidate]:
    """First stage, fusion and entity-aware expansion (which asks the store again, for
    the holders of the seeds' rare words), in one trip to a worker thread."""
    settings = rt.settings
    keyword, dense = _first_stage(rt, query, flt, pool, "memlane")
    candidates = fuse(
        from_hits(keyword, dense),
        keyword_weight=settings.memory_keyword_weight,
        dense_weight=settings.memory_dense_weight,
        method=FUSION,
    )
    words = seed_words(candidates) if settings.memory_entity_expansion else []
    if not words:
        return candidates
    holders = rt.store.rare_term_hits(
        words, flt, max_df=MAX_HOLDERS, max_share=MAX_SHARE, limit=MAX_READ
    )
    return expand(candidates, holders)


def _first_stage(
    rt: Runtime, query: str, flt: SearchFilter, limit: int, method: Method
) -> tuple[list[Hit], list[Hit]]:
    keyword: list[Hit] = []
    dense: list[Hit] = []
    if method in ("memlane", "bm25"):
        keyword = rt.store.keyword_search(query, flt, limit=limit)
    if method == "dense" or (method == "memlane" and rt.settings.dense_retrieval):
        try:
            embedder = rt.embedder
            vector = embed_query(embedder, query)
            dense = rt.store.vector_search(vector, flt, model=embedder.model_id, limit=limit)
        except (EmbeddingError, StoreError, OSError, RuntimeError, ValueError) as exc:
            if method == "dense":
                raise
            log.warning("dense retrieval unavailable, keyword results only: %s", exc)
    return keyword, dense


QUERY_MEMO_SIZE = 256
_query_memo: OrderedDict[tuple[str, str], Vector] = OrderedDict()
_query_memo_lock = threading.Lock()


def embed_query(embedder: Embedder, query: str) -> Vector:
    """The query's embedding, memoised: an agent's tool loop asks the same prompt each step.

    Embedding is the costliest part of recall in front of a response (milliseconds of
    model time); every step of a tool loop after the first then costs only the search.
    """
    key = (embedder.model_id, query)
    with _query_memo_lock:
        found = _query_memo.get(key)
        if found is not None:
            _query_memo.move_to_end(key)
            return found
    vector: Vector = embedder.embed([query])[0]
    with _query_memo_lock:
        _query_memo[key] = vector
        while len(_query_memo) > QUERY_MEMO_SIZE:
            _query_memo.popitem(last=False)
    return vector


def _vectors(rt: Runtime, candidates: Sequence[Candidate]) -> dict[str, Vector]:
    model = rt.embedder.model_id
    out: dict[str, Vector] = {}
    for kind in {c.kind for c in candidates}:
        refs = [c.ref for c in candidates if c.kind == kind]
        out.update(rt.store.get_vectors(kind, refs, model=model))
    return out


def _plain(hit: Hit, rank: int) -> Candidate:
    """A first-stage hit as a result: relevance by rank, no other stage applied."""
    (candidate,) = from_hits([hit], [])
    value = 1.0 / (1 + rank)
    return candidate.scored(value, value)


def _reranker(rt: Runtime) -> Reranker | None:
    return _load_reranker(rt.settings.memory_reranker_url, rt.settings.memory_reranker_path)


@lru_cache(maxsize=4)
def _load_reranker(url: str | None, path: str | None) -> Reranker | None:
    """Loaded once per configuration (a model load costs seconds); None unless configured."""
    if url is None and path is None:
        return None
    return make_reranker_from(url=url, path=path)
