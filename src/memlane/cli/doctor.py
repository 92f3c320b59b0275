"""`memlane doctor`: what has been failing, inside memlane and around it, and what to do.

Best-effort stages that fail are skipped (the request still gets its answer), logged
and recorded as `stage.failed` events of their session; the running proxy also
counts them. This reads both and explains each kind of failure with its fix; then
it looks outside (`doctor_checks`): both upstreams probed now, whether their keys
are configured, the upstream errors recent turns met, and the windows they used.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import typer

from memlane.cli.context import (
    MissingStore,
    console,
    missing_store,
    opened_store,
    print_json,
    state,
)
from memlane.cli.doctor_checks import check_outside
from memlane.cli.options import JsonOpt
from memlane.cli.status_cmd import from_proxy
from memlane.engine.failopen import EVENT

SESSIONS_READ = 200
"""Most recently active sessions whose failure events are read."""

ADVICE: dict[tuple[str, str], str] = {
    ("recall", "TimeoutError"): "recall took longer than MEMLANE_RECALL_DEADLINE_MS: the first "
    "search after a start loads the index (warmed at start-up); if it keeps happening, raise "
    "the deadline or check the machine's load",
    ("recall", "*"): "long-term recall failed: run `memlane memory reindex`; if the store is "
    "damaged, `memlane store info` says how",
    ("governance", "*"): "governance failed and the request was forwarded ungoverned: an "
    "oversized request may then be refused by the upstream; please report the error",
    ("scaffold", "*"): "the TODO / pinned / summary scaffold could not be read or written: "
    "check the permissions of the sessions folder under MEMLANE_HOME",
    ("extraction", "refused"): "the LLM refused the key of memlane's own calls: set "
    "MEMLANE_LLM_API_KEY (or MEMLANE_UPSTREAM_API_KEY), or let clients send their key; "
    "`memlane serve` says which key its own calls use",
    ("wait", "*"): "memlane's own work for a request (storing the turn, counting its tokens) "
    "outlasted MEMLANE_REQUEST_WAIT_SECONDS and the request went on without it: the store is "
    "slow or locked (another process, a full disk); `memlane store info` says which",
    ("extraction", "*"): "fact extraction failed: memlane's own LLM calls need a model and a "
    "key (MEMLANE_LLM_MODEL, MEMLANE_LLM_API_KEY or the client's key)",
}


FILE_ERRORS = frozenset(
    {"OSError", "PermissionError", "FileNotFoundError", "IsADirectoryError", "NotADirectoryError"}
)
"""Failures of the file system, whatever the stage: no model or key fixes those."""
FILE_ADVICE = (
    "memlane could not write or read its files: check that MEMLANE_HOME and the folders in it "
    "(memory/, sessions/) are writable by this user and the disk has room"
)


def advice(stage: str, kind: str) -> str:
    if (stage, kind) in ADVICE:
        return ADVICE[(stage, kind)]
    if kind in FILE_ERRORS:
        return FILE_ADVICE
    return ADVICE.get((stage, "*"), "see the proxy's log")


def error_kind(detail: str) -> str:
    """`OSError` from `OSError(30, 'Read-only file system')`: the class a recorded error
    names first, when it names one ("error" otherwise)."""
    found = re.match(r"([A-Za-z_][A-Za-z0-9_]*(?:Error|Exception))\b", detail.strip())
    return found.group(1) if found else "error"


def doctor(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Explain what has been failing (recall, scaffold, governance, extraction) and the fix."""
    loaded = state(ctx).loaded()
    settings = loaded.settings
    running = from_proxy(settings)
    counts: Counter[tuple[str, str]] = Counter()
    last: dict[tuple[str, str], str] = {}
    missing = missing_store(settings, loaded.sources)
    if missing is not None:  # a failed check, not a reason to create an empty home
        outside = check_outside(loaded, None, SESSIONS_READ)
        outside.problems.insert(0, _missing(missing))
    else:
        with opened_store(settings) as store:
            for session in store.list_sessions(limit=SESSIONS_READ, tenant=None):  # all tenants
                for event in store.list_events(session.id, kind=EVENT):
                    key = (str(event.payload.get("stage")), str(event.payload.get("type")))
                    counts[key] += 1
                    last[key] = str(event.payload.get("error", ""))
            outside = check_outside(loaded, store, SESSIONS_READ)
    problems: list[dict[str, Any]] = [
        {
            "stage": stage,
            "type": kind,
            "count": n,
            "last_error": last[(stage, kind)],
            "advice": advice(stage, kind),
        }
        for (stage, kind), n in counts.most_common()
    ]
    extraction = (running or {}).get("last_extraction")
    if extraction and not extraction.get("ok"):
        detail = str(extraction.get("detail", ""))
        problems.append(
            {
                "stage": "extraction",
                "type": error_kind(detail),
                "count": 1,
                "last_error": detail,
                "advice": advice("extraction", error_kind(detail)),
            }
        )
    problems = outside.problems + problems
    report = {
        "proxy_running": bool(running and running.get("running")),
        "upstreams": outside.upstreams,
        "windows": outside.windows,
        "problems": problems,
    }
    if as_json:
        print_json(report)
        return
    _print_outside(report)
    if not problems:
        console.print("nothing has failed: recall, scaffold, governance and extraction are fine")
        return
    for problem in problems:
        console.print(
            f"[bold]{problem['stage']}[/] failed {problem['count']}× ({problem['type']}): "
            f"{problem['last_error'][:200]}",
            highlight=False,
            soft_wrap=True,
        )
        console.print(f"  fix: {problem['advice']}", highlight=False, soft_wrap=True)


def _missing(missing: MissingStore) -> dict[str, Any]:
    """The store that is not there, as a failed check."""
    return {
        "stage": "store",
        "type": "missing",
        "count": 1,
        "last_error": missing.what,
        "advice": missing.fix,
    }


def _print_outside(report: dict[str, Any]) -> None:
    for upstream in report["upstreams"]:
        console.print(
            f"{upstream['name']:9} {upstream['url']} {upstream['detail']}; key {upstream['key']}",
            highlight=False,
            soft_wrap=True,
        )
    for window in report["windows"]:
        console.print(
            f"window    {window['model']}: {window['window']:,} tokens, {window['from']}",
            highlight=False,
            soft_wrap=True,
        )
