"""Facts over time, end to end on each store: "I live in Berlin" in January, "I moved to
Lisbon" in March, told through the library with a scripted LLM, then read back through the
library, the CLI, the Markdown files and git (SQLite) or an export (PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import Settings
from memlane.files.memory_files import MemoryFiles
from memlane.memory import Memory
from tests.support.text import ScriptedLLM

JAN = datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
FEB = "2026-02-15"
MAR = datetime(2026, 3, 10, 18, 0, tzinfo=UTC)
BERLIN = "The user lives in Berlin"
LISBON = "The user lives in Lisbon"
OCEANARIUM = "The user went to the Oceanarium yesterday"


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    return Settings(
        home=tmp_path / "home", store_url=url, embedding_backend="hashing", memory_git=True
    )


@pytest.fixture
def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MEMLANE_HOME", str(settings.home))
    monkeypatch.setenv("MEMLANE_EMBEDDING_BACKEND", "hashing")
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "MEMLANE_STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()
    store = ["--store-url", settings.store_url] if settings.store_url else []

    def run(*args: str) -> Any:
        result = runner.invoke(app, [*store, *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout) if "--json" in args else result.stdout

    return run


def tell_berlin_then_lisbon(settings: Settings) -> ScriptedLLM:
    llm = ScriptedLLM(
        [
            json.dumps([BERLIN]),  # extraction; nothing known yet: added without asking
            "Lives in Berlin.",  # the rolling summary
            json.dumps([LISBON]),  # extraction; Berlin is its neighbour: reconciliation
            json.dumps([{"event": "UPDATE", "id": "0", "text": LISBON}]),
            "Lives in Lisbon.",
            json.dumps(["The user went to the Oceanarium yesterday"]),  # left relative
            json.dumps([{"event": "NONE", "id": "0"}, {"event": "ADD", "text": OCEANARIUM}]),
            "Lives in Lisbon; went to the Oceanarium.",
        ]
    )
    with Memory(settings, llm=llm) as memory:
        memory.remember("I live in Berlin", conversation="c1", namespace="me", at=JAN)
        report = memory.remember("I moved to Lisbon", conversation="c1", namespace="me", at=MAR)
        assert (report.facts_added, report.facts_updated) == ([LISBON], 1)
        memory.remember(
            "Went to the Oceanarium yesterday!", conversation="c1", namespace="me", at=MAR
        )
    assert "EXISTING" in llm.prompts[3]
    assert BERLIN in llm.prompts[3]
    assert not llm.answers  # every scripted answer was asked for
    return llm


def test_berlin_then_lisbon(settings: Settings, cli: Any) -> None:
    tell_berlin_then_lisbon(settings)
    with Memory(settings) as memory:
        # now: Lisbon only; February: Berlin only
        now = memory.search("who lives where", scopes=["ns:me"])
        assert [h.text for h in now] == [LISBON]
        assert (now[0].valid_from, now[0].valid_to) == (MAR, None)
        then = memory.search("who lives where", scopes=["ns:me"], as_of=_at(FEB))
        assert [(h.text, h.valid_from, h.valid_to) for h in then] == [(BERLIN, JAN, MAR)]

        # history: both versions, the March boundary shared, linked both ways
        berlin_id = then[0].id
        versions = memory.history(now[0].id)
        assert [(v.text, v.valid_from, v.valid_to) for v in versions] == [
            (BERLIN, JAN, MAR),
            (LISBON, MAR, None),
        ]
        assert (versions[0].replaced_by, versions[1].supersedes) == (now[0].id, berlin_id)
        assert memory.history(berlin_id) == versions

        # a relative date, resolved against the message's date
        trip = memory.search("Oceanarium", scopes=["ns:me"])
        assert [h.text for h in trip] == ["The user went to the Oceanarium on 2026-03-09"]

        # what recall injects: now, Lisbon alone; asked about change, both, with intervals
        ask = [{"role": "user", "content": "Where does the user live?"}]
        block = memory.augment(ask, namespace="me")[0]["content"]
        assert f"[memory] {LISBON}" in block
        assert "Berlin" not in block
        before = [{"role": "user", "content": "Where did the user live before?"}]
        block = memory.augment(before, namespace="me")[0]["content"]
        assert f"[memory, 2026-01-15 → 2026-03-10, replaced] {BERLIN}" in block
        assert f"[memory, since 2026-03-10] {LISBON}" in block

    # the CLI says the same
    found = cli("memory", "search", "who lives where", "--scope", "ns:me", "--json")
    assert [f["text"] for f in found] == [LISBON]
    found = cli("memory", "search", "who lives where", "--scope", "ns:me", "--as-of", FEB, "--json")
    assert [(f["text"], f["valid_to"]) for f in found] == [(BERLIN, MAR.isoformat())]
    history = cli("memory", "history", berlin_id[:8], "--json")
    assert [(h["text"], h["valid_from"], h["valid_to"], h["current"]) for h in history] == [
        (BERLIN, JAN.isoformat(), MAR.isoformat(), False),
        (LISBON, MAR.isoformat(), None, True),
    ]
    table = cli("memory", "history", berlin_id)
    assert "2026-01-15 → 2026-03-10" in table
    assert "since 2026-03-10" in table

    # the Markdown files (SQLite: the truth; PostgreSQL: an export) say the same
    if settings.store_url:
        tree = settings.home / "export"
        cli("memory", "export", str(tree))
    else:
        tree = settings.memory_path
    files = MemoryFiles(tree)
    on_disk = {e.fact.text: e for e in map(files.read, files.scan()) if e.fact.role == "memory"}
    berlin, lisbon = on_disk[BERLIN], on_disk[LISBON]
    assert (berlin.fact.valid_from, berlin.fact.valid_to) == (JAN, MAR)
    assert (berlin.fact.replaced_by, lisbon.fact.supersedes) == (lisbon.fact.id, berlin.fact.id)
    assert (lisbon.fact.valid_from, lisbon.fact.valid_to, berlin.fact.deleted) == (MAR, None, False)
    if settings.store_url:
        return

    # git: everything committed, the files as committed, the log telling the change
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, check=True)
        return done.stdout

    assert git("status", "--porcelain") == ""
    relative = berlin.path.relative_to(tree).as_posix()
    assert git("show", f"HEAD:{relative}") == berlin.path.read_text()
    log = git("log", "--format=%B", "--", relative)
    assert f"+ {BERLIN}" in log
    assert f"- {BERLIN} (2026-01-15 → 2026-03-10, replaced)" in log
    assert f"+ {LISBON}" in log


def _at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)
