"""A runtime over a real SQLite store and a scripted LLM, and helpers to call tools."""

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
from memlane.views.tools import Binding, ToolResult, call_tool
from tests.support.text import ScriptedLLM


@pytest.fixture
def rt(
    settings: Settings,
    sqlite_store: SQLiteStore,
    scripted_llm: ScriptedLLM,
    tokenizer: BPETokenizer,
) -> Runtime:
    return Runtime(
        settings.model_copy(update={"llm_model": "scripted"}),
        sqlite_store,
        _llm=scripted_llm,
        _tokenizer=tokenizer,
    )


async def call(rt: Runtime, binding: Binding, name: str, **arguments: Any) -> ToolResult:
    result = await call_tool(rt, binding, name, arguments)
    await rt.background.drain()
    return result


def chat(
    store: SQLiteStore, key: str, texts: Sequence[str], *, namespace: str, **meta: Any
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
