"""A fact ranks above the turns that merely echo it.

A remembered turn is indexed with its own words twice and its neighbours' words
(`store.documents`), which is what finds "Yes, last Tuesday!" for a question about
the trip it answers. The same padding makes a turn outscore a short fact on the
fact's own words: for "prefers tabs", the user's "I prefer tabs." and the
assistant's "Noted: you prefer tabs." both beat "The user prefers tabs", the entry
distilled from them, which is what a person (and the model) should read first.

So a fact takes the relevance of the best turn that echoes it, and goes just
above it. A turn echoes a fact when it says most of the fact's words (the fact's
third-person "user" aside). Nothing is dropped: the turns still come, after the
fact. Turns alone (an evaluation of conversations with no extracted facts) are
ranked exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.engine.retrieval.candidates import Candidate
from memlane.store.analysis import term_set

TURN_ROLES = frozenset({"user", "assistant"})
FACT_ROLES = frozenset({"memory"})
ECHO_SHARE = 0.6
"""Share of a fact's words a turn must say to echo it: "I prefer tabs" says both words of
"The user prefers tabs"; "My wife is Anne" says two of three of "The user's wife is
named Anne"."""
_ABOUT = frozenset({"user", "s"})
"""Words every extracted fact has ("The user's …") and a turn, in the first person, lacks."""


def facts_over_echoes(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates best first, each fact lifted to the best turn echoing it."""
    facts = [c for c in candidates if c.role in FACT_ROLES]
    if not facts or not any(c.role in TURN_ROLES for c in candidates):
        return list(candidates)
    turns = [(c, term_set(c.text)) for c in candidates if c.role in TURN_ROLES]
    lifted: dict[tuple[str, str], Candidate] = {}
    for fact in facts:
        words = term_set(fact.text) - _ABOUT
        if not words:
            continue
        echoes = [t.relevance for t, said in turns if _share(words, said) >= ECHO_SHARE]
        best = max(echoes, default=0.0)
        if best > fact.relevance:
            lifted[fact.key] = fact.scored(best, max(fact.score, best))
    if not lifted:
        return list(candidates)
    out = [lifted.get(c.key, c) for c in candidates]
    # A fact before a turn of the same relevance; otherwise the order stays as it was.
    return sorted(out, key=lambda c: (-c.relevance, c.role not in FACT_ROLES))


def _share(words: frozenset[str], said: frozenset[str]) -> float:
    return len(words & said) / len(words)
