"""BM25 as FTS5 computes it: the parameters and the IDF both backends rank with.

SQLite ranks in process (`sqlite.keyword_index`), PostgreSQL in SQL (`postgres.keywords`);
a memory moved from one to the other must find the same hits in the same order, so both
take these from here rather than each keeping its own copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

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


MAX_QUERY_TERMS = 48
"""The most words a query is scored by: past this, those fewest documents hold.

A user turn is the recall query, and a turn may be a pasted log, diff or document:
every word scored costs a pass over its postings in front of the answer (tens of
microseconds a word in process, a count a word in PostgreSQL). The rarest words carry
the most weight (the idf) and say what the message is about; the common words of a
long paste mostly add noise. On LoCoMo questions asked after 100, 300 and 1,000 words
of another conversation, 48 was chosen leave-one-conversation-out in every fold
(Recall@10 0.471, 0.372 and 0.283 held out, against 0.464, 0.277 and 0.147 scoring
every word), and a question of up to 48 distinct terms (every LoCoMo question: 15 at
most) is scored whole (`benchmarks/long_queries.py`)."""


def scored_words(words: Sequence[str], holders: Callable[[str], int]) -> list[str]:
    """The words of a query (distinct, in order) it is scored by: all of them, or past
    `MAX_QUERY_TERMS` those fewest documents hold (`holders`), ties in query order, kept in
    query order. A word no document holds scores nothing: it comes last, not first. The
    same rule in both backends, so a memory moved from one to the other ranks a long
    message alike."""
    if len(words) <= MAX_QUERY_TERMS:
        return list(words)
    counts = [holders(word) for word in words]
    order = sorted(range(len(words)), key=lambda i: (counts[i] == 0, counts[i], i))
    return [words[i] for i in sorted(order[:MAX_QUERY_TERMS])]
