"""The memory tools say when the project files a memory cites changed since it was noted."""

from __future__ import annotations

from pathlib import Path

from memlane.engine.memory import manage
from memlane.engine.runtime import Runtime
from memlane.views.tools import Binding
from tests.support.gitrepo import git, make_repo
from tests.views.tools.conftest import call


async def test_search_and_get_carry_the_code_status(rt: Runtime, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\n"})
    binding = Binding(namespace=str(repo), via="mcp")
    fact = await manage.add_memory(rt, "The port is set in conf/app.toml", scope=f"ns:{repo}")
    before = await call(rt, binding, "memory_search", query="port conf/app.toml")
    assert "code: current] The port is set" in before.text
    got = await call(rt, binding, "memory_get", ids=[fact.id])
    assert "cites: conf/app.toml (noted " in got.text
    assert "code: current" in got.text

    (repo / "conf/app.toml").write_text("port = 2\n")
    git(repo, "commit", "-qam", "port")
    after = await call(rt, binding, "memory_search", query="port conf/app.toml")
    assert "code: changed; noted " in after.text
    assert "conf/app.toml has changed since (" in after.text
    got = await call(rt, binding, "memory_get", ids=[fact.id])
    assert "code: changed; noted " in got.text
