"""`memlane sessions compact` and `sessions output` on a real store and scripted upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import Settings
from memlane.engine.governance.ledger import EVENT_OFFLOADED, PLAN_STATE, outputs_folder
from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message, Session, ToolCall
from tests.support.upstream import Fail, Reply, ScriptedUpstream


@pytest.fixture
def runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: ScriptedUpstream
) -> CliRunner:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    monkeypatch.setenv("MEMLANE_LLM_BASE_URL", upstream.url)
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "OPENAI_API_KEY", "MEMLANE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "memlane.db")
    yield opened
    opened.close()


def long_session(store: SQLiteStore) -> Session:
    session = store.ensure_session("work")
    items = [Message("user", "Build the importer; data lives in data/raw.csv.")]
    items.append(Message("assistant", "Starting with data/raw.csv."))
    for step in range(12):
        call = ToolCall(f"c{step}", "run", json.dumps({"step": step}))
        items.append(Message("assistant", "", "tool_call", (call,)))
        items.append(Message("tool", f"output {step} " * 50, "tool_result", call_id=f"c{step}"))
    store.append_messages(session.id, [NewMessage(m, 10) for m in items])
    return session


def invoke(runner: CliRunner, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_compact_summarises_with_the_named_model_and_keeps_a_plan(
    runner: CliRunner, store: SQLiteStore, upstream: ScriptedUpstream
) -> None:
    session = long_session(store)
    upstream.script(Reply(text="<state_snapshot>importer; data/raw.csv</state_snapshot>"))
    code, out, err = invoke(runner, "sessions", "compact", "work", "--model", "m1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["object"], data["session_id"]) == ("memlane.compaction", session.id)
    assert data["snapshot"] == "importer; data/raw.csv"
    assert data["dropped"] > 0
    assert data["tokens_after"] < data["tokens_before"]
    request = upstream.model_requests[-1].json
    assert request["model"] == "m1"
    assert "tools" not in request
    assert PLAN_STATE in store.get_state(session.id)


def test_a_failing_summariser_changes_nothing_and_says_why(
    runner: CliRunner, store: SQLiteStore, upstream: ScriptedUpstream
) -> None:
    session = long_session(store)
    upstream.script(Fail(500))
    code, _, err = invoke(runner, "sessions", "compact", "work", "--model", "m1")
    assert code == 1
    assert "summariser (m1) failed" in err
    assert "500" in err  # the summariser's own error, not a guess at its cause
    assert "Traceback" not in err
    assert PLAN_STATE not in store.get_state(session.id)


def test_a_summary_larger_than_what_it_replaces_is_refused_and_said_so(
    runner: CliRunner, store: SQLiteStore, upstream: ScriptedUpstream
) -> None:
    session = long_session(store)
    upstream.script(Reply(text="<state_snapshot>" + "details " * 4000 + "</state_snapshot>"))
    code, _, err = invoke(runner, "sessions", "compact", "work", "--model", "m1")
    assert code == 1
    assert "was not smaller than" in " ".join(err.split())
    assert PLAN_STATE not in store.get_state(session.id)


def test_compact_without_any_model_is_a_clear_error(runner: CliRunner, store: SQLiteStore) -> None:
    long_session(store)
    code, _, err = invoke(runner, "sessions", "compact", "work")
    assert code == 1
    assert "no model" in err


def test_offloaded_outputs_are_listed_and_printed_in_full(
    runner: CliRunner, store: SQLiteStore, tmp_path: Path
) -> None:
    session = store.ensure_session("o")
    path = outputs_folder(Settings(home=tmp_path), session) / "abc.txt"
    path.parent.mkdir(parents=True)
    path.write_text("the whole output", encoding="utf-8")
    event = store.add_event(
        session.id, EVENT_OFFLOADED, {"name": "grep", "chars": 16, "path": str(path)}
    )
    code, out, _ = invoke(runner, "sessions", "output", "o", "--json")
    assert code == 0
    assert json.loads(out)[0]["id"] == event.id
    code, out, _ = invoke(runner, "sessions", "output", "o", str(event.id))
    assert (code, out) == (0, "the whole output")
    code, _, err = invoke(runner, "sessions", "output", "o", "999")
    assert code == 1
    assert "no offloaded tool output 999" in err
