"""BM25 as FTS5 computes it: the parameters and the IDF both backends rank with.

SQLite ranks in process (`sqlite.keyword_index`), PostgreSQL in SQL (`postgres.keywords`);
a memory moved from one to the other must find the same hits in the same order, so both
take these from here rather than each keeping its own copy.
"""

from __future__ import annotations

import math

K1 = 1.2
"""How quickly a term's repeats stop adding to a document's score."""
B = 0.75
"""How much a document's length, against the average, discounts its score."""
IDF_FLOOR = 1e-6
"""FTS5's IDF for a term in half the documents or more: it counts, a little."""


def idf(documents: float, holding: float) -> float:
    """The weight of a term that `holding` of `documents` documents hold, FTS5's rule: the
    Robertson–Spärck Jones IDF, `IDF_FLOOR` where that is not positive (a term in half the
    documents or more)."""
    weight = math.log((documents - holding + 0.5) / (holding + 0.5))
    return weight if weight > 0 else IDF_FLOOR
