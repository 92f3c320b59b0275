"""Recall embeds the user's prompt in front of the response; a tool loop must pay for it once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memlane.engine.retrieval import search as search_module
from memlane.engine.retrieval.search import QUERY_MEMO_SIZE, embed_query
from memlane.text.embeddings import HashingEmbedder


class CountingEmbedder:
    """The real hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.calls: list[str] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.extend(texts)
        return self.inner.embed(texts)


def test_the_same_prompt_is_embedded_once() -> None:
    embedder = CountingEmbedder()
    first = embed_query(embedder, "fix the failing build in src/app.py (memo test)")
    again = embed_query(embedder, "fix the failing build in src/app.py (memo test)")
    assert embedder.calls == ["fix the failing build in src/app.py (memo test)"]
    assert np.array_equal(first, again)
    assert np.allclose(
        first, embedder.inner.embed(["fix the failing build in src/app.py (memo test)"])[0]
    )


def test_the_memo_is_bounded_and_keyed_by_model() -> None:
    embedder = CountingEmbedder()
    for i in range(QUERY_MEMO_SIZE + 10):
        embed_query(embedder, f"bounded memo query {i}")
    assert len(search_module._query_memo) <= QUERY_MEMO_SIZE
    embed_query(embedder, "bounded memo query 0")
    assert embedder.calls.count("bounded memo query 0") == 2
