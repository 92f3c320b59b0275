"""Start the proxy: check the address and the home, open the store, bind, report, serve.

The socket is bound before anything claims the proxy is listening, so a port in use
or an address this machine does not have is one line and no "listening" claim.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from memlane.config import Settings
from memlane.config.core import is_loopback
from memlane.files import admin_token
from memlane.proxy.guard import points_at_self
from memlane.proxy.repeats import RepeatedWarnings

GIL_SWITCH_SECONDS = 0.0005
"""How long a thread may hold the GIL while another waits for it (Python's default: 5 ms).

Background work (turn files, index documents, session metadata) runs Python code in
threads of its own; each time the event loop wakes for a request while such a thread
runs, it waits up to this long for the GIL, and a request wakes the loop several
times. At 5 ms that is what background work added to a request; at 0.5 ms the loop
gets the GIL back ten times sooner, for a few more switches while both are busy."""


CLIENT_IDLE_SECONDS = 30
"""How long a client's idle connection is kept open. Clients' pools (httpx and the SDKs
built on it: 5 s) drop theirs first, so none sends a request on a connection memlane is
closing at that moment (uvicorn's own default is the same 5 s)."""


class ServeError(Exception):
    """The proxy cannot start; the message says what to change."""


def check_address(host: str) -> None:
    """An address this machine could listen on: an IP literal or a name that resolves."""
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        raise ServeError(
            f"cannot listen on {host!r}: it is not an IP address or a name this machine "
            "resolves; use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
        ) from None


def bind(settings: Settings) -> socket.socket:
    """The listening socket, or a ServeError that says what to do."""
    host, port = settings.host, settings.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = {
            errno.EADDRINUSE: ": another program (another memlane?) uses it; stop it or pass "
            "--port",
            errno.EADDRNOTAVAIL: ": this machine has no such address; use 127.0.0.1",
            errno.EACCES: ": ports below 1024 need privileges; pick a port above 1024",
        }.get(exc.errno or 0, "")
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    # Listening now, not when the server loop starts: a client that connects right after
    # the report waits in the backlog instead of being refused.
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def configure_logging(settings: Settings) -> None:
    """memlane's own lines (requests, upstream errors, background failures) on stderr; a
    warning repeated within 10 s is printed once (`proxy.repeats`)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    handler.addFilter(RepeatedWarnings())
    root = logging.getLogger("memlane")
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    root.propagate = False


def check_bind(settings: Settings) -> None:
    """Anyone who can reach a non-loopback address could read every session: require a token
    of its owner's choosing there, and refuse a weak one anywhere."""
    token = settings.admin_token.get_secret_value() if settings.admin_token else ""
    if token:
        try:
            admin_token.check(token)
        except admin_token.AdminTokenError as exc:
            raise ServeError(str(exc)) from None
    if not is_loopback(settings.host) and not token:
        raise ServeError(
            f"refusing to listen on {settings.host}, which is not a loopback address, without "
            "an admin token: set MEMLANE_ADMIN_TOKEN, or bind 127.0.0.1"
        )


def run(
    settings: Settings,
    *,
    announce: Callable[[str], object] = print,
    config_file: Path | None = None,
) -> None:
    import uvicorn

    from memlane.engine.runtime import Runtime
    from memlane.proxy.app import create_app
    from memlane.proxy.startup import probe_upstream, report
    from memlane.proxy.status import remove_serve_file, write_serve_file
    from memlane.store import StoreError, open_store

    check_address(settings.host)
    check_bind(settings)
    if points_at_self(settings, settings.upstream_url):
        raise ServeError(
            f"the upstream {settings.upstream_url} is memlane's own address: requests would "
            "loop; set MEMLANE_UPSTREAM_URL (or --upstream) to the model server, e.g. "
            "http://127.0.0.1:11434/v1 for Ollama"
        )
    if points_at_self(settings, settings.anthropic_upstream_url):
        raise ServeError(
            f"the Anthropic upstream {settings.anthropic_upstream_url} is memlane's own "
            "address: requests would loop; set MEMLANE_ANTHROPIC_UPSTREAM_URL (or "
            "--anthropic-upstream) to the model server, e.g. https://api.anthropic.com"
        )
    try:
        settings.home_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        home = settings.home_path
        raise ServeError(f"cannot create the data home {home}: {exc.strerror}") from None
    sock = bind(settings)
    if settings.port == 0:
        settings = settings.model_copy(update={"port": sock.getsockname()[1]})
    try:
        store = open_store(settings)
    except StoreError as exc:
        sock.close()
        raise ServeError(str(exc)) from None
    runtime = Runtime(settings, store)
    try:
        app = create_app(settings, runtime=runtime)
        for line in report(settings, probe_upstream(settings), config_file=config_file):
            announce(line)
        configure_logging(settings)
        config = uvicorn.Config(
            app,
            log_level="debug" if settings.log_level == "debug" else "warning",
            access_log=False,
            timeout_keep_alive=CLIENT_IDLE_SECONDS,
        )
        write_serve_file(settings)
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        remove_serve_file(settings)
        sock.close()
        runtime.close()
