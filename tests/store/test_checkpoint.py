"""WAL checkpoints run in the store's background thread, not in the committing write."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore, checkpoint
from memlane.types import Message


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_the_wal_is_checkpointed_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "WAL_CHECKPOINT_BYTES", 64 * 1024)
    monkeypatch.setattr(checkpoint, "CHECK_EVERY", 4)
    store = SQLiteStore(tmp_path / "memlane.db")
    try:
        database = tmp_path / "memlane.db"
        size_before = database.stat().st_size
        session = store.ensure_session("s")
        for i in range(40):
            text = f"message {i}: " + "words to index " * 40
            store.append_messages(session.id, [NewMessage(Message(role="user", text=text), 1)])
        # commits never checkpoint themselves (that would grow the file at once);
        # the store's thread copies the WAL into the database file soon after
        assert wait_for(lambda: store.checkpointer.checkpoints >= 1)
        assert wait_for(lambda: database.stat().st_size > size_before)
        assert len(store.list_messages(session.id)) == 40
    finally:
        store.close()
    assert store.checkpointer.started
    assert not store.checkpointer.running  # closing the store ends the thread


def test_a_store_that_writes_little_starts_no_thread(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    store.ensure_session("s")
    assert not store.checkpointer.started
    store.close()
