"""Each retrieval stage on its own: fusion, recency, threshold, rerank, MMR."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest

from memlane.engine.retrieval.candidates import Candidate, from_hits
from memlane.engine.retrieval.fuse import fuse, min_max
from memlane.engine.retrieval.mmr import mmr
from memlane.engine.retrieval.recency import apply_recency, recency
from memlane.engine.retrieval.rerank import EndpointReranker, make_reranker_from, rerank, threshold
from memlane.types import Hit

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def hit(ref: str, score: float, *, days: float = 0.0, text: str | None = None) -> Hit:
    return Hit("fact", ref, "global", None, text or ref, score, NOW - timedelta(days=days))


def cand(ref: str, relevance: float, *, days: float = 0.0) -> Candidate:
    return Candidate(
        "fact",
        ref,
        "global",
        None,
        ref,
        NOW - timedelta(days=days),
        relevance=relevance,
        score=relevance,
    )


def test_candidates_merge_both_lists_once_each() -> None:
    merged = {
        c.ref: c for c in from_hits([hit("a", 9), hit("b", 5)], [hit("b", 0.9), hit("c", 0.4)])
    }
    assert set(merged) == {"a", "b", "c"}
    assert (merged["b"].keyword_rank, merged["b"].dense_rank) == (2, 1)
    assert (merged["a"].dense_rank, merged["c"].keyword_rank) == (None, None)


def test_score_fusion_rewards_agreement_and_normalises() -> None:
    cands = from_hits(
        [hit("a", 10), hit("b", 8), hit("d", 1)], [hit("b", 0.9), hit("c", 0.5), hit("e", 0.1)]
    )
    fused = fuse(cands, method="score")
    assert [c.ref for c in fused][:3] == ["b", "a", "c"]
    assert fused[0].relevance == 1.0
    assert fused[-1].relevance == 0.0


def test_rrf_fusion_follows_ranks_and_weights() -> None:
    cands = from_hits([hit("a", 10), hit("b", 2)], [hit("c", 0.9), hit("a", 0.5)])
    assert fuse(cands, method="rrf")[0].ref == "a"
    only_dense = fuse(cands, method="rrf", keyword_weight=0.0)
    assert only_dense[0].ref == "c"


def test_min_max_edge_cases() -> None:
    assert min_max([]) == []
    assert min_max([3.0, 3.0]) == [1.0, 1.0]
    assert min_max([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]


def test_recency_formula() -> None:
    assert recency(NOW, NOW) == 1.0
    assert recency(NOW - timedelta(days=30), NOW) == pytest.approx(math.exp(-1))
    assert recency(NOW + timedelta(days=3), NOW) == 1.0  # the future is "new", not more
    old, new = cand("old", 0.8, days=300), cand("new", 0.7, days=0)
    ranked = apply_recency([old, new], now=NOW, weight=0.2)
    assert [c.ref for c in ranked] == ["new", "old"]
    assert ranked[0].score == pytest.approx(0.8 * 0.7 + 0.2)
    assert [c.ref for c in apply_recency([old, new], now=NOW, weight=0.0)] == ["old", "new"]


def test_threshold_prunes_by_relevance() -> None:
    cands = [cand("a", 0.9), cand("b", 0.4)]
    assert [c.ref for c in threshold(cands, 0.5)] == ["a"]
    assert threshold(cands, None) == cands


def test_mmr_skips_near_duplicates() -> None:
    v = {
        "a": np.array([1, 0], np.float32),
        "a2": np.array([1, 0], np.float32),
        "b": np.array([0, 1], np.float32),
    }
    pool = [cand("a", 1.0), cand("a2", 0.95), cand("b", 0.6)]
    assert [c.ref for c in mmr(pool, v, k=2, lam=0.7)] == ["a", "b"]
    assert [c.ref for c in mmr(pool, v, k=2, lam=1.0)] == ["a", "a2"]
    assert mmr(pool, {}, k=5, lam=0.7) == pool  # no vectors: plain order
    assert mmr(pool, v, k=0, lam=0.7) == []


async def test_endpoint_reranker_orders_by_its_scores() -> None:
    seen: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        scores = [len(d) for d in body["documents"]]
        return httpx.Response(
            200,
            json={"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]},
        )

    reranker = EndpointReranker(
        "http://127.0.0.1:1/v1/rerank", transport=httpx.MockTransport(answer)
    )
    pool = [
        Candidate("fact", "short", "global", None, "tea", NOW, relevance=1.0),
        Candidate("fact", "long", "global", None, "a much longer text", NOW, relevance=0.5),
    ]
    ranked = await rerank(reranker, "query", pool)
    assert [c.ref for c in ranked] == ["long", "short"]
    assert [c.relevance for c in ranked] == [1.0, 0.0]
    assert seen[0]["query"] == "query"


async def test_a_failing_reranker_keeps_the_fusion_order() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="boom")

    reranker = EndpointReranker(
        "http://127.0.0.1:1/v1/rerank", transport=httpx.MockTransport(broken)
    )
    pool = [cand("a", 1.0), cand("b", 0.5)]
    assert await rerank(reranker, "q", pool) == pool


def test_a_reranker_that_cannot_load_is_none(tmp_path: object) -> None:
    assert make_reranker_from(url=None, path=str(tmp_path)) is None
    assert make_reranker_from(url=None, path=None) is None
