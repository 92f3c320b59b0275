"""Anthropic content blocks as memlane `Message`s, and back.

One item per content block: a `tool_use` is its own `tool_call` item, a
`tool_result` its own `tool_result` item, `thinking` / `redacted_thinking` are
`reasoning` items, text is text. Every block after the first of a wire message
is marked `continues`, so governance keeps or drops the message whole, and the
renderer joins the blocks back into one message. Each item's `raw` is a valid
one-block Anthropic message (`{"role": …, "content": [block]}`, or the client's
whole message when its content is a string): an item forwarded again is exactly
the block the client sent, `cache_control` and signatures included. A text block
that is only a Claude Code `<system-reminder>` is the harness speaking, not the
user: it is a `system` item (kept where it is, never taken for the user's words).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memlane.proxy.wire.base import WireError, loads, message_role, require
from memlane.types import Message, Role, ToolCall

WIRE_ROLES: frozenset[str] = frozenset({"user", "assistant", "system"})
"""Roles of `messages` entries (current Claude Code puts `system` entries in the list)."""
REMINDER_OPEN = "<system-reminder>"
REMINDER_CLOSE = "</system-reminder>"
_MEDIA = ("image", "document")


def arguments_of(value: Any) -> str:
    """A tool input as canonical JSON: the same input, streamed or resent, gives one string."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False, sort_keys=True)


def _input_of(arguments: str) -> Any:
    try:
        value = loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def block_text(content: Any) -> str:
    """The text of a tool result's content: a string, or a list of text / media blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    pieces: list[str] = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif isinstance(part, dict) and str(part.get("type", "")) in _MEDIA:
            pieces.append(f"[{part['type']}]")
    return "\n".join(pieces)


def _other_text(block: Mapping[str, Any]) -> str:
    """A block memlane has no reading for (server tools, search results, what comes next):
    its JSON stands for it, minus bulky binary sources."""
    kind = str(block.get("type", ""))
    source = block.get("source")
    if kind in _MEDIA or (isinstance(source, dict) and source.get("type") == "base64"):
        if isinstance(source, dict) and source.get("type") == "text":
            return str(source.get("data", ""))
        title = block.get("title")
        return f"[{kind}: {title}]" if isinstance(title, str) and title else f"[{kind}]"
    rest = {k: v for k, v in block.items() if k not in ("cache_control", "citations")}
    return json.dumps(rest, ensure_ascii=False, sort_keys=True)


def _own_role(role: str, text: str = "") -> Role:
    """memlane's role for text under a wire role: a user's reminder block is the harness's."""
    if role == "assistant":
        return "assistant"
    if role == "system" or is_reminder(text):
        return "system"
    return "user"


def block_message(
    block: Mapping[str, Any], role: str, raw: Mapping[str, Any], *, continues: bool
) -> Message:
    """One content block of a `role` message as an item (`raw`: its one-block message)."""
    kind = block.get("type")
    extra: dict[str, Any] = {"raw": raw, "wire": "anthropic", "continues": continues}
    if kind == "text":
        text = str(block.get("text", ""))
        return Message(_own_role(role, text), text, **extra)
    if kind == "tool_use" and role == "assistant":
        name, arguments = str(block.get("name", "")), arguments_of(block.get("input"))
        call = ToolCall(str(block.get("id", "")), name, arguments)
        return Message("assistant", "", "tool_call", (call,), **extra)
    if kind == "tool_result" and role != "assistant":
        call_id = block.get("tool_use_id")
        return Message(
            "tool",
            block_text(block.get("content")),
            "tool_result",
            call_id=call_id if isinstance(call_id, str) else None,
            **extra,
        )
    if kind == "thinking":
        return Message("assistant", str(block.get("thinking", "")), "reasoning", **extra)
    if kind == "redacted_thinking":
        return Message("assistant", "", "reasoning", **extra)
    return Message(_own_role(role), _other_text(block), **extra)


def parse_message(item: Any, param: str) -> list[Message]:
    """One entry of `messages` as its items, in block order."""
    role = message_role(item, param, WIRE_ROLES)
    content = item.get("content")
    if isinstance(content, str):
        return [Message(_own_role(role, content), content, raw=item, wire="anthropic")]
    require(
        isinstance(content, list),
        f"{param}.content must be a string or a list of content blocks",
        f"{param}.content",
    )
    if not content:  # kept as it is: an empty message is the client's to send
        return [Message(_own_role(role), "", raw=item, wire="anthropic")]
    out: list[Message] = []
    for index, block in enumerate(content):
        where = f"{param}.content[{index}]"
        require(isinstance(block, dict), f"{where} must be an object", where)
        require(isinstance(block.get("type"), str), f"{where}.type must be a string", where)
        raw = {k: ([block] if k == "content" else v) for k, v in item.items()}
        out.append(block_message(block, role, raw, continues=index > 0))
    return out


# --- back to the wire --------------------------------------------------------------


def wire_role(message: Message) -> str:
    """The `messages` role an item travels under."""
    if message.wire == "anthropic" and message.raw is not None:
        return str(message.raw.get("role", "user"))
    return "assistant" if message.role == "assistant" else "user"


def blocks_of(message: Message) -> list[dict[str, Any]]:
    """The content blocks an item renders as (none for what cannot be re-created)."""
    if message.wire == "anthropic" and message.raw is not None:
        content = message.raw.get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        return [dict(b) for b in content] if isinstance(content, list) else []
    if message.kind == "tool_result":
        return [
            {"type": "tool_result", "tool_use_id": message.call_id or "", "content": message.text}
        ]
    if message.kind == "reasoning":
        return []  # thinking cannot be re-created without the upstream's signature
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": _input_of(call.arguments),
            }
        )
    return blocks


def injected(message: Message) -> bool:
    """Text memlane adds (state block, summary, recall, references, notes), or an item of
    another wire format that has no Anthropic place of its own (instructions)."""
    if message.origin != "client":
        return True
    return message.wire != "anthropic" and message.role in ("system", "developer")


class _Messages:
    """Builds `messages`: client blocks joined back into their messages, memlane's text put
    into a user turn and never before one of its tool results (the API wants them first),
    never between a `tool_use` and its result."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        """memlane's blocks waiting for a user turn (the last message is the assistant's)."""
        self.first_injected: int | None = None
        """Where memlane's first block sits in the last message, if it holds any."""

    def add_injected(self, message: Message) -> None:
        if not message.text:
            return
        block = {"type": "text", "text": message.text}
        if self.out and self.out[-1]["role"] == "user":
            content = _content(self.out[-1])
            if self.first_injected is None:
                self.first_injected = len(content)
            content.append(block)
        else:
            self.pending.append(block)

    def add_client(self, message: Message) -> None:
        role, blocks = wire_role(message), blocks_of(message)
        last = self.out[-1] if self.out else None
        if message.continues and last is not None and last["role"] == role:
            content = _content(last)
            for block in blocks:
                if block.get("type") == "tool_result" and self.first_injected is not None:
                    content.insert(self.first_injected, block)
                    self.first_injected += 1
                else:
                    content.append(block)
            return
        if message.wire == "anthropic" and message.raw is not None:
            entry = dict(message.raw)
            if isinstance(entry.get("content"), list):
                entry["content"] = blocks
        elif blocks:
            entry = {"role": role, "content": blocks}
        else:
            return
        self.first_injected = None
        if self.pending and role == "user":
            content = _content(entry)
            at = 1 if content and content[0].get("type") == "tool_result" else 0
            content[at:at] = self.pending
            self.first_injected = at
        elif self.pending:
            self.out.append({"role": "user", "content": self.pending})
        self.pending = []
        self.out.append(entry)

    def finish(self) -> list[dict[str, Any]]:
        if self.pending:
            self.out.append({"role": "user", "content": self.pending})
            self.pending = []
        return self.out


def _content(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's content as a list of blocks (a string becomes one text block)."""
    content = entry.get("content")
    if isinstance(content, str):
        entry["content"] = [{"type": "text", "text": content}] if content else []
    elif not isinstance(content, list):
        entry["content"] = []
    else:
        entry["content"] = list(content)
    blocks: list[dict[str, Any]] = entry["content"]
    return blocks


def render_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    builder = _Messages()
    for message in messages:
        if injected(message):
            builder.add_injected(message)
        else:
            builder.add_client(message)
    return builder.finish()


def is_reminder(text: str) -> bool:
    """A text block that is nothing but one of Claude Code's `<system-reminder>`s."""
    text = text.strip()
    return text.startswith(REMINDER_OPEN) and text.endswith(REMINDER_CLOSE)


def user_content_of_its_own(messages: Sequence[Message]) -> bool:
    """Whether any user turn says something: text (the harness's reminders are not the
    user's), a tool result, an image or a document."""
    return any(
        m.kind == "tool_result" or (m.role == "user" and m.kind == "message" and m.text.strip())
        for m in messages
    )


def check_blocks(value: Any, param: str) -> None:
    """`system` (and similar fields): a string or a list of blocks, each an object."""
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, list):
        raise WireError(f"{param} must be a string or a list of content blocks", param=param)
    for index, block in enumerate(value):
        require(isinstance(block, dict), f"{param}[{index}] must be an object", f"{param}[{index}]")
