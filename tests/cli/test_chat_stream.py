"""`memlane chat` reads the upstream's stream without trusting its shape."""

from __future__ import annotations

import pytest

from memlane.cli.chat import ChatError, stream_completion
from memlane.config import Settings
from memlane.types import Message
from tests.support.upstream import Raw, ScriptedUpstream

HELLO = 'data: {"choices":[{"index":0,"delta":{"content":"hello"}}]}\n\n'


async def _read(upstream: ScriptedUpstream, *frames: str) -> list[tuple[str, object]]:
    upstream.script(Raw(frames=frames))
    settings = Settings(upstream_url=upstream.url)
    return [pair async for pair in stream_completion(settings, "m", [Message("user", "hi")])]


@pytest.mark.parametrize(
    "error",
    ['"the model is overloaded"', '{"message":"the model is overloaded"}', "[1, 2]", "null"],
)
async def test_an_error_event_of_any_shape_is_a_chat_error(
    upstream: ScriptedUpstream, error: str
) -> None:
    with pytest.raises(ChatError, match="upstream error"):
        await _read(upstream, HELLO, f'data: {{"error": {error}}}\n\n')


async def test_odd_chunks_and_usage_are_read_as_nothing(upstream: ScriptedUpstream) -> None:
    pairs = await _read(
        upstream,
        HELLO,
        'data: {"choices": 7}\n\n',
        'data: {"choices": ["x"]}\n\n',
        'data: {"choices": [{"delta": {"content": ["not", "text"]}}]}\n\n',
        "data: [1, 2]\n\n",
        'data: {"choices": [], "usage": {"prompt_tokens": {"cached": 1}}}\n\n',
        "data: [DONE]\n\n",
    )
    assert [text for text, _ in pairs] == ["hello", "", "", "", "", ""]
    assert pairs[-1][1] == {"prompt_tokens": {"cached": 1}}
