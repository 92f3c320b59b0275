"""Plain data shared by every layer. Imports nothing from memlane."""

from memlane.types.messages import Kind, Message, Origin, Role, ToolCall, Wire
from memlane.types.records import (
    Citations,
    CitedFile,
    DocKind,
    Event,
    Fact,
    FactRole,
    Hit,
    MessageStatus,
    MessageText,
    Session,
    StoredMessage,
)

__all__ = [
    "Citations",
    "CitedFile",
    "DocKind",
    "Event",
    "Fact",
    "FactRole",
    "Hit",
    "Kind",
    "Message",
    "MessageStatus",
    "MessageText",
    "Origin",
    "Role",
    "Session",
    "StoredMessage",
    "ToolCall",
    "Wire",
]
