"""A request's messages, each counted only once the store knows it is new.

Clients resend their whole history every turn, and `MessageLog.sync_messages` stores
only what is new in it: counting the tokens of (and wrapping) every resent message,
most of them stored turns ago, was a good part of what storing a turn cost the store's
writer. `CountWhenStored` hands the store the messages, and their counts only for the
ones it takes.

    store.sync_messages(session_id, CountWhenStored(client, tokenizer.count_message))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

from memlane.store.base import NewMessage
from memlane.types import Message


class CountWhenStored(Sequence[NewMessage]):
    """`NewMessage`s made on access: `count` runs for the items read, not for all."""

    __slots__ = ("_count", "messages")

    def __init__(self, messages: Sequence[Message], count: Callable[[Message], int]) -> None:
        self.messages = messages
        self._count = count

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[NewMessage]:
        count = self._count
        return (NewMessage(message, count(message)) for message in self.messages)

    @overload
    def __getitem__(self, index: int) -> NewMessage: ...

    @overload
    def __getitem__(self, index: slice) -> CountWhenStored: ...

    def __getitem__(self, index: int | slice) -> NewMessage | CountWhenStored:
        if isinstance(index, slice):
            return CountWhenStored(self.messages[index], self._count)
        message = self.messages[index]
        return NewMessage(message, self._count(message))


def messages_of(items: Sequence[NewMessage]) -> Sequence[Message]:
    """The messages of `items`, without counting them."""
    if isinstance(items, CountWhenStored):
        return items.messages
    return [item.message for item in items]
