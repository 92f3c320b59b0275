"""Re-injected snippets of dropped history: as many as fit, best first."""

from __future__ import annotations

from memlane.engine.governance.recall import Snippet, fitting_message, recall_message
from memlane.text.tokens import get_tokenizer

COUNT = get_tokenizer("cl100k_base").count_message
SNIPPETS = [
    Snippet(f"snippet {i}: " + " ".join(f"word{i}x{j}" for j in range(60)), 1.0 / (i + 1))
    for i in range(4)
]


def test_all_snippets_go_in_when_they_fit() -> None:
    whole = recall_message(SNIPPETS)
    found = fitting_message(SNIPPETS, COUNT(whole), COUNT)
    assert found == whole


def test_near_the_limit_the_best_snippets_that_fit_still_go_in() -> None:
    two = recall_message(SNIPPETS[:2])
    found = fitting_message(SNIPPETS, COUNT(two) + 5, COUNT)
    assert found is not None
    assert "snippet 0:" in found.text
    assert "snippet 1:" in found.text
    assert "snippet 2:" not in found.text
    assert COUNT(found) <= COUNT(two) + 5


def test_no_room_no_message() -> None:
    assert fitting_message(SNIPPETS, 20, COUNT) is None
    assert fitting_message([], 10_000, COUNT) is None
