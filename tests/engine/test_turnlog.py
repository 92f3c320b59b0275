"""The turn record: what a person reads about each turn, and what it adds to the day."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memlane.config import Settings
from memlane.engine import turnlog
from memlane.engine.turn import Answer, RecallNote, Turn
from memlane.proxy.identity import client_name
from memlane.store.sqlite import SQLiteStore


def a_turn(**fields: object) -> Turn:
    return Turn(key="k", namespace="n", model="gpt-x", wire="chat", messages=[], **fields)  # type: ignore[arg-type]


def test_the_payload_has_usage_cost_governance_and_recall_scores(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, upstream_price_input=2.0, upstream_price_output=8.0)
    turn = a_turn(client="codex_cli_rs/0.169.0")
    turn.governed_tokens = (9_000, 3_000)
    turn.context = (3_000, 8_000, True)
    turn.recalled = (RecallNote("f1", "global", 3.25, None, 0.81),)
    payload = turnlog.turn_payload(
        settings, turn, Answer([], prompt_tokens=1_000, completion_tokens=100)
    )
    assert payload == {
        "status": "ok",
        "model": "gpt-x",
        "client": "codex_cli_rs/0.169.0",
        "wire": "chat",
        "prompt_tokens": 1_000,
        "completion_tokens": 100,
        "cost_usd": 0.0028,
        "tokens_in": 9_000,
        "tokens_out": 3_000,
        "limit": 8_000,
        "compacted": True,
        "recalled": [
            {"ref": "f1", "scope": "global", "keyword": 3.25, "dense": None, "score": 0.81}
        ],
    }
    assert turnlog.turn_counts(payload) == {
        turnlog.REQUESTS: 1,
        turnlog.FAILED: 0,
        turnlog.PROMPT_TOKENS: 1_000,
        turnlog.COMPLETION_TOKENS: 100,
        turnlog.COMPACTIONS: 1,
        turnlog.COST_MICRO_USD: 2_800,
        turnlog.GOVERNED_IN: 9_000,
        turnlog.GOVERNED_OUT: 3_000,
        turnlog.RECALL_TURNS: 1,
        turnlog.RECALL_HITS: 1,
    }


def test_a_failed_ungoverned_turn_counts_as_a_failed_request(tmp_path: Path) -> None:
    payload = turnlog.turn_payload(Settings(home=tmp_path), a_turn(), Answer([], failed=True))
    assert payload["status"] == "failed"
    assert "tokens_in" not in payload
    counts = turnlog.turn_counts(payload)
    assert counts[turnlog.FAILED] == 1
    assert counts[turnlog.RECALL_TURNS] == 0
    assert turnlog.GOVERNED_IN not in counts


def test_record_turn_writes_the_event_and_the_days_counters(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    try:
        turn = a_turn()
        turn.session = store.ensure_session("k")
        turnlog.record_turn(store, Settings(home=tmp_path), turn, Answer([], prompt_tokens=5))
        turnlog.record_turn(store, Settings(home=tmp_path), turn, Answer([], prompt_tokens=7))
        events = store.list_events(turn.session.id, kind=turnlog.TURN_EVENT)
        assert [e.payload["prompt_tokens"] for e in events] == [5, 7]
        today = store.daily_counts(since=turnlog.today())[turnlog.today()]
        assert today[turnlog.REQUESTS] == 2
        assert today[turnlog.PROMPT_TOKENS] == 12
    finally:
        store.close()


def test_the_day_is_the_utc_date() -> None:
    assert turnlog.today(datetime(2026, 3, 1, 23, 30, tzinfo=UTC)) == "2026-03-01"


def test_the_client_is_the_user_agents_first_word_printable_and_bounded() -> None:
    assert client_name({"user-agent": "codex_cli_rs/0.169.0 (Debian 12; x86_64)"}) == (
        "codex_cli_rs/0.169.0"
    )
    assert client_name({"user-agent": "OpenAI/Python 3.54.0"}) == "OpenAI/Python"
    assert client_name({}) == ""
    assert client_name({"user-agent": "evil\x1b[31m" + "x" * 200}) == ("evil[31m" + "x" * 200)[:60]
