"""A document's terms, analysed a line at a time: the same terms, each turn's text once."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlane.store import SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite import index as module
from memlane.store.sqlite.index import LINE_CHARS_KEPT, document_terms, index_terms
from memlane.types import Fact

PIECES = [
    "the", "Proxy", "stores", "every_turn", "src/app/main.py", "E1234", "v2.3.1",
    "parseConfigFile", "running's", "naïve", "42", "ünïcode", "x\x0bY", "a\x1cb", "w\u2028v",
    " ", "  ", "\t", "\n", "\r\n", "\n\n",
]  # fmt: skip


def test_a_documents_terms_are_those_of_the_whole_text() -> None:
    rng = random.Random(7)
    for _ in range(2_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))
        assert document_terms(text) == index_terms(text), repr(text)
    long = "words of a long line " * (LINE_CHARS_KEPT // 10)
    assert document_terms(f"8 May 2024\n{long}\n\nshort") == index_terms(
        f"8 May 2024\n{long}\nshort"
    )


def _turn(i: int, text: str) -> Fact:
    at = datetime(2024, 5, 8, 9, 0, tzinfo=UTC) + timedelta(minutes=i)
    return Fact(f"t{i}", "conv:c", "c", ("user", "assistant")[i % 2], text, at, at)


def test_a_batch_of_turns_analyses_each_text_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each turn's text is in five documents (its own, twice, and three neighbours'):
    indexing a conversation's turns analyses each text once, not once per document."""
    texts = [f"turn {i} talks about the parser and the deploy script number {i}" for i in range(8)]
    analysed: list[str] = []
    real = module.index_terms

    def counted(text: str) -> Any:
        analysed.append(text)
        return real(text)

    module._kept_line_terms.cache_clear()
    monkeypatch.setattr(module, "index_terms", counted)
    store = SQLiteStore(tmp_path / "memlane.db")
    store.put_facts([_turn(i, text) for i, text in enumerate(texts)])
    assert sum(len(t) for t in analysed) < 1.5 * sum(len(t) for t in texts)
    found = store.keyword_search("parser", SearchFilter(), limit=20)
    assert sorted(hit.ref for hit in found) == [f"t{i}" for i in range(8)]
    store.close()
