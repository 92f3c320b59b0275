"""`ResentItems`: a resent history reuses what its items parsed into, and nothing else."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from memlane.types import Message
from memlane.types.resent import MIN_ITEMS, Resend, ResentItems

LONG = MIN_ITEMS + 4


def parse_item(item: Any, index: int) -> tuple[Message, ...]:
    """A wire format whose item is `{"role", "text"}`, and `parts` makes it several messages."""
    return tuple(
        Message(item["role"], f"{item['text']}#{part}", raw=item) for part in range(item["parts"])
    )


def history(n: int, parts: int = 1) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "text": f"item {i}", "parts": parts} for i in range(n)]


def counted() -> tuple[list[int], Any]:
    """`parse_item`, recording the index of each item it parses."""
    seen: list[int] = []

    def parse(item: Any, index: int) -> Sequence[Message]:
        seen.append(index)
        return parse_item(item, index)

    return seen, parse


def fresh(items: list[dict[str, Any]]) -> list[Message]:
    return [m for i, item in enumerate(items) for m in parse_item(item, i)]


def test_a_resent_history_parses_only_its_head_and_its_new_items() -> None:
    memo = ResentItems()
    first = history(LONG)
    before = memo.parse(first, parse_item, "", 100)
    sent = [*copy.deepcopy(first), {"role": "user", "text": "new", "parts": 1}]
    seen, parse = counted()

    got = memo.parse(sent, parse, "", 100)

    assert seen == [0, 1, LONG]  # the two items it is found by, and the new one
    assert got == fresh(sent)
    assert [m.raw for m in got] == sent
    assert all(a is b for a, b in zip(got[2:LONG], before[2:], strict=True))


def test_items_from_the_first_that_differs_are_parsed_again() -> None:
    """A client that edits its history (compaction, a rewritten prompt) gets what it sent."""
    memo = ResentItems()
    first = history(LONG)
    memo.parse(first, parse_item, "", 100)
    sent = copy.deepcopy(first)
    sent[5]["text"] = "edited"
    seen, parse = counted()

    got = memo.parse(sent, parse, "", 100)

    assert seen == [0, 1, *range(5, LONG)]
    assert got == fresh(sent)
    assert got[5].text == "edited#0"


def test_a_shorter_resend_and_several_messages_an_item() -> None:
    memo = ResentItems()
    first = history(LONG, parts=3)
    memo.parse(first, parse_item, "", 100)
    sent = copy.deepcopy(first[: LONG - 3])
    seen, parse = counted()
    got = memo.parse(sent, parse, "", 100)
    assert seen == [0, 1]
    assert got == fresh(sent)
    assert len(got) == 3 * (LONG - 3)


def test_another_start_or_another_scope_reuses_nothing() -> None:
    memo = ResentItems()
    first = history(LONG)
    memo.parse(first, parse_item, "tenant-a", 100)

    seen, parse = counted()
    memo.parse(copy.deepcopy(first), parse, "tenant-b", 100)
    assert seen == list(range(LONG))

    other = copy.deepcopy(first)
    other[1]["text"] = "another session"
    seen, parse = counted()
    memo.parse(other, parse, "tenant-a", 100)
    assert seen == list(range(LONG))
    assert len(memo) == 3


def test_kept_requests_are_bounded_by_count_and_bytes() -> None:
    memo = ResentItems(requests=2, max_bytes=1_000)
    starts = []
    for n in range(3):
        items = history(LONG)
        items[0]["text"] = f"session {n}"
        starts.append(items)
        memo.parse(items, parse_item, "", 100)
    assert len(memo) == 2
    seen, parse = counted()
    memo.parse(copy.deepcopy(starts[0]), parse, "", 100)  # the oldest was dropped
    assert seen == list(range(LONG))

    memo.parse(history(LONG), parse_item, "", 950)  # over the bytes with the others
    assert len(memo) == 1
    memo.parse(history(LONG + 1), parse_item, "", 2_000)  # alone over them: not kept
    assert len(memo) == 0


def test_short_requests_are_parsed_whole_and_not_kept() -> None:
    memo = ResentItems()
    items = history(MIN_ITEMS - 1)
    assert Resend(memo, size=10).parse(items, parse_item) == fresh(items)
    assert len(memo) == 0
    assert Resend(memo, size=10).parse(history(MIN_ITEMS), parse_item) == fresh(history(MIN_ITEMS))
    assert len(memo) == 1


def test_a_request_of_one_item_is_parsed() -> None:
    memo = ResentItems()
    assert memo.parse(history(1), parse_item, "", 10) == fresh(history(1))
    assert len(memo) == 0


def test_forget_drops_everything() -> None:
    memo = ResentItems()
    memo.parse(history(LONG), parse_item, "", 100)
    memo.forget()
    assert len(memo) == 0
    seen, parse = counted()
    memo.parse(history(LONG), parse, "", 100)
    assert seen == list(range(LONG))
