"""`Message`: the fingerprint a resent message is recognised by."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import replace

import pytest

from memlane.types import Message, ToolCall
from memlane.types.messages import FINGERPRINT_MEMO_MAX_CHARS


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What was hashed while the test ran."""
    taken: list[bytes] = []
    real = hashlib.sha256

    def counted(data: bytes) -> hashlib._Hash:
        taken.append(data)
        return real(data)

    monkeypatch.setattr(hashlib, "sha256", counted)
    return taken


def test_a_message_is_fingerprinted_once(digests: list[bytes]) -> None:
    message = Message("user", f"hello {uuid.uuid4()}")
    first = message.fingerprint()
    assert message.fingerprint() == first
    assert len(digests) == 1


def test_the_fingerprint_is_the_stored_content_hash() -> None:
    """Stores hold these hashes: the memo must not change a single one."""
    calls = (ToolCall("c1", "read", '{"path": "é.md"}'),)
    for message in (
        Message("user", f"naïve {uuid.uuid4()}"),
        Message("assistant", "", kind="tool_call", tool_calls=calls),
        Message("tool", "x" * (FINGERPRINT_MEMO_MAX_CHARS + 1), kind="tool_result", call_id="c1"),
    ):
        canonical = json.dumps(
            [
                message.role,
                message.kind,
                message.text,
                [[c.id, c.name, c.arguments] for c in message.tool_calls],
                message.call_id,
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        assert message.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_resent_message_is_recognised_without_hashing_it_again(digests: list[bytes]) -> None:
    """Each request parses the resent history anew: short messages are found by content."""
    text = f"resent {uuid.uuid4()}"
    first = Message("user", text).fingerprint()
    again = Message("user", "".join(text)).fingerprint()  # another object, same content
    assert again == first
    assert len(digests) == 1
    assert Message("assistant", text).fingerprint() != first  # the role is part of it
    assert len(digests) == 2


def test_a_long_message_is_hashed_each_time_not_held(digests: list[bytes]) -> None:
    """The memo holds short texts only, so it stays small however long the outputs."""
    text = f"{uuid.uuid4()} " + "y" * FINGERPRINT_MEMO_MAX_CHARS
    first = Message("tool", text, kind="tool_result", call_id="c9").fingerprint()
    again = Message("tool", text, kind="tool_result", call_id="c9").fingerprint()
    assert again == first
    assert len(digests) == 2


def test_a_changed_copy_is_fingerprinted_anew() -> None:
    message = Message("assistant", "calling", tool_calls=(ToolCall("c1", "read", "{}"),))
    taken = message.fingerprint()
    assert message.with_text("other").fingerprint() != taken
    assert replace(message, tool_calls=(ToolCall("c1", "read", '{"a":1}'),)).fingerprint() != taken
    assert replace(message, raw={"role": "assistant"}).fingerprint() == taken  # the wire item
    # the remembered fingerprint is not part of what a message is
    fresh = Message("assistant", "calling", tool_calls=(ToolCall("c1", "read", "{}"),))
    assert fresh == message
    assert hash(fresh) == hash(message)
    assert "_fingerprint" not in repr(message)
