"""The Anthropic Messages adapter on its own: blocks to items and back, the stream's reader."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from memlane.engine.governance.structure import first_run_end, safe_cuts
from memlane.proxy.wire import MESSAGES
from memlane.proxy.wire.base import WireError
from memlane.types import Message

SIG = "EqQBCkYIBxgCKkB…signature"


def conversation() -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nContext.\n</system-reminder>"},
                {"type": "text", "text": "List the files.", "cache_control": {"type": "ephemeral"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "ls it", "signature": SIG},
                {"type": "redacted_thinking", "data": "ENC=="},
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "pwd"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "a.py b.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "/repo"}],
                    "is_error": False,
                },
                {"type": "text", "text": "Now summarise."},
            ],
        },
        {"role": "assistant", "content": "Two files in /repo."},
        {"role": "user", "content": "Thanks"},
    ]


def body(messages: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 99,
        "messages": messages or conversation(),
        **extra,
    }


def test_each_block_is_an_item_and_later_blocks_continue_their_message() -> None:
    parsed = MESSAGES.parse(body(system="Be brief.", tools=[{"name": "Bash"}]))
    rows = [(m.role, m.kind, m.text, m.continues) for m in parsed.messages]
    assert rows == [
        ("system", "message", "<system-reminder>\nContext.\n</system-reminder>", False),
        ("user", "message", "List the files.", True),
        ("assistant", "reasoning", "ls it", False),
        ("assistant", "reasoning", "", True),
        ("assistant", "message", "Listing.", True),
        ("assistant", "tool_call", "", True),
        ("assistant", "tool_call", "", True),
        ("tool", "tool_result", "a.py b.py", False),
        ("tool", "tool_result", "/repo", True),
        ("user", "message", "Now summarise.", True),
        ("assistant", "message", "Two files in /repo.", False),
        ("user", "message", "Thanks", False),
    ]
    calls = [c for m in parsed.messages for c in m.tool_calls]
    assert [(c.id, json.loads(c.arguments)) for c in calls] == [
        ("toolu_a", {"command": "ls"}),
        ("toolu_b", {"command": "pwd"}),
    ]
    assert [m.call_id for m in parsed.messages if m.kind == "tool_result"] == ["toolu_a", "toolu_b"]
    assert "Be brief." in parsed.instructions
    assert '"Bash"' in parsed.instructions


def test_unchanged_items_render_back_to_exactly_the_messages_sent() -> None:
    sent = body(system=[{"type": "text", "text": "x-anthropic-billing-header: v=1;"}])
    parsed = MESSAGES.parse(json.loads(json.dumps(sent)))
    assert MESSAGES.render(parsed, list(parsed.messages)) == sent


def test_a_cut_never_falls_inside_a_message() -> None:
    items = MESSAGES.parse(body()).messages
    cuts = safe_cuts(items)
    starts = [0, 2, 7, 10, 11, 12]  # where each wire message begins, and the end
    assert [i for i, ok in enumerate(cuts) if ok] == [0, 2, 10, 11, 12]
    assert {i for i, ok in enumerate(cuts) if ok} <= set(starts)
    # the head ends after the first text answer that closes its turn (not mid-tool-loop)
    assert first_run_end(items, cuts) == 11


def text(body: str, origin: Any = "summary") -> Message:
    return Message("user", body, origin=origin)


def test_memlanes_text_goes_after_tool_results_never_before_or_between() -> None:
    items = MESSAGES.parse(body()).messages
    # before the tool results' message (right after the assistant's tool_use turn)
    rendered = MESSAGES.render(MESSAGES.parse(body()), [*items[:7], text("S"), *items[7:]])
    results = rendered["messages"][2]["content"]
    assert [b.get("type") for b in results] == ["tool_result", "tool_result", "text", "text"]
    assert results[2] == {"type": "text", "text": "S"}
    # between two tool results of one message
    rendered = MESSAGES.render(MESSAGES.parse(body()), [*items[:8], text("M"), *items[8:]])
    assert [b.get("text", b["type"]) for b in rendered["messages"][2]["content"]] == [
        "tool_result",
        "tool_result",
        "M",
        "Now summarise.",
    ]
    # at the end after an assistant turn: a user turn of its own
    rendered = MESSAGES.render(MESSAGES.parse(body()), [*items[:11], text("E", "recall")])
    assert rendered["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "E"}]}
    # at the end after a user turn whose content is a string: joined into it
    rendered = MESSAGES.render(MESSAGES.parse(body()), [*items, text("L", "state")])
    assert rendered["messages"][-1]["content"] == [
        {"type": "text", "text": "Thanks"},
        {"type": "text", "text": "L"},
    ]


def test_a_masked_tool_result_is_rebuilt_with_its_id() -> None:
    parsed = MESSAGES.parse(body())
    items = list(parsed.messages)
    items[7] = items[7].with_text("[memlane: trimmed] a.py…")
    rendered = MESSAGES.render(parsed, items)
    assert rendered["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_a",
        "content": "[memlane: trimmed] a.py…",
    }
    assert rendered["messages"][2]["content"][1:] == conversation()[2]["content"][1:]


def test_items_from_another_wire_format_are_rendered_as_blocks() -> None:
    parsed = MESSAGES.parse(body([{"role": "user", "content": "go"}]))
    from memlane.types import ToolCall

    items = [
        Message("developer", "instructions", wire="responses"),
        Message("user", "go", wire="chat"),
        Message("assistant", "", "tool_call", (ToolCall("c1", "f", '{"a": 1}'),), wire="chat"),
        Message("tool", "42", "tool_result", call_id="c1", wire="chat"),
        Message("assistant", "thinking", "reasoning", wire="responses"),
        Message("assistant", "done", wire="chat"),
    ]
    assert MESSAGES.render(parsed, items)["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "instructions"}, {"type": "text", "text": "go"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "42"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([], "messages"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": ["text"]}], "messages[0].content[0]"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "messages[0].content[0]"),
    ],
)
def test_invalid_messages_are_refused_with_the_field_named(messages: Any, param: str) -> None:
    with pytest.raises(WireError) as refused:
        MESSAGES.parse(body(messages) if messages else {"model": "m", "messages": []})
    assert refused.value.param == param


def test_other_invalid_fields_are_refused() -> None:
    for bad in ({"system": 3}, {"tools": {}}, {"max_tokens": "many"}, {"stream": "yes"}):
        with pytest.raises(WireError):
            MESSAGES.parse(body(**bad))


def feed(events: list[tuple[str, dict[str, Any]]]) -> Any:
    assembler = MESSAGES.assembler()
    for name, data in events:
        assembler.feed(name, json.dumps({"type": name, **data}))
    return assembler


START = ("message_start", {"message": {"usage": {"input_tokens": 7, "cache_read_input_tokens": 3}}})


def test_the_assembler_rebuilds_text_tools_and_thinking_with_usage() -> None:
    assembler = feed(
        [
            START,
            (
                "content_block_start",
                {"index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            ),
            (
                "content_block_delta",
                {"index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
            ),
            (
                "content_block_delta",
                {"index": 0, "delta": {"type": "signature_delta", "signature": SIG}},
            ),
            ("content_block_stop", {"index": 0}),
            ("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "Ru"}}),
            ("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "n."}}),
            (
                "content_block_start",
                {
                    "index": 2,
                    "content_block": {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
                },
            ),
            (
                "content_block_delta",
                {"index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"comm'}},
            ),
            (
                "content_block_delta",
                {"index": 2, "delta": {"type": "input_json_delta", "partial_json": 'and": "ls"}'}},
            ),
            (
                "message_delta",
                {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}},
            ),
            ("message_stop", {}),
        ]
    )
    answer = assembler.answer()
    assert not answer.failed
    assert [(m.kind, m.text, m.continues) for m in answer.messages] == [
        ("reasoning", "hm", False),
        ("message", "Run.", True),
        ("tool_call", "", True),
    ]
    assert answer.messages[0].raw == {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "hm", "signature": SIG}],
    }
    assert answer.messages[2].tool_calls[0].arguments == '{"command": "ls"}'
    assert (answer.prompt_tokens, answer.completion_tokens, answer.cache_read_tokens) == (10, 12, 3)


def test_an_unfinished_or_failed_stream_stores_no_answer() -> None:
    text_block = (
        "content_block_start",
        {"index": 0, "content_block": {"type": "text", "text": "x"}},
    )
    assert feed([START, text_block]).answer().failed
    errored = feed([START, ("error", {"error": {"type": "overloaded_error", "message": "busy"}})])
    assert errored.complete
    assert errored.error == "busy"
    assert errored.answer().failed
    broken = feed(
        [
            START,
            (
                "content_block_start",
                {"index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f"}},
            ),
            (
                "content_block_delta",
                {"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{oops"}},
            ),
            ("message_stop", {}),
        ]
    ).answer()
    assert not broken.failed
    assert broken.messages[0].tool_calls[0].arguments == "{}"


def test_odd_events_are_skipped_not_fatal() -> None:
    assembler = MESSAGES.assembler()
    assembler.feed("message_start", json.dumps(START[1]))
    for data in ("[1, 2]", json.dumps({"type": "content_block_delta", "index": "x"})):
        assembler.feed(None, data)
    assembler.feed(
        "content_block_delta", json.dumps({"type": "content_block_delta", "index": 9, "delta": {}})
    )
    assembler.feed("message_stop", json.dumps({"type": "message_stop"}))
    assert not assembler.answer().failed
    assert assembler.answer().messages == []


def test_an_unreadable_event_fails_the_answer_put_together_without_it() -> None:
    text_block = (
        "content_block_start",
        {"index": 0, "content_block": {"type": "text", "text": "Hello"}},
    )
    assembler = feed([START, text_block])
    assembler.feed("content_block_delta", "{not json")
    assembler.feed("message_stop", json.dumps({"type": "message_stop"}))
    assert assembler.complete
    assert assembler.answer().failed
    pinged = feed([START, text_block])  # a ping, or a kind of a later API: no piece of it
    pinged.feed("ping", "{not json")
    pinged.feed("future_event_kind", "[[[")
    pinged.feed("message_stop", json.dumps({"type": "message_stop"}))
    assert [m.text for m in pinged.answer().messages] == ["Hello"]


def test_the_stored_shape_round_trips_through_the_store_codec() -> None:
    from memlane.store.codec import message_from_json, message_to_json

    item = replace(MESSAGES.parse(body()).messages[1], origin="client")
    again = message_from_json(json.loads(json.dumps(message_to_json(item))))
    assert again == item
    assert again.continues
    assert again.raw == item.raw
