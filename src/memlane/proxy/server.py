"""Start the proxy: check the home, open the store, build the app, serve it with uvicorn."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from memlane.config import Settings


class ServeError(Exception):
    """The proxy cannot start; the message says what to change."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(settings: Settings, *, announce: Callable[[str], object] = print) -> None:
    import uvicorn

    from memlane.proxy.app import create_app

    app = create_app(settings)
    base = f"http://{settings.host}:{settings.port}/v1"
    announce(f"memlane proxy listening on {base} -> upstream {settings.upstream_url}")
    announce(f"point a client at it: export OPENAI_BASE_URL={base}")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
