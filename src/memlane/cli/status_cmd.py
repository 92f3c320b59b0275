"""`memlane status`: is a proxy running on this home, and is memory working?"""

from __future__ import annotations

from typing import Any

import typer

from memlane.cli.context import console, escape, opened_store, print_json, stored_settings
from memlane.cli.options import JsonOpt
from memlane.config import Settings


def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The proxy on this home (upstream, uptime, requests and errors in the last hour,
    background queue, last extraction, CPU time by part) and the store's session and memory
    counts."""
    settings = stored_settings(ctx)
    report = from_proxy(settings) or _from_store(settings)
    report["today"] = _today(settings)
    if as_json:
        print_json(report)
        return
    _print(report)


def from_proxy(settings: Settings) -> dict[str, Any] | None:
    """Ask the running proxy, if `serve.json` names a live one."""
    import httpx

    from memlane.files.serve_file import read_serve_file

    found = read_serve_file(settings.home_path)
    if found is None or not isinstance(found.get("url"), str):
        return None
    pid, url = int(found["pid"]), str(found["url"])
    supervised: dict[str, Any] = {
        k: found[k] for k in ("workers", "restarts", "last_restart") if k in found
    }
    from memlane.files import admin_token

    configured = settings.admin_token.get_secret_value() if settings.admin_token else ""
    token = configured.strip() or admin_token.read(settings.home_path) or ""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    head = {"running": True, "url": url, "pid": pid}
    try:
        response = httpx.get(f"{url}/v1/memlane/status", headers=headers, timeout=5)
    except httpx.HTTPError as exc:
        return {**head, **supervised, "error": f"not answering: {exc!r}"}
    if response.status_code != 200:
        return {**head, **supervised, "error": f"HTTP {response.status_code}"}
    return {**head, **response.json(), **supervised}  # the pids of the workers, not a count


def cpu_line(spent: dict[str, float]) -> str:
    """`12.3 s since start: event loop 6.1, memory book 3.2, …`, the largest part first."""
    from memlane.proxy.cpu import PROCESS

    total = spent.get(PROCESS, 0.0)
    parts = sorted(
        ((part, seconds) for part, seconds in spent.items() if part != PROCESS and seconds),
        key=lambda item: -item[1],
    )
    return f"{total:.1f} s since start: " + ", ".join(f"{p} {s:.1f}" for p, s in parts)


def _from_store(settings: Settings) -> dict[str, Any]:
    with opened_store(settings) as store:
        return {
            "running": False,
            "sessions": store.count("sessions"),
            "memories": store.count("facts"),
        }


def _today(settings: Settings) -> dict[str, int]:
    """Today's turns as the store counts them: every process's (the proxy's workers, `chat`,
    the library), not only what the running proxy saw since it started."""
    from memlane.engine.turnlog import COMPACTIONS, FAILED, REQUESTS, today

    with opened_store(settings) as store:
        counts = store.daily_counts(since=today()).get(today(), {})
    return {name: counts.get(name, 0) for name in (REQUESTS, FAILED, COMPACTIONS)}


def _print(report: dict[str, Any]) -> None:
    if not report["running"]:
        console.print("no proxy is running on this home (start one: memlane serve)")
    else:
        console.print(f"proxy     {report['url']} (pid {report['pid']})")
        if "error" in report:
            console.print(f"          {escape(str(report['error']))}")
        else:
            hours, rest = divmod(int(report["uptime_seconds"]), 3600)
            console.print(f"upstream  {report['upstream_url']}")
            console.print(f"uptime    {hours}h {rest // 60}m")
            console.print(
                f"last hour {report['requests_last_hour']} requests, "
                f"{report['errors_last_hour']} errors"
            )
            workers = report.get("workers")
            if isinstance(workers, list):
                pids = ", ".join(str(w["pid"]) for w in workers)
                restarts = report.get("restarts", 0)
                line = f"workers   {len(workers)} (pids {pids}), {restarts} restart(s)"
                if report.get("last_restart"):
                    line += f"; last: {report['last_restart']}"
                console.print(line)
            console.print(f"background {report['background_pending']} task(s) pending")
            if report.get("cpu_seconds"):
                console.print(f"cpu       {cpu_line(report['cpu_seconds'])}", highlight=False)
            last = report.get("last_extraction")
            if last:
                outcome = "ok" if last["ok"] else "FAILED"
                console.print(f"extraction {outcome} at {last['at']}: {escape(last['detail'])}")
            else:
                console.print("extraction none since start")
    if "sessions" in report:
        console.print(f"store     {report['sessions']} sessions, {report['memories']} memories")
    day = report["today"]
    console.print(
        f"today     {day['requests']} turns, {day['failed_requests']} failed, "
        f"{day['compactions']} compactions (every process; `memlane doctor` explains failures)",
        highlight=False,
    )
