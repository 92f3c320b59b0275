"""How the inspector's lists are paged: at the store's page size, from page 1."""

from __future__ import annotations

from memlane.store.arguments import PAGE_SIZE

ROWS_PER_PAGE = PAGE_SIZE  # as the store's `page_*` reads page by default


def rows_of(page_number: int) -> tuple[int, int]:
    """The (offset, limit) of a list's page `page_number`."""
    return (page_number - 1) * ROWS_PER_PAGE, ROWS_PER_PAGE


def page_count(total: int) -> int:
    """How many pages `total` rows fill (at least one, shown empty)."""
    return max(1, -(-total // ROWS_PER_PAGE))
