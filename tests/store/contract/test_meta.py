"""Small key/value facts about the store.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

from memlane.store import (
    MetaStore,
    Store,
)


def test_meta_set_and_get(store: Store) -> None:
    assert store.get_meta("embedding_model") is None
    store.set_meta("embedding_model", "a")
    store.set_meta("embedding_model", "b")
    assert store.get_meta("embedding_model") == "b"


def test_backend_plays_the_meta_store_role(store: Store) -> None:
    assert isinstance(store, MetaStore)


def test_claim_meta_keeps_the_first_value(store: Store) -> None:
    assert store.claim_meta("salt", "first") == "first"
    assert store.claim_meta("salt", "second") == "first"
    assert store.get_meta("salt") == "first"
