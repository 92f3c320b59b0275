"""A fresh home is its user's alone: 0700 folders and 0600 files after a proxied turn and a
memory add, whatever umask the process started with."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from tests.engine.memory.test_through_proxy import memlane_calls
from tests.support.upstream import ProxyFactory, Reply, ScriptedUpstream, closing


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most users start with (022: new files readable by everyone)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def modes(home: Path) -> dict[str, int]:
    """Every path under `home` (and `home` itself, as `.`) with its permission bits."""
    found = {".": stat.S_IMODE(home.stat().st_mode)}
    for path in home.rglob("*"):
        if not path.is_symlink():
            found[str(path.relative_to(home))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_a_fresh_home_is_private_after_a_proxied_turn_and_a_memory_add(
    usual_umask: None, proxy_factory: ProxyFactory, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"))
    headers = {"X-Memlane-Session": "chat-a", "X-Memlane-Repo": "home"}
    sdk = closing(openai.OpenAI(base_url=proxy.url, api_key="sk-x", default_headers=headers))
    sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "I just married Anne!"}]
    )
    proxy.drain()
    home = proxy.settings.home_path
    os.umask(0o022)  # a CLI started later by the same user, with the usual umask again
    added = CliRunner().invoke(
        app,
        ["--home", str(home), "memory", "add", "Deploys go through staging-7"],
        env={"MEMLANE_EMBEDDING_BACKEND": "hashing"},
    )
    assert added.exit_code == 0, added.output

    found = modes(home)
    names = set(found)
    assert "memlane.db" in names
    assert "memlane.db-wal" in names
    assert any(name.endswith(".md") for name in names)  # memory and turn Markdown
    assert any("/objects/" in name for name in names)  # git objects
    assert any(name.endswith("meta.json") or name.endswith("admin_token") for name in names)
    shared = {name: oct(mode) for name, mode in found.items() if mode & 0o077}
    assert shared == {}
