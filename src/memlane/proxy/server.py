"""Start the proxy: check the address and the home, open the store, build the app, serve it."""

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


def check_bind(settings: Settings) -> None:
    """Anyone who can reach a non-loopback address could read every session: require a token."""
    token = settings.admin_token.get_secret_value() if settings.admin_token else ""
    if not is_loopback(settings.host) and not token:
        raise ServeError(
            f"refusing to listen on {settings.host}, which is not a loopback address, without "
            "an admin token: set MEMLANE_ADMIN_TOKEN, or bind 127.0.0.1"
        )


def run(settings: Settings, *, announce: Callable[[str], object] = print) -> None:
    import uvicorn

    from memlane.engine.runtime import Runtime
    from memlane.proxy.app import create_app
    from memlane.store import StoreError, open_store

    check_bind(settings)
    try:
        settings.home_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        home = settings.home_path
        raise ServeError(f"cannot create the data home {home}: {exc.strerror}") from None
    try:
        store = open_store(settings)
    except StoreError as exc:
        raise ServeError(str(exc)) from None
    runtime = Runtime(settings, store)
    try:
        app = create_app(settings, runtime=runtime)
        base = f"http://{settings.host}:{settings.port}/v1"
        announce(f"memlane proxy listening on {base} -> upstream {settings.upstream_url}")
        announce(f"point a client at it: export OPENAI_BASE_URL={base}")
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            access_log=settings.log_level == "debug",
        )
    finally:
        runtime.close()
