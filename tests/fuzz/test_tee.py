"""The stream tee only copies: no upstream answer, however odd, makes an assembler raise.

Every wire adapter the proxy registers (found in `memlane.proxy.wire`, so a new
format is covered as it lands) is fed a real answer of its own format (text,
reasoning, a tool call, usage), asked of the scripted upstream that speaks it
(OpenAI-compatible or Anthropic) at the adapter's own path, then mutated: any
field anywhere set to a value of another type or range, removed, or the event's
data replaced by garbage. Feeding the events, asking whether the stream is
complete and assembling the answer must never raise; nor may reading a mutated
non-streamed answer. The same holds for what memlane's own tools (`proxy.tool_wire`) do
with such an answer: telling a round's kind, and taking a call out of it, streamed or
whole (the answer's `shell` call stands for one of memlane's).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memlane.proxy.wire as wire
from memlane.proxy.tool_rounds import StreamedRound
from memlane.proxy.tool_wire import TOOL_WIRES
from memlane.proxy.wire.base import WireAdapter
from memlane.text.sse import SSEDecoder
from tests.fuzz import strategies as fz
from tests.support.anthropic_upstream import ScriptedAnthropic
from tests.support.upstream import Reply, ScriptedUpstream, ToolCallSpec

ADAPTERS: list[WireAdapter] = [
    value
    for value in vars(wire).values()
    if not isinstance(value, type) and hasattr(value, "assembler") and hasattr(value, "wire")
]
ANSWER = Reply(
    text="Here is the plan.",
    tool_calls=[ToolCallSpec("shell", '{"cmd": "ls"}', id="call_1")],
    reasoning="thinking it over",
    usage=(42, 17),
)
EVENT_TYPES = (
    "response.created",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
)
"""Event names of the typed streams (Responses, Anthropic Messages), for swapping."""
ODD = (None, "x", "", "1", -1, 1.5, True, [1], {"a": 1}, float("nan"), 2**80, [], {})
"""Values of the wrong type or range: what breaks a parser that trusted a field."""
_REMOVE = object()


_answers: dict[tuple[str, bool], bytes] = {}


@dataclass(frozen=True)
class Speaker:
    """The scripted upstream that speaks an adapter's format, and the base its path is under."""

    server: ScriptedUpstream
    base: str


def real_answer(speaker: Speaker, adapter: WireAdapter, stream: bool) -> bytes:
    """What the scripted upstream answers at the adapter's path, as its clients ask (once)."""
    known = _answers.get((adapter.wire, stream))
    if known is not None:
        return known
    speaker.server.script(ANSWER)
    body = {
        "model": "m",
        "stream": stream,
        "max_tokens": 64,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = httpx.post(speaker.base + adapter.path, json=body, timeout=30)
    assert response.status_code == 200, f"the scripted upstream cannot answer {adapter.path}"
    _answers[(adapter.wire, stream)] = response.content
    return response.content


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, (dict, list)):
        children = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in children:
            yield from _paths(child, (*prefix, key))


def _mutate(value: Any, path: tuple[Any, ...], action: str, odd: Any) -> Any:
    if not path:
        return odd
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if action == "remove":
        del parent[path[-1]]
    else:
        parent[path[-1]] = odd
    return value


@st.composite
def mutated(draw: st.DrawFn, data: list[str]) -> list[str]:
    """`data` (JSON texts) with one to four changes anywhere in them."""
    out = list(data)
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(out) - 1))
        try:
            value = json.loads(out[index])
        except (ValueError, RecursionError):  # garbage put there by an earlier change
            continue
        path = draw(st.sampled_from(list(_paths(value))))
        action = draw(st.sampled_from(("replace", "replace", "remove", "garbage", "retype")))
        if action == "retype" and isinstance(value, dict):  # another event's name, same fields
            value["type"] = draw(st.sampled_from(EVENT_TYPES))
            out[index] = json.dumps(value)
            continue
        if action == "garbage":
            out[index] = draw(
                st.one_of(fz.texts, st.sampled_from(("[DONE]", "[" * 3000, "{", "null")))
            )
            continue
        odd = draw(st.one_of(st.sampled_from(ODD), fz.any_json(4)))
        out[index] = json.dumps(_mutate(value, path, action, odd), allow_nan=True)
    return out


@pytest.fixture(params=ADAPTERS, ids=lambda a: a.wire)
def adapter(request: pytest.FixtureRequest) -> WireAdapter:
    adapter: WireAdapter = request.param
    return adapter


@pytest.fixture
def speaker(
    adapter: WireAdapter, upstream: ScriptedUpstream, anthropic_upstream: ScriptedAnthropic
) -> Speaker:
    if adapter.wire == "anthropic":
        return Speaker(anthropic_upstream, anthropic_upstream.base)
    return Speaker(upstream, upstream.url)


def test_every_adapter_is_fuzzed() -> None:
    assert {a.wire for a in ADAPTERS} >= {"chat", "responses", "anthropic"}


def test_the_unmutated_answers_assemble(adapter: WireAdapter, speaker: Speaker) -> None:
    """The fuzz starts from answers the assemblers read whole (else it would prove little)."""
    decoder = SSEDecoder()
    events = decoder.feed(real_answer(speaker, adapter, stream=True)) + decoder.close()
    assembler = adapter.assembler()
    for event, data in events:
        assembler.feed(event, data)
    streamed = assembler.answer()
    whole = adapter.answer_from_json(json.loads(real_answer(speaker, adapter, stream=False)))
    for answer in (streamed, whole):
        assert not answer.failed
        assert any(m.text == ANSWER.text for m in answer.messages)
        assert [c.name for m in answer.messages for c in m.tool_calls] == ["shell"]
        assert (answer.prompt_tokens, answer.completion_tokens) == ANSWER.usage


def _events(speaker: Speaker, adapter: WireAdapter) -> list[tuple[str | None, str]]:
    decoder = SSEDecoder()
    return decoder.feed(real_answer(speaker, adapter, stream=True)) + decoder.close()


def _assemble(adapter: WireAdapter, events: list[tuple[str | None, str]]) -> None:
    assembler = adapter.assembler()
    for event, payload in events:
        assembler.feed(event, payload)
        assert isinstance(assembler.complete, bool)
        assert assembler.error is None or isinstance(assembler.error, str)
    answer = assembler.answer()
    assert answer.failed or all(m.role == "assistant" for m in answer.messages)


OURS = frozenset({"shell"})
"""The answer's call, taken for one of memlane's own by the tool wire fuzz."""


def _strip(adapter: WireAdapter, events: list[tuple[str | None, str]]) -> None:
    """What the tool loop does with a round: read it until its kind is known (the first
    output), then take memlane's calls out of it event by event."""
    tools = TOOL_WIRES[adapter.wire]
    rounds = StreamedRound(adapter, tools, _no_chunks())
    rounds._feed(events)
    assert rounds.kind in (None, "text", "tool")
    stripper = tools.stripper(OURS)
    for event, payload in events:
        for name, kept in stripper.feed([(event, payload)]):
            assert name == event
            assert isinstance(kept, str)


async def _no_chunks() -> AsyncIterator[bytes]:
    return
    yield b""


def test_every_field_of_every_event_may_hold_anything(
    adapter: WireAdapter, speaker: Speaker
) -> None:
    """A sweep, not a sample: each field of each event, in turn, takes each odd value or
    is removed (each event's type is also swapped for every other, with its fields kept)."""
    events = _events(speaker, adapter)
    for index, (event, payload) in enumerate(events):
        try:
            value = json.loads(payload)
        except ValueError:
            continue
        variants: list[Any] = []
        for path in _paths(value):
            for odd in (*ODD, _REMOVE):
                action = "remove" if odd is _REMOVE else "replace"
                if action == "remove" and not path:
                    continue
                variants.append(_mutate(json.loads(payload), path, action, odd))
        if isinstance(value, dict):
            variants += [{**value, "type": kind} for kind in EVENT_TYPES]
            variants += [{**value, "type": kind, "response": None} for kind in EVENT_TYPES]
        for variant in variants:
            changed = list(events)
            changed[index] = (event, json.dumps(variant, allow_nan=True))
            _assemble(adapter, changed)
            _strip(adapter, changed)


@settings(max_examples=int(250 * fz.SCALE))
@given(data=st.data())
def test_no_stream_event_makes_an_assembler_raise(
    adapter: WireAdapter, speaker: Speaker, data: st.DataObject
) -> None:
    events = _events(speaker, adapter)
    changed = data.draw(mutated([payload for _, payload in events]))
    events = [(event, payload) for (event, _), payload in zip(events, changed, strict=True)]
    _assemble(adapter, events)
    _strip(adapter, events)


@settings(max_examples=int(150 * fz.SCALE))
@given(data=st.data())
def test_no_whole_answer_makes_answer_from_json_raise(
    adapter: WireAdapter, speaker: Speaker, data: st.DataObject
) -> None:
    body = real_answer(speaker, adapter, stream=False).decode()
    (changed,) = data.draw(mutated([body]))
    try:
        value = json.loads(changed)
    except (ValueError, RecursionError):
        return  # the proxy never hands undecodable bytes to the adapter
    answer = adapter.answer_from_json(value)
    assert answer.failed or all(m.role == "assistant" for m in answer.messages)
    if not answer.failed and any(c.name in OURS for m in answer.messages for c in m.tool_calls):
        # the loop strips an answer it could read and that called memlane's tools
        stripped = TOOL_WIRES[adapter.wire].strip_json(value, OURS)
        assert not any(
            c.name in OURS
            for m in adapter.answer_from_json(stripped).messages
            for c in m.tool_calls
        )
