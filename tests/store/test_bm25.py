"""BM25's IDF follows FTS5's rule, and both backends weigh a query's words with it."""

from __future__ import annotations

import math

import pytest

from memlane.store.bm25 import IDF_FLOOR, MAX_QUERY_TERMS, idf, scored_words


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


def test_a_query_of_up_to_the_cap_is_scored_by_every_word() -> None:
    words = [f"w{i}" for i in range(MAX_QUERY_TERMS)]
    assert scored_words(words, lambda word: 1000) == words


def test_a_longer_query_keeps_its_rarest_words_in_query_order() -> None:
    """Past the cap the words fewest documents hold are kept (ties: the earlier word), a
    word no document holds last of all, and the kept ones stay in the query's order."""
    held = {f"w{i}": 100 + i for i in range(MAX_QUERY_TERMS)}
    words = ["common", "absent", *held, "rare", "tie"]
    counts = {**held, "common": 10_000, "absent": 0, "rare": 1, "tie": 100}

    kept = scored_words(words, counts.__getitem__)

    assert len(kept) == MAX_QUERY_TERMS
    assert kept[0] == "w0"  # in query order, whatever their counts
    assert {"rare", "tie"} <= set(kept)  # 100 ties with w0: both kept
    assert not {"common", "absent"} & set(kept)
    assert kept == [w for w in words if w in kept]
    last = MAX_QUERY_TERMS - 1
    assert set(held) - set(kept) == {f"w{last - 1}", f"w{last}"}  # the two most held


def test_postgres_weighs_a_long_query_by_the_same_words_as_sqlite() -> None:
    from memlane.store.postgres.keywords import query_weights

    words = ["common", *(f"w{i}" for i in range(MAX_QUERY_TERMS))]
    df = {"common": 900, **{f"w{i}": 3 for i in range(MAX_QUERY_TERMS)}}
    weights = query_weights(words, 1000.0, 7.0, df)
    assert weights.words == words[1:] == scored_words(words, df.__getitem__)
    assert weights.idf == [idf(1000, 3)] * MAX_QUERY_TERMS
