"""Server-rendered pages: Jinja2 templates, one block at a time for htmx, and safe headers.

A full page for a normal request; only the block htmx asked for (by its
`HX-Target`) for a partial one, rendered with jinja2-fragments from the same
template, so a page and its live updates never diverge. Every response carries
a Content-Security-Policy that allows nothing but memlane's own origin: the
page can make no external request, and a stored text with markup in it is
escaped by Jinja2's autoescaping (and could not run a script if it were not).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from jinja2_fragments import render_block
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from memlane.engine.governance.report import describe_event
from memlane.ui.lines import event_line, plural

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
STATIC_FILES = ("style.css", "htmx.min.js")


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("memlane.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ago"] = ago
    env.filters["count"] = count
    env.filters["usd"] = usd
    env.filters["stamp"] = stamp
    env.filters["score"] = score
    env.filters["clip"] = clip
    env.filters["preview"] = preview
    env.filters["lines"] = line_count
    env.filters["collapsed"] = collapsed
    env.filters["plural"] = plural
    env.filters["event_line"] = event_line
    env.filters["compaction_line"] = describe_event
    return env


def page(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> Response:
    """The whole page, or the block named by htmx's target (`id="…"` = block name)."""
    target = request.headers.get("hx-target", "")
    env = environment()
    if request.headers.get("hx-request") and not request.headers.get("hx-boosted") and target:
        block = target.replace("-", "_")
        if block in env.get_template(template).blocks:
            return html(render_block(env, template, block, **context), status=status)
    return html(env.get_template(template).render(**context), status=status)


def fragment(template: str, block: str, context: dict[str, Any]) -> Response:
    return html(render_block(environment(), template, block, **context))


def html(text: str, *, status: int = 200) -> Response:
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)


@cache
def static_file(name: str) -> bytes:
    return resources.files("memlane.ui").joinpath("static", name).read_bytes()


# --- filters --------------------------------------------------------------------------


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """`42s ago`, `5m ago`, `3h ago`, `2d ago`."""
    if moment is None:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def count(value: int | float | None) -> str:
    """`1,234`, `12.3k`, `4.5M`: a number at a glance."""
    if value is None:
        return ""
    number = float(value)
    if abs(number) >= 1_000_000:
        return f"{number / 1_000_000:.1f}M"
    if abs(number) >= 10_000:
        return f"{number / 1_000:.1f}k"
    return f"{int(number):,}"


def usd(value: float | None) -> str:
    if not value:
        return "—"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def stamp(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


CLIP_CHARS = 6_000
"""Characters of one message shown in a timeline; the export has every character."""


def clip(text: str) -> str:
    if len(text) <= CLIP_CHARS:
        return text
    more = len(text) - CLIP_CHARS
    return f"{text[:CLIP_CHARS]}\n… ({more:,} more characters: export the session)"


PREVIEW_LINES = 6
PREVIEW_CHARS = 480
"""How much of a tool result shows before its control to expand: a session of twenty
messages whose results each filled ninety lines was a page 10,000 pixels tall."""


def line_count(text: str) -> int:
    return text.count("\n") + 1 if text else 0


def collapsed(text: str) -> bool:
    """Whether a tool result is shown as a preview with a control to expand it."""
    return line_count(text) > PREVIEW_LINES or len(text) > PREVIEW_CHARS


def preview(text: str) -> str:
    """The start of a long tool result: its first lines, at most `PREVIEW_CHARS`."""
    head = "\n".join(text.splitlines()[:PREVIEW_LINES])
    return head if len(head) <= PREVIEW_CHARS else head[:PREVIEW_CHARS].rstrip() + "…"


def score(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
