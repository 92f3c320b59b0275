"""`memlane chat` reads the upstream's stream without trusting its shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.cli.chat import ChatSession
from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Answer
from memlane.store import open_store
from memlane.types import Message
from tests.support.upstream import Raw, ScriptedUpstream

HELLO = 'data: {"choices":[{"index":0,"delta":{"content":"hello"}}]}\n\n'


async def _ask(upstream: ScriptedUpstream, home: Path, *frames: str) -> tuple[Answer, str]:
    upstream.script(Raw(frames=frames))
    settings = Settings(home=home, upstream_url=upstream.url, embedding_backend="hashing")
    rt = Runtime(settings, open_store(settings))
    said: list[str] = []
    try:
        chat = ChatSession(rt, key="k", namespace="n", model="m", out=said.append)
        answer = await chat._ask_upstream([Message("user", "hi")], lambda text: None)
    finally:
        rt.close()
    return answer, "".join(said)


@pytest.mark.parametrize(
    "error",
    ['"the model is overloaded"', '{"message":"the model is overloaded"}', "[1, 2]", "null"],
)
async def test_an_error_event_of_any_shape_ends_the_turn_with_a_line(
    upstream: ScriptedUpstream, tmp_path: Path, error: str
) -> None:
    answer, said = await _ask(upstream, tmp_path, HELLO, f'data: {{"error": {error}}}\n\n')
    assert answer.failed
    assert "error: the upstream broke off" in said


async def test_odd_chunks_and_usage_are_read_as_nothing(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    answer, said = await _ask(
        upstream,
        tmp_path,
        HELLO,
        'data: {"choices": 7}\n\n',
        'data: {"choices": ["x"]}\n\n',
        'data: {"choices": [{"delta": {"content": ["not", "text"]}}]}\n\n',
        "data: [1, 2]\n\n",
        'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
        'data: {"choices": [], "usage": {"prompt_tokens": {"cached": 1}}}\n\n',
        "data: [DONE]\n\n",
    )
    assert not answer.failed
    assert [m.text for m in answer.messages] == ["hello"]
    assert answer.prompt_tokens == 0
    assert said == ""
