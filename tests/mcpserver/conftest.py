"""A memlane home with memories and sessions in two namespaces, for MCP clients to open."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine.memory import manage
from memlane.engine.runtime import Runtime
from memlane.store import NewMessage, open_store
from memlane.types import Message

ROOT = Path(__file__).resolve().parents[2]
MEMLANE = ROOT / ".venv" / "bin" / "memlane"
INSPECTOR = ROOT / ".cache" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


@dataclass(frozen=True)
class Home:
    path: Path
    repo: Path
    """A git work tree named `myrepo`: `memlane mcp` started there binds its namespace, the
    repository's absolute path (`namespace`)."""
    namespace: str
    session_id: str


@pytest.fixture
async def home(tmp_path: Path) -> Home:
    path = tmp_path / "home"
    repo = tmp_path / "myrepo"
    (repo / ".git").mkdir(parents=True)
    namespace = str(repo.resolve())
    settings = Settings(home=path, embedding_backend="hashing")
    store = open_store(settings)
    try:
        rt = Runtime(settings, store)
        await manage.add_memory(
            rt, "The release train leaves on Thursdays", scope=f"ns:{namespace}"
        )
        await manage.add_memory(rt, "Project Falcon is secret", scope="ns:other")
        session = store.ensure_session("db-talk", namespace=namespace)
        texts = ["Which database for orders?", "We chose PostgreSQL for the orders service."]
        roles = ("user", "assistant")
        store.append_messages(
            session.id,
            [NewMessage(Message(role=roles[i % 2], text=t), 1) for i, t in enumerate(texts)],
        )
        store.update_session(
            session.id,
            metadata={"name": "orders-database", "description": "Picking the orders database"},
        )
        other = store.ensure_session("falcon", namespace="other")
        store.update_session(other.id, metadata={"name": "falcon-database"})
        await rt.background.drain()
    finally:
        store.close()
    return Home(path, repo, namespace, session.id)
