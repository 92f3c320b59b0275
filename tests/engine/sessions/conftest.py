"""A runtime over a real SQLite store, the real tokenizer and a scripted LLM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.text.tokens import BPETokenizer
from memlane.types import Message, Session
from tests.support.text import ScriptedLLM


@pytest.fixture
def make_rt(
    settings: Settings,
    sqlite_store: SQLiteStore,
    scripted_llm: ScriptedLLM,
    tokenizer: BPETokenizer,
) -> Any:
    def make(**overrides: Any) -> Runtime:
        return Runtime(
            settings.model_copy(update=overrides),
            sqlite_store,
            _llm=scripted_llm,
            _tokenizer=tokenizer,
        )

    return make


@pytest.fixture
def rt(make_rt: Any) -> Runtime:
    return make_rt()  # type: ignore[no-any-return]


REPO = "repo"
"""The namespace these sessions share: `@@` stays inside a namespace by default."""


def chat(
    store: SQLiteStore, key: str, texts: Sequence[str], *, namespace: str = REPO, **meta: Any
) -> Session:
    """A session of `namespace` whose transcript alternates user / assistant over `texts`."""
    session = store.ensure_session(key, namespace=namespace)
    roles = ("user", "assistant")
    store.append_messages(
        session.id,
        [NewMessage(Message(role=roles[i % 2], text=t), 1) for i, t in enumerate(texts)],
    )
    if meta:
        store.update_session(session.id, metadata=meta)
    found = store.get_session(session.id)
    assert found is not None
    return found
