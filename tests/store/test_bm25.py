"""BM25's IDF follows FTS5's rule, and both backends weigh a query's words with it."""

from __future__ import annotations

import math

import pytest

from memlane.store.bm25 import IDF_FLOOR, idf


def test_a_rare_term_weighs_its_robertson_sparck_jones_idf() -> None:
    assert idf(100, 3) == pytest.approx(math.log(97.5 / 3.5))
    assert idf(100, 1) > idf(100, 3) > idf(100, 40) > IDF_FLOOR


@pytest.mark.parametrize("holding", [50, 51, 99, 100])
def test_a_term_in_half_the_documents_or_more_weighs_the_floor(holding: int) -> None:
    """FTS5 replaces an IDF that is not positive by 1e-6: the term still counts, a little,
    where a negative weight would rank a document lower for holding it."""
    assert idf(100, holding) == IDF_FLOOR


def test_postgres_weighs_words_as_sqlite_does() -> None:
    from memlane.store.postgres.keywords import query_weights

    weights = query_weights(["rare", "common", "half"], 100.0, 7.0, {"rare": 2, "common": 80})
    assert weights.idf == [idf(100, 2), IDF_FLOOR, idf(100, 0)]
