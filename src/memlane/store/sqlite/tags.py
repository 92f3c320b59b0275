"""The tags a SQLite search document carries beside its terms (its kind, scope and session).

Shared by the migrations that wrote them (`sqlite.schema`) and the indexing that writes
them now (`sqlite.index`, `sqlite.messages`).
"""

from __future__ import annotations

import functools
import hashlib


@functools.lru_cache(maxsize=4_096)  # a session's every message has the same three
def doc_tags(kind: str, scope: str, session_id: str | None) -> str:
    """Filter tokens stored beside a document's terms: `k<kind> s<scope hash> u<session hash>`.

    They made a scope or session filter part of the FTS5 match while FTS5 was the
    keyword index (m002-m010). The in-process index filters on the real columns, and
    counts these three tokens in a document's length so its BM25 stays FTS5's.
    """
    return f"k{kind} {scope_tag(scope)} {session_tag(session_id)}"


def scope_tag(scope: str) -> str:
    return "s" + hashlib.blake2b(scope.encode("utf-8"), digest_size=8).hexdigest()


def session_tag(session_id: str | None) -> str:
    return "u" + hashlib.blake2b((session_id or "").encode("utf-8"), digest_size=8).hexdigest()
