"""Processes sharing one SQLite file take turns on a kernel lock, not SQLite's busy handler.

The busy handler makes a writer that finds the file locked sleep up to 100 ms between
tries, so a process committing back to back kept the other out for over a second
(`benchmarks/two_writers.py`). The lock is a `flock` on `<db>.write-lock`, held exactly
while a transaction is: another open of that file (as another process makes) cannot
take it then, and can as soon as the transaction ends, committed or rolled back."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memlane.store.sqlite.store import SQLiteStore


@contextmanager
def other_process_view(path: Path) -> Iterator[int]:
    """The lock file opened anew: flock treats it as another holder, as a process would be."""
    fd = os.open(path.with_name(path.name + ".write-lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


def free(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def test_a_transaction_holds_the_file_lock_until_it_commits(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)
    try:
        with other_process_view(path) as fd:
            assert free(fd)
            with store.transaction():
                assert not free(fd)  # another process's writer would wait in the kernel
            assert free(fd)
    finally:
        store.close()


def test_a_transaction_that_fails_lets_the_file_lock_go(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)
    try:
        with other_process_view(path) as fd:
            with pytest.raises(RuntimeError), store.transaction():
                raise RuntimeError("the write failed")
            assert free(fd)
            with store.transaction():  # and this process can write again
                assert not free(fd)
    finally:
        store.close()
