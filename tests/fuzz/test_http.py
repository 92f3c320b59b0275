"""Hostile HTTP input against every route the proxy serves, found from its own route table.

For any body and headers, on every model route (Chat Completions, Responses, and
any wire format added later) and every admin route:

- memlane never answers with a 5xx of its own (the scripted upstreams, OpenAI-compatible
  and Anthropic, always answer, so every 5xx would be memlane's);
- no answer carries a traceback, and a refusal is an error object the client parses;
- a request memlane refused (nothing reached the upstream) changed nothing stored:
  the database and the files under `MEMLANE_HOME` are as they were;
- nothing is ever written outside `MEMLANE_HOME`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from memlane.config import Settings
from memlane.proxy.app import create_app
from tests.fuzz import strategies as fz
from tests.support.anthropic_upstream import ScriptedAnthropic
from tests.support.upstream import ProxyFactory, Reply, RunningProxy, ScriptedUpstream

ADMIN_PREFIX = "/v1/memlane/"
MODEL_EXAMPLES = int(150 * fz.SCALE)
ADMIN_EXAMPLES = int(25 * fz.SCALE)
PG_EXAMPLES = int(60 * fz.SCALE)
TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "/', "Internal Server Error")


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]


def routes() -> list[Route]:
    """Every documented route, read from the app itself (a new route is fuzzed as it lands)."""
    app = create_app(Settings(home=Path("/nonexistent-memlane-home")))
    found = []
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            params = operation.get("parameters", [])
            found.append(
                Route(
                    method.upper(),
                    path,
                    tuple(p["name"] for p in params if p["in"] == "path"),
                    tuple(p["name"] for p in params if p["in"] == "query"),
                )
            )
    return found


MODEL_ROUTES = [r for r in routes() if r.method == "POST" and not r.path.startswith(ADMIN_PREFIX)]
ADMIN_ROUTES = [r for r in routes() if r.path.startswith(ADMIN_PREFIX)]


def _tree(root: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        if skip is not None and Path(folder) == skip:
            dirs[:] = []
            continue
        for name in files:
            path = Path(folder) / name
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            out[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def _database(settings: Settings) -> str:
    """A digest of everything stored (SQLite's dump, or every PostgreSQL table's rows)."""
    if settings.store_url:
        with psycopg.connect(settings.store_url) as pg:
            tables = pg.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            ).fetchall()
            digest = hashlib.sha256()
            for (table,) in tables:
                row = pg.execute(
                    f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
                    f'FROM "{table}" t'
                ).fetchone()
                digest.update(f"{table}:{row[0] if row else ''}".encode())
            return digest.hexdigest()
    with sqlite3.connect(f"file:{settings.database_path}?mode=ro", uri=True) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


def own_server_error(response: httpx.Response) -> bool:
    """A 5xx that is memlane's, not the upstream's (a 502/504 `upstream_error` says the
    model could not be reached or gave nothing usable: memlane's own admin calls to it)."""
    if response.status_code < 500:
        return False
    if response.status_code == 508:  # a loop refused on purpose (`Via`, x-memlane-own-call)
        return False
    try:
        body = response.json()
        error = body["error"]
    except (ValueError, KeyError, TypeError):
        return True
    upstream = isinstance(error, dict) and error.get("type") == "upstream_error"
    if isinstance(error, dict) and body.get("type") == "error":  # Anthropic's error object
        upstream = str(error.get("message", "")).startswith("the upstream")
    return not (upstream and response.status_code in (502, 504))


@dataclass(repr=False)
class Target:
    """A proxy with memory on, the scripted upstream answering every model call."""

    proxy: RunningProxy
    upstream: ScriptedUpstream
    anthropic: ScriptedAnthropic
    outside: Path
    """A folder around MEMLANE_HOME: nothing may appear in it outside the home."""
    client: httpx.Client

    def state(self) -> tuple[str, dict[str, tuple[int, int]]]:
        """What is stored: the database's content and the home's files (not the database's)."""
        self.proxy.drain()
        # Commits (and the file snapshot with them) wait for a quiet period: flush them now,
        # or one due from an earlier request would land in the middle of a later check.
        self.proxy.call(self.proxy.runtime.memory_book.flush)
        home = self.proxy.settings.home_path
        files = {
            k: v
            for k, v in _tree(home).items()
            if not Path(k).name.startswith(self.proxy.settings.database_path.name)
        }
        return _database(self.proxy.settings), files

    def forwarded(self) -> int:
        """Requests either upstream received so far."""
        return len(self.upstream.requests) + len(self.anthropic.requests)

    def send(self, method: str, path: str, body: bytes | None, headers: dict[str, Any]) -> None:
        """One request, and every promise checked on its answer."""
        before = self.state()
        forwarded = self.forwarded()
        outside = _tree(self.outside, skip=self.proxy.settings.home_path)
        response = self.client.request(method, path, content=body, headers=headers)
        with contextlib.suppress(InvalidArgument):  # outside Hypothesis (a sweep): no events
            event(f"status {response.status_code}")
        text = response.text
        assert not own_server_error(response), f"{method} {path}: {text[:500]}"
        for marker in TRACEBACK_MARKERS:
            assert marker not in text, f"{method} {path}: {text[:500]}"
        if response.status_code >= 400:
            error = response.json()
            assert isinstance(error, dict), text[:200]
            assert "error" in error, text[:200]
            if self.forwarded() == forwarded:  # refused by memlane itself
                after = self.state()
                changed = {
                    k
                    for k in before[1].keys() | after[1].keys()
                    if before[1].get(k) != after[1].get(k)
                }
                assert after == before, (
                    f"{method} {path} {response.status_code} {text[:200]} changed the store: "
                    f"database {'changed' if after[0] != before[0] else 'same'}, files {changed}"
                )
        self.proxy.drain()
        assert _tree(self.outside, skip=self.proxy.settings.home_path) == outside


@pytest.fixture
def target(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    anthropic_upstream: ScriptedAnthropic,
    tmp_path: Path,
) -> Iterator[Target]:
    yield from _target(proxy_factory, upstream, anthropic_upstream, tmp_path)


@pytest.fixture
def pg_target(
    pg_url: str,
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    anthropic_upstream: ScriptedAnthropic,
    tmp_path: Path,
) -> Iterator[Target]:  # the database first: it is dropped after the proxy stops
    yield from _target(proxy_factory, upstream, anthropic_upstream, tmp_path, store_url=pg_url)


def _target(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    anthropic: ScriptedAnthropic,
    tmp_path: Path,
    **settings: Any,
) -> Iterator[Target]:
    upstream.respond_with(lambda request: Reply(text="ok"))
    anthropic.respond_with(lambda request: Reply(text="ok"))
    outside = tmp_path / "outside"
    home = outside / "a" / "b" / "c" / "d" / "e" / "f" / "g" / "h" / "home"
    # Memory and recall on; memlane's own LLM work (extraction, indexing) and git off: they
    # run after accepted requests only, and would slow every example down.
    proxy = proxy_factory(
        home=home,
        harness_root=outside / "harness",
        memory_extract_facts=False,
        index_enabled=False,
        memory_git=False,
        anthropic_upstream_url=anthropic.base,
        **settings,
    )
    (outside / "harness").mkdir(parents=True, exist_ok=True)
    with httpx.Client(base_url=proxy.base, timeout=60) as client:
        known = client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hello"}]},
            headers={"x-memlane-session": "known"},
        )
        assert known.status_code == 200
        yield Target(proxy, upstream, anthropic, outside, client)


def test_every_wire_format_is_fuzzed() -> None:
    paths = {r.path for r in MODEL_ROUTES}
    assert {"/v1/chat/completions", "/v1/responses", "/v1/messages"} <= paths


@pytest.mark.parametrize("route", MODEL_ROUTES, ids=lambda r: r.path)
@settings(max_examples=MODEL_EXAMPLES)
@given(body=fz.bodies, headers=fz.headers, json_type=st.booleans())
def test_model_routes_survive_any_body_and_headers(
    target: Target, route: Route, body: bytes, headers: dict[str, bytes], json_type: bool
) -> None:
    sent: dict[str, Any] = {"content-type": b"application/json"} if json_type else {}
    sent.update(headers)
    target.send(route.method, route.path, body, sent)


@pytest.mark.parametrize("route", MODEL_ROUTES, ids=lambda r: r.path)
@settings(max_examples=PG_EXAMPLES)
@given(body=fz.bodies, headers=fz.headers)
def test_model_routes_survive_any_body_on_postgresql(
    pg_target: Target, route: Route, body: bytes, headers: dict[str, bytes]
) -> None:
    """PostgreSQL refuses what SQLite stores (NUL, NaN): the same promises hold there."""
    pg_target.send(route.method, route.path, body, {"content-type": b"application/json", **headers})


NASTY_VALUES: list[Any] = [
    *fz.NASTY_TEXT,
    float("nan"),
    float("inf"),
    -(2**70),
    {"\x00": "\x00"},
    [None, float("-inf")],
]


def test_every_nasty_value_in_a_valid_request_of_every_route(target: Target) -> None:
    """A sweep, not a sample: each odd value, in a request every wire format accepts
    (its text, an extra field of its message, its metadata), on every model route."""
    _sweep(target)


def test_every_nasty_value_on_postgresql(pg_target: Target) -> None:
    _sweep(pg_target)


def _sweep(target: Target) -> None:
    for n, value in enumerate(NASTY_VALUES):
        item = {"role": "user", "content": value, "x-extra": value}
        body = {
            "model": "m",
            "max_tokens": 16,
            "metadata": {"note": value},
            "messages": [item],
            "input": [item],
        }
        for route in MODEL_ROUTES:
            target.send(
                route.method,
                route.path,
                fz.encode(body, ascii_only=n % 2 == 0),
                {"content-type": b"application/json", "x-memlane-session": f"nasty-{n}".encode()},
            )


def _admin_path(route: Route, data: st.DataObject, known_id: str) -> str:
    path = route.path
    for name in route.path_params:
        value = data.draw(st.one_of(st.just(known_id), st.just("known"), fz.path_segments))
        path = path.replace("{" + name + "}", quote(value, safe="") or "%20")
    query = {
        name: data.draw(st.one_of(fz.texts, st.integers(-5, 10**6).map(str)))
        for name in route.query_params
        if data.draw(st.booleans())
    }
    if query:
        pairs = "&".join(
            f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'))}" for k, v in query.items()
        )
        path += "?" + pairs
    return path


@pytest.mark.parametrize("route", ADMIN_ROUTES, ids=lambda r: f"{r.method} {r.path}")
@settings(max_examples=ADMIN_EXAMPLES)
@given(data=st.data(), body=fz.bodies, headers=fz.headers, authorised=st.booleans())
def test_admin_routes_survive_any_input(
    target: Target,
    route: Route,
    data: st.DataObject,
    body: bytes,
    headers: dict[str, bytes],
    authorised: bool,
) -> None:
    session = target.proxy.store.find_session("known")
    known_id = session.id if session is not None else "gone"
    path = _admin_path(route, data, known_id)
    sent: dict[str, Any] = {"content-type": b"application/json"}
    sent.update(headers)
    if authorised:
        sent["authorization"] = target.proxy.admin["authorization"].encode()
    with_body = route.method in ("POST", "PUT", "PATCH") and data.draw(st.booleans())
    target.send(route.method, path, body if with_body else None, sent)


def test_a_refusal_in_the_fuzz_is_checked_against_the_store(target: Target) -> None:
    """The checker itself: a stored change is seen, so a silent write would be caught."""
    before = target.state()
    target.client.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "a change"}]},
        headers={"x-memlane-session": "checker"},
    ).raise_for_status()
    assert target.state() != before
    assert json.loads(target.client.get("/health").text)["status"] == "ok"
