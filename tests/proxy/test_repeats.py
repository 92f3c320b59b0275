"""A warning repeated by every turn's background work is printed once per burst."""

from __future__ import annotations

import io
import logging

from memlane.config import Settings
from memlane.proxy.repeats import RepeatedWarnings
from memlane.proxy.serving import configure_logging


def record(name: str, level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_repeats_of_a_warning_are_held_back_and_counted() -> None:
    now = [0.0]
    limit = RepeatedWarnings(every=10.0, clock=lambda: now[0])
    extraction = "memlane.memory.extract"
    template = "fact extraction skipped, LLM unavailable: %s"
    assert limit.filter(record(extraction, logging.WARNING, template, "refused"))
    for second in (1.0, 5.0, 9.0):
        now[0] = second
        assert not limit.filter(record(extraction, logging.WARNING, template, "timed out"))
    # another warning, an error and info lines are not held back by it
    assert limit.filter(record("memlane.sessions.working", logging.WARNING, "summary failed"))
    assert limit.filter(record(extraction, logging.ERROR, template, "x"))
    assert limit.filter(record(extraction, logging.INFO, template, "x"))
    now[0] = 10.5
    after = record(extraction, logging.WARNING, template, "refused")
    assert limit.filter(after)
    assert after.getMessage() == (
        "fact extraction skipped, LLM unavailable: refused (3 more like it held back)"
    )
    # the access log limits its own warnings per route and status
    access = record("memlane.access", logging.WARNING, "%s %s %d", "POST", "/v1/x", 502)
    assert limit.filter(access)
    assert limit.filter(record("memlane.access", logging.WARNING, "%s %s %d", "POST", "/v1/y", 502))


def test_the_proxy_log_prints_a_burst_of_the_same_warning_once(tmp_path: object) -> None:
    root = logging.getLogger("memlane")
    saved = (list(root.handlers), root.level, root.propagate)
    try:
        configure_logging(Settings(home=tmp_path, log_level="info"))
        handler = root.handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        stream = io.StringIO()
        handler.setStream(stream)
        log = logging.getLogger("memlane.memory.extract")
        for _ in range(5):
            log.warning("fact extraction skipped, LLM unavailable: %s", "connection refused")
        assert stream.getvalue().count("fact extraction skipped") == 1
    finally:  # the rest of the suite reads memlane's records through pytest's own handler
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]
