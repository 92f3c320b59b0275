"""The keyword analyser: text to index terms, the same for every backend and for queries.

Identifiers must be found exactly, so a token like `src/memlane/store.py`,
`snake_case_name`, `camelCaseName`, `E1234` or `v2.3.1` is indexed whole *and*
as its parts; plain words are lower-cased and lightly stemmed.
"""

from __future__ import annotations

import functools
import re

_TOKEN = re.compile(r"[\w][\w./\-:#@+]*[\w]|[\w]", re.UNICODE)
_PARTS = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    hers him his how i if in into is it its just me my no not of on or our ours she so than that
    the their them then there these they this those to too was we were what when where which who
    whom why will with would you your yours am im i'm it's""".split()
)


def stem(word: str) -> str:
    """A light English suffix stripper: enough to match plurals and tenses, never a name."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """Index terms of `text`, in order, duplicates kept (term frequency matters)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        parts = _split(token)
        lowered = token.lower()
        compound = len(parts) > 1
        if compound:
            out.append(lowered)
        for part in parts:
            if part in STOPWORDS:
                continue
            out.append(part if compound or not part.isalpha() else stem(part))
    return out


@functools.lru_cache(maxsize=200_000)
def _chunk_terms(chunk: str) -> str:
    return " ".join(terms(chunk))


def term_string(text: str) -> str:
    """`terms(text)` joined by spaces, memoised per whitespace-separated chunk.

    The analyser's tokens never span whitespace, so the terms of a text are the
    terms of its chunks in order; chat text repeats words, so the cache makes
    analysing it several times faster (a test pins the equivalence).
    """
    return " ".join(filter(None, map(_chunk_terms, text.split())))


@functools.lru_cache(maxsize=8_192)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of `text`, memoised per text: the memories entity-aware
    expansion reads come back query after query."""
    return frozenset(term_string(text).split())


def might_say(lowered: str, term: str) -> bool:
    """False when lower-cased text cannot have `term` among its terms: every term is a
    piece of a lower-cased token, cut short by `stem` (which may end it in `y`). A cheap
    test before `terms` (True does not mean it has it)."""
    return term in lowered or (term.endswith("y") and term[:-1] in lowered)


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, first occurrence order; through `term_string`'s memo of
    each whitespace-separated chunk (a user turn's words are mostly words seen before)."""
    return list(dict.fromkeys(term_string(text).split()))


def _split(token: str) -> list[str]:
    parts: list[str] = []
    for chunk in _PARTS.findall(token):
        pieces = _CAMEL.findall(chunk) if not chunk.islower() and not chunk.isupper() else [chunk]
        parts.extend(p.lower() for p in pieces if p)
    return parts
