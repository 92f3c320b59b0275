"""Wire adapters and the SSE reader, without HTTP: parse, render back, assemble answers."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from memlane.proxy.wire import CHAT, MESSAGES, RESPONSES, WireAdapter, WireError
from memlane.text.sse import SSEDecoder
from memlane.types import Message
from memlane.types.resent import Resend, ResentItems
from tests.support.upstream import Reply, ToolCallSpec, chat_chunks, response_events


def test_chat_round_trip_keeps_every_item_as_sent() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys", "x-extra": 1},
            {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "out"},
        ],
        "unknown": {"kept": True},
    }
    parsed = CHAT.parse(body)
    assert [m.kind for m in parsed.messages] == ["message", "message", "tool_call", "tool_result"]
    assert parsed.messages[1].text == "look\n[image]"
    assert CHAT.render(parsed, parsed.messages) == body
    block = Message("system", "<memlane_state/>", origin="state")
    rendered = CHAT.render(parsed, [*parsed.messages, block])
    assert rendered["messages"][-1] == {"role": "system", "content": "<memlane_state/>"}


def test_responses_items_of_every_kind() -> None:
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"role": "developer", "content": "easy input"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "hm"}],
            "encrypted_content": "gAAA",
        },
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "done"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"q": "x"}},
    ]
    parsed = RESPONSES.parse({"model": "m", "input": items, "instructions": "be good"})
    kinds = [(m.role, m.kind) for m in parsed.messages]
    assert kinds == [
        ("user", "message"),
        ("developer", "message"),
        ("assistant", "reasoning"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "tool_call"),
    ]
    assert parsed.instructions == "be good"
    assert parsed.messages[7].tool_calls[0].name == "web_search_call"
    assert RESPONSES.render(parsed, parsed.messages)["input"] == items


def test_string_input_and_chaining() -> None:
    parsed = RESPONSES.parse({"model": "m", "input": "hello", "previous_response_id": "resp_1"})
    assert parsed.continued
    assert [m.text for m in parsed.messages] == ["hello"]
    block = Message("developer", "state", origin="state")
    assert RESPONSES.render(parsed, [*parsed.messages, block])["input"] == [
        {"role": "user", "content": "hello"},
        {"type": "message", "role": "developer", "content": "state"},
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [1]},
        {"messages": [{"role": "assistant", "content": "x", "tool_calls": "no"}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": "x"}]}]},
        {"messages": [{"role": "tool", "tool_call_id": 3, "content": "x"}]},
        {"messages": [{"role": "user", "content": [7]}]},
    ],
)
def test_chat_rejects_wrong_types(body: dict[str, object]) -> None:
    with pytest.raises(WireError):
        CHAT.parse(body)


def feed_all(decoder: SSEDecoder, data: bytes, step: int) -> list[tuple[str | None, str]]:
    events = []
    for i in range(0, len(data), step):
        events += decoder.feed(data[i : i + step])
    return events + decoder.close()


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_sse_decoder_whatever_the_chunk_boundaries(step: int) -> None:
    stream = (
        b": keep-alive\r\n\r\n"
        b"event: a\r\ndata: one\r\n\r\n"
        b"data: two\ndata: lines\n\n"
        b"event: b\rdata:no-space\r\r"
        b"data\ndata:  two spaces\n\n"
        b"data: unterminated"
    )
    assert feed_all(SSEDecoder(), stream, step) == [
        ("a", "one"),
        (None, "two\nlines"),
        ("b", "no-space"),
        (None, "\n two spaces"),
        (None, "unterminated"),
    ]


def test_chat_stream_assembles_to_what_the_client_resends() -> None:
    reply = Reply(text="Let me check.", tool_calls=[ToolCallSpec("f", '{"a": 1}', "c9")])
    assembler = CHAT.assembler()
    for data in chat_chunks(reply, "m", include_usage=True):
        assembler.feed(None, data)
    assert assembler.complete
    answer = assembler.answer()
    assert not answer.failed
    assert answer.prompt_tokens == 11
    resent = CHAT.parse({"messages": [json.loads(json.dumps(answer.messages[0].raw))]})
    assert resent.messages[0].fingerprint() == answer.messages[0].fingerprint()


def test_chat_stream_events_json_refuses_strictly_still_assemble() -> None:
    """A lone surrogate escape (a client or model that cut an emoji) and a NaN are read as
    `loads` reads them: the text keeps U+FFFD, the event is not dropped."""
    chunks = chat_chunks(Reply(text="ab"), "m", include_usage=True)
    cut = [json.loads(data) for data in chunks if data != "[DONE]"]
    cut[1]["choices"][0]["delta"]["content"] = "a\ud83d"
    cut[3]["x-score"] = float("nan")  # the usage event
    assembler = CHAT.assembler()
    for event in cut:
        assembler.feed(None, json.dumps(event))
    assembler.feed(None, "[DONE]")
    answer = assembler.answer()
    assert not answer.failed
    assert answer.messages[0].text == "a\ufffd"
    assert answer.prompt_tokens == 11


def test_chat_stream_without_an_end_is_a_failed_answer() -> None:
    assembler = CHAT.assembler()
    for data in chat_chunks(Reply(text="half"), "m", include_usage=False)[:2]:
        assembler.feed(None, data)
    assert not assembler.complete
    assert assembler.answer().failed


def test_chat_stream_with_an_unreadable_event_is_not_stored_as_whole() -> None:
    """A piece memlane cannot read is relayed, but the answer put together without it is
    not the one the client got: the turn is failed, not stored short of it."""
    chunks = chat_chunks(Reply(text="Hello world"), "m", include_usage=True)
    garbled = CHAT.assembler()
    for data in [*chunks[:2], '{"choices": [broken', *chunks[2:]]:
        garbled.feed(None, data)
    assert garbled.complete
    assert garbled.answer().failed
    spaced = CHAT.assembler()  # an empty data line is no piece of the answer
    for data in [chunks[0], "", " ", *chunks[1:]]:
        spaced.feed(None, data)
    assert not spaced.answer().failed
    assert spaced.answer().messages[0].text == "Hello world"


def test_a_responses_stream_is_kept_whole_by_its_final_output_whatever_the_pieces() -> None:
    events = [(name, json.dumps(data)) for name, data in response_events(Reply(text="ok"), "m")]
    kept = RESPONSES.assembler()
    for name, data in [events[0], (None, "garbage"), *events[1:]]:
        kept.feed(name, data)
    assert [m.text for m in kept.answer().messages] == ["ok"]
    bare = [
        (
            name,
            json.dumps(
                {**json.loads(data), "response": {**json.loads(data)["response"], "output": []}}
            ),
        )
        if json.loads(data).get("type") == "response.completed"
        else (name, data)
        for name, data in events
    ]
    pieced = RESPONSES.assembler()  # a final event without its output: put together
    for name, data in bare:
        pieced.feed(name, data)
    assert not pieced.answer().failed
    short = RESPONSES.assembler()
    for name, data in [bare[0], (None, "garbage"), *bare[1:]]:
        short.feed(name, data)
    assert short.answer().failed


def test_responses_stream_assembles_output_items() -> None:
    reply = Reply(text="done", reasoning="why", tool_calls=[ToolCallSpec("g", "{}", "c1")])
    assembler = RESPONSES.assembler()
    for name, data in response_events(reply, "m"):
        assembler.feed(name, json.dumps(data))
    answer = assembler.answer()
    assert [(m.kind, m.text) for m in answer.messages] == [
        ("reasoning", "why"),
        ("message", "done"),
        ("tool_call", ""),
    ]
    assert (answer.prompt_tokens, answer.completion_tokens) == (11, 7)


def test_responses_error_event_fails_the_answer() -> None:
    assembler = RESPONSES.assembler()
    assembler.feed("error", json.dumps({"type": "error", "message": "overloaded"}))
    assert assembler.complete
    assert assembler.error == "overloaded"
    assert assembler.answer().failed


BODY = {
    "model": "gpt-4o",
    "temperature": 0.7,
    "stream": False,
    "messages": [
        {"role": "system", "content": "Réponds en français — brièvement. 🙂"},
        {"role": "user", "content": 'quote " backslash \\ newline \n tab \t nul \x00'},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "index": 0}]},
    ],
    "max_tokens": 1024,
    "top_p": 1e-7,
}


def test_a_forwarded_body_is_compact_utf8_json_that_reads_back_as_sent() -> None:
    from memlane.proxy.wire.base import dumps

    written = dumps(BODY)
    assert json.loads(written) == BODY
    assert b"\\u00e9" not in written
    assert "é".encode() in written
    assert b", " not in written
    assert b'": ' not in written
    assert dumps(BODY) == written  # the same items, the same bytes


def test_a_body_is_written_without_the_standard_library_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path: what every re-rendered request pays in front of the upstream."""
    from memlane.proxy.wire import base

    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("json.dumps on the request path")

    monkeypatch.setattr(base.json, "dumps", refuse)
    assert json.loads(base.dumps(BODY)) == BODY


def test_what_the_fast_encoder_refuses_is_still_written_exactly() -> None:
    from memlane.proxy.wire.base import dumps

    big = {"seed": 2**70, "logit_bias": {1: 5}}
    assert dumps(big) == b'{"seed":1180591620717411303424,"logit_bias":{"1":5}}'


def _chat_turn(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {i}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i}"},
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]},
    ]


def _responses_turn(i: int) -> list[dict[str, Any]]:
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"q {i}"}]},
        {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"c{i}", "output": f"out {i}"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
    ]


def _messages_turn(i: int) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"out {i}"}
    return [
        {"role": "user", "content": f"question {i}"},
        {"role": "assistant", "content": [{"type": "text", "text": "let me look"}, use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": f"answer {i}"},
    ]


RESENDS = [  # (adapter, its items field, one turn of items)
    (CHAT, "messages", _chat_turn),
    (RESPONSES, "input", _responses_turn),
    (MESSAGES, "messages", _messages_turn),
]


@pytest.mark.parametrize(
    ("adapter", "field", "turn"), RESENDS, ids=["chat", "responses", "messages"]
)
def test_a_resent_history_parses_as_if_new(
    adapter: WireAdapter, field: str, turn: Callable[[int], list[dict[str, Any]]]
) -> None:
    """What a resent history reuses from its last parse is what parsing it anew gives, for
    every wire format; an item changed in the middle is read as it is now."""
    memo = ResentItems()
    reuse = Resend(memo, scope="t", size=1_000)
    items = [item for i in range(6) for item in turn(i)]
    first = adapter.parse({"model": "m", field: items}, reuse).messages

    sent = copy.deepcopy(items) + turn(6)
    sent[13] = turn(99)[1]
    got = adapter.parse({"model": "m", field: sent}, reuse).messages

    again = adapter.parse({"model": "m", field: copy.deepcopy(sent)}).messages
    assert got == again
    assert [m.raw for m in got] == [m.raw for m in again]
    assert [m.continues for m in got] == [m.continues for m in again]
    reused = sum(any(m is f for f in first) for m in got)
    assert reused >= 11  # items 2..12 (their messages) come from the first parse
    assert not any(m is f for m in got[-8:] for f in first)


def test_a_bad_item_after_a_resent_history_is_refused_and_nothing_is_kept() -> None:
    """Reused items skip parsing; a new one that is wrong still gets the wire's error, and
    the kept request stays the last good one."""
    memo = ResentItems()
    reuse = Resend(memo, size=1_000)
    items = [item for i in range(6) for item in _chat_turn(i)]
    first = CHAT.parse({"model": "m", "messages": items}, reuse).messages

    bad = [*copy.deepcopy(items), {"role": "wizard", "content": "hi"}]
    with pytest.raises(WireError) as error:
        CHAT.parse({"model": "m", "messages": bad}, reuse)
    assert error.value.param == f"messages[{len(items)}].role"

    again = CHAT.parse({"model": "m", "messages": copy.deepcopy(items)}, reuse).messages
    assert all(a is b for a, b in zip(again[2:], first[2:], strict=True))
