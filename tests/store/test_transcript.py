"""Resend matching: what of a client's full history is already stored."""

from __future__ import annotations

from memlane.store.transcript import SyncPlan, digested, history_digest, plan_sync


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


def test_a_digest_tells_apart_order_content_and_length() -> None:
    digest = history_digest(["a", "b", "c"])
    assert digest.startswith("3:")
    assert history_digest(["a", "b", "c"]) == digest
    assert history_digest(["b", "a", "c"]) != digest
    assert history_digest(["a", "b", "d"]) != digest
    assert history_digest(["a", "b", "c", ""]) != digest


def test_the_digest_stands_for_a_resent_historys_start_when_it_is_the_stored_one() -> None:
    digest = history_digest(["a", "b"])
    assert digested(digest, ["a", "b", "c"]) == 2
    assert digested(digest, ["a", "b"]) == 2
    assert digested(None, ["a"]) == 0  # no digest: everything stored is read
    assert digested(history_digest([]), ["a"]) == 0
    assert digested(digest, ["a"]) is None  # a retry of less: read it all and plan
    assert digested(digest, ["a", "x", "c"]) is None  # an edit: read it all and plan
