"""The timeline builder: tool pairs, masked outputs, compactions with what they dropped."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memlane.engine.governance.ledger import (
    EVENT_COMPACTED,
    EVENT_DROPPED,
    EVENT_LOOP,
    EVENT_OFFLOADED,
)
from memlane.engine.turnlog import TURN_EVENT
from memlane.types import Event, Message, StoredMessage, ToolCall
from memlane.ui import timeline

START = datetime(2026, 1, 1, tzinfo=UTC)


def stored(position: int, message: Message) -> StoredMessage:
    return StoredMessage(
        id=100 + position,
        session_id="s",
        position=position,
        message=message,
        content_hash="",
        token_count=1,
        created_at=START + timedelta(seconds=position),
    )


def event(event_id: int, kind: str, seconds: float, **payload: object) -> Event:
    return Event(event_id, "s", kind, payload, "dropped text", START + timedelta(seconds=seconds))


def test_results_sit_under_their_call_and_masked_ones_link_their_output() -> None:
    call = Message(role="assistant", kind="tool_call", tool_calls=(ToolCall("c1", "run", "{}"),))
    messages = [
        stored(0, Message(role="user", text="go")),
        stored(1, call),
        stored(2, Message(role="tool", kind="tool_result", text="out", call_id="c1")),
        stored(3, Message(role="tool", kind="tool_result", text="orphan", call_id="c9")),
    ]
    items = timeline.build(messages, [event(1, EVENT_OFFLOADED, 2.5, call_id="c1")])
    assert [i.message.position for i in items if i.message] == [0, 1, 3]
    owner = items[1]
    assert [r.message.position for r in owner.results] == [2]
    assert owner.results[0].offload_id == 1
    assert items[2].results == []  # an orphan result stands alone


def test_a_compaction_gathers_what_it_dropped_and_the_tokens_after() -> None:
    items = timeline.build(
        [stored(0, Message(role="user", text="q"))],
        [
            event(1, EVENT_DROPPED, 1),
            event(2, EVENT_DROPPED, 1.1),
            event(3, EVENT_COMPACTED, 1.2, tokens_before=900, snapshot="s"),
            event(4, EVENT_LOOP, 1.3, tool="run", count=4),
            event(5, TURN_EVENT, 2, tokens_in=900, tokens_out=300),
        ],
    )
    kinds = [i.kind for i in items]
    assert kinds == ["message", "compaction", "event", "turn"]
    compaction = items[1]
    assert [e.id for e in compaction.dropped] == [1, 2]
    assert compaction.tokens_after == 300
    assert items[2].title == "loop warning"


def test_recalled_refs_are_collected_once() -> None:
    items = timeline.build(
        [],
        [
            event(1, TURN_EVENT, 1, recalled=[{"ref": "a"}, {"ref": "b"}]),
            event(2, TURN_EVENT, 2, recalled=[{"ref": "a"}]),
        ],
    )
    assert timeline.recalled_refs(items) == ["a", "b"]


def test_each_row_has_its_anchor_and_the_classes_the_page_styles_by() -> None:
    items = timeline.build(
        [
            stored(0, Message(role="user", text="q")),
            stored(1, Message(role="assistant", text="a", origin="summary")),
            replace(stored(2, Message(role="user", text="q")), status="superseded"),
        ],
        [
            event(1, EVENT_DROPPED, 2),  # no compaction record after it (an older memlane)
            event(2, TURN_EVENT, 3, status="failed"),
            event(3, EVENT_LOOP, 4, tool="run", count=4),
        ],
    )
    rows = [(i.anchor, i.classes) for i in items]
    assert rows == [
        ("m100", "msg role-user origin-client kind-message"),
        ("m101", "msg role-assistant origin-summary kind-message"),
        ("m102", "msg role-user origin-client kind-message status-superseded"),
        ("c1", "compaction"),
        ("e2", "turn failed"),
        ("e3", f"event kind-{EVENT_LOOP.replace('.', '-')}"),
    ]
