"""How the inspector's lists are paged: at the store's page size, from page 1."""

from __future__ import annotations

from memlane.store.arguments import PAGE_SIZE


def rows_of(page_number: int) -> tuple[int, int]:
    """The (offset, limit) of a list's page `page_number`."""
    return (page_number - 1) * PAGE_SIZE, PAGE_SIZE


def page_count(total: int) -> int:
    """How many pages `total` rows fill (at least one, shown empty)."""
    return max(1, -(-total // PAGE_SIZE))
