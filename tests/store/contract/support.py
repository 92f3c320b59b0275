"""Builders the contract tests share: messages, entries, unit vectors, a store probe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from memlane.store import (
    NewMessage,
    Store,
    Vector,
    message_log,
)
from memlane.types import Fact, Message

MODEL = "test-model"


def user(text: str) -> NewMessage:
    return NewMessage(Message(role="user", text=text, wire="chat"), token_count=len(text.split()))


def assistant(text: str) -> NewMessage:
    return NewMessage(Message(role="assistant", text=text, wire="chat"))


def texts(store: Store, session_id: str, **kwargs: bool) -> list[str]:
    return [m.message.text for m in store.list_messages(session_id, **kwargs)]


def fact(
    fact_id: str,
    text: str,
    *,
    scope: str = "repo-a",
    conversation_id: str = "conv",
    role: str = "memory",
    minutes: int = 0,
) -> Fact:
    stamp = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return Fact(
        id=fact_id,
        scope=scope,
        conversation_id=conversation_id,
        role=role,  # type: ignore[arg-type]
        text=text,
        created_at=stamp,
        updated_at=stamp,
        content_hash=f"h-{fact_id}",
    )


def unit(seed: int, dim: int = 16) -> Vector:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def stored_rows_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many stored client messages each `sync_messages` from now on reads: those its
    session's digest does not stand for, or all of them when the digest does not match."""
    counts: list[int] = []
    hold, whole = message_log.hold_history, message_log.client_history

    def held(db: Any, session_id: str, **kwargs: Any) -> message_log.History:
        history = hold(db, session_id, **kwargs)
        if kwargs.get("with_stored"):
            counts.append(len(history.stored))
        return history

    def read_whole(db: Any, session_id: str) -> tuple[list[int], list[str]]:
        ids, hashes = whole(db, session_id)
        counts[-1] += len(hashes)
        return ids, hashes

    monkeypatch.setattr(message_log, "hold_history", held)
    monkeypatch.setattr(message_log, "client_history", read_whole)
    return counts
