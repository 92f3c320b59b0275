"""Entity-aware expansion: memories that share a rare word with the best hits come along.

A question about someone or something often finds one memory that names it
("Caroline moved from her home country four years ago") while the answer sits in
another memory that names it too ("my grandma in Sweden gave me this necklace,
back in my home country") but shares no word with the question. A rare word —
a name, a place, an identifier, an unusual noun — that the best hit and another
memory both say is a link between them, found with no model:

1. the `seeds` best candidates (after fusion) give their words (`seed_words`);
2. the store says which memories the request may see hold each word, for the
   words held by at most `MAX_HOLDERS` of them (and at most `MAX_SHARE` of them),
   rarest first, reading at most `MAX_READ` documents (`SearchIndex.rare_term_hits`);
3. a memory whose own text says a rare word of a seed gets `weight` × that seed's
   relevance added to its own (0 when the first stage did not find it), the best
   such link counting; the batch is then scaled to [0, 1] again (`fuse.min_max`) and
   cut back to its size, so the later stages do the work they did before.

Only a memory's own text links it (a turn's document also holds its neighbours'
words, which would link every turn around a mention). Measured on LoCoMo dev,
leave-one-conversation-out (`benchmarks/retrieval_experiments.py`, README): up
in every category, knobs (2 seeds, 20 holders, weight 0.2) chosen alike in every fold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.fuse import min_max
from memlane.store.analysis import term_set
from memlane.types import DocKind, Hit

SEEDS = 2
"""How many of the best candidates link others."""
MAX_HOLDERS = 20
"""A word held by more documents (of those the request may see) is not rare."""
MAX_SHARE = 0.1
"""Nor by more than this share of them: in a handful of memories no word is rare (in three
facts about "the user", "user" would link them all). From 200 visible documents on,
`MAX_HOLDERS` is the tighter bound: LoCoMo's conversations (369 to 680 turns) do not test
this one."""
MAX_READ = 256
"""Documents read per request at most, rarest words first: a bound on the worst case however
many rare words the seeds say. On LoCoMo dev a request reads 91 on average and the bound
changes nothing; tighter ones (64 to 200) lowered the held-out figures."""
WEIGHT = 0.2
"""What a link adds, times the seed's relevance (relevance is in [0, 1])."""


def seed_words(candidates: Sequence[Candidate], seeds: int = SEEDS) -> list[str]:
    """The distinct words of the best `seeds` candidates' own texts, best seed first."""
    words: dict[str, None] = {}
    for candidate in candidates[:seeds]:
        words.update(dict.fromkeys(sorted(term_set(candidate.text))))
    return list(words)


def expand(
    candidates: Sequence[Candidate],
    holders: Mapping[str, Sequence[Hit]],
    *,
    seeds: int = SEEDS,
    weight: float = WEIGHT,
) -> list[Candidate]:
    """`candidates` (fused, best first) with the memories linked to the seeds lifted or
    added; `holders` maps each rare word to the documents whose own text says it
    (`SearchIndex.rare_term_hits`). Best first, relevance scaled to [0, 1], as many as
    came in (the later stages' work stays that of the first stage's pool); unchanged
    when nothing links."""
    if not candidates or not holders or weight <= 0:
        return list(candidates)
    bonus: dict[tuple[DocKind, str], float] = {}
    linked: dict[tuple[DocKind, str], Hit] = {}
    for seed in candidates[:seeds]:
        lift = weight * seed.relevance
        for word in term_set(seed.text) & holders.keys():
            for hit in holders[word]:
                key = (hit.kind, hit.ref)
                if key != seed.key and lift > bonus.get(key, 0.0):
                    bonus[key] = lift
                    linked[key] = hit
    if not bonus:
        return list(candidates)
    known = {c.key: c for c in candidates}
    keys = [*known, *(k for k in linked if k not in known)]
    raw = [(known[k].relevance if k in known else 0.0) + bonus.get(k, 0.0) for k in keys]
    scaled = dict(zip(keys, min_max(raw), strict=True))
    best = sorted(keys, key=lambda k: -scaled[k])[: len(candidates)]  # stable: ties keep order
    return [_scored(known.get(k) or _candidate(linked[k]), scaled[k]) for k in best]


def _candidate(hit: Hit) -> Candidate:
    """A memory no first-stage list found, brought by a link."""
    return Candidate(
        hit.kind, hit.ref, hit.scope, hit.session_id, hit.text, hit.created_at, role=hit.role
    )


def _scored(c: Candidate, relevance: float) -> Candidate:
    """`c` with a new relevance (and score); itself when nothing changes."""
    if c.relevance == relevance == c.score:
        return c
    return c.scored(relevance, relevance)
