"""Fixtures for the inspector's tests: a running proxy, and clients signed in to its `/ui`.

`browser_client(proxy)` logs in through the form, as a person does, and keeps the
cookie; `form(client, url, **fields)` posts a form with the page's CSRF token, read
from the page the way a browser would have it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.support.upstream import RunningProxy

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def token_of(proxy: RunningProxy) -> str:
    return proxy.admin["authorization"].removeprefix("Bearer ")


@contextmanager
def bearer_client(proxy: RunningProxy) -> Iterator[httpx.Client]:
    """A script's client: the admin token as a bearer header."""
    with httpx.Client(base_url=proxy.base, headers=proxy.admin, timeout=30) as client:
        yield client


@contextmanager
def browser_client(proxy: RunningProxy) -> Iterator[httpx.Client]:
    """A client logged in through the login form, holding the session cookie."""
    with httpx.Client(base_url=proxy.base, timeout=30) as client:
        page = client.get("/ui/login")
        assert page.status_code == 200
        csrf = CSRF.search(page.text)
        assert csrf is not None
        done = client.post(
            "/ui/login", data={"csrf": csrf.group(1), "token": token_of(proxy), "next": "/ui"}
        )
        assert done.status_code == 303, done.text
        yield client


def csrf_of(client: httpx.Client, page_url: str) -> str:
    page = client.get(page_url)
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found is not None, f"no CSRF token on {page_url}"
    return found.group(1)


def form(client: httpx.Client, url: str, page_url: str, **fields: Any) -> httpx.Response:
    """POST a form the way the page at `page_url` does (with its CSRF token)."""
    return client.post(url, data={"csrf": csrf_of(client, page_url), **fields})
