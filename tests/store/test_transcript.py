"""Resend matching: what of a client's full history is already stored."""

from __future__ import annotations

from memlane.store.transcript import SyncPlan, plan_sync


def test_a_longer_history_adds_its_new_tail() -> None:
    assert plan_sync(["a", "b"], ["a", "b", "c"]) == SyncPlan(matched=2, supersede_from=None)


def test_an_empty_store_takes_everything() -> None:
    assert plan_sync([], ["a", "b"]) == SyncPlan(matched=0, supersede_from=None)


def test_a_retry_of_a_stored_prefix_adds_nothing() -> None:
    assert plan_sync(["a", "b", "c"], ["a", "b"]) == SyncPlan(matched=2, supersede_from=None)
    assert plan_sync(["a", "b"], ["a", "b"]) == SyncPlan(matched=2, supersede_from=None)


def test_repeated_content_matches_by_position() -> None:
    assert plan_sync(["yes", "ok"], ["yes", "ok", "yes"]) == SyncPlan(2, None)


def test_an_edited_turn_supersedes_the_stored_rest() -> None:
    assert plan_sync(["a", "b", "c", "d"], ["a", "b", "x"]) == SyncPlan(2, 2)
    assert plan_sync(["a"], ["z", "a"]) == SyncPlan(0, 0)
