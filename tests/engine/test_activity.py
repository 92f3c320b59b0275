"""The activity counters `memlane status` shows."""

from __future__ import annotations

from memlane.engine.activity import Activity


def test_requests_and_errors_count_over_the_last_hour_only() -> None:
    activity = Activity()
    start = activity.started_at.timestamp()
    activity.request(200, now=start)
    activity.request(502, now=start + 30)
    activity.request(200, now=start + 1800)
    snap = activity.snapshot(now=start + 1800)
    assert (snap["requests_last_hour"], snap["errors_last_hour"]) == (3, 1)
    later = activity.snapshot(now=start + 3700)
    assert (later["requests_last_hour"], later["errors_last_hour"]) == (1, 0)
    assert later["uptime_seconds"] == 3700


def test_the_last_extraction_is_kept_with_its_outcome() -> None:
    activity = Activity()
    assert activity.snapshot()["last_extraction"] is None
    activity.extraction(ok=False, detail="LLMError('401')", session_id="s1")
    last = activity.snapshot()["last_extraction"]
    assert (last["ok"], last["detail"], last["session_id"]) == (False, "LLMError('401')", "s1")
