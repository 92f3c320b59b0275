"""The `store` fixture the contract suite runs against, once per backend in STORE_BACKENDS.

To run the suite on another backend, add its name to STORE_BACKENDS and a
branch to `open_backend` that returns a fresh, empty store of that kind (for
PostgreSQL: `PostgresStore(url)` on a fresh database or schema, e.g. from a
`pg_url` fixture in tests/support/pg.py, fetched with `request.getfixturevalue`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memlane.store import Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore

STORE_BACKENDS = ["sqlite", "postgres"]

StoreFactory = Callable[[], Store]


def open_backend(name: str, request: pytest.FixtureRequest, folder: Path) -> Store:
    """A fresh, empty store of backend `name`; `folder` is a new empty directory."""
    if name == "sqlite":
        return SQLiteStore(folder / "memlane.db")
    if name == "postgres":
        return PostgresStore(request.getfixturevalue("pg_new_database")())
    raise ValueError(f"no test hook for store backend {name!r}")


@pytest.fixture(params=STORE_BACKENDS)
def store_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StoreFactory]:
    """Opens any number of fresh stores of one backend; closes them at the end of the test."""
    opened: list[Store] = []

    def make() -> Store:
        store = open_backend(request.param, request, tmp_path_factory.mktemp("store"))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    """A fresh, empty store of the backend under test."""
    return store_factory()
