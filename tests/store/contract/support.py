"""Builders the contract tests share: messages, entries, unit vectors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from memlane.store import (
    NewMessage,
    Store,
    Vector,
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
