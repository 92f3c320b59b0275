"""Start the proxy: check the address and the home, open the store, bind, report, serve.

The socket is bound before anything claims the proxy is listening, so a port in use
or an address this machine does not have is one line and no "listening" claim. With
`workers` above 1, this process does that once and supervises the workers that serve
(`proxy.workers`).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from memlane.config import Settings
from memlane.config.core import is_loopback
from memlane.config.private import NotPrivateError, make_home_private
from memlane.engine.runtime import Runtime
from memlane.files import admin_token
from memlane.files.locks import CROSS_PROCESS
from memlane.proxy.guard import self_pointing
from memlane.proxy.serving import configure_logging, serve_here


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


BALANCED_PORT = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")
"""Whether each worker can listen on a socket of its own on the one port, the kernel
spreading new connections evenly over them (Linux's SO_REUSEPORT). Elsewhere the workers
share one socket, and whichever is idle first takes the next connections: a burst of
new keep-alive connections (a fleet of agents starting) may then land mostly on one."""


def bind(settings: Settings, *, reuse_port: bool = False) -> socket.socket:
    """The listening socket, or a ServeError that says what to do."""
    host, port = settings.host, settings.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
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


def bind_workers(settings: Settings) -> list[socket.socket]:
    """One listening socket per worker on the same port where the kernel balances them
    (`BALANCED_PORT`), else one socket they share. A worker's socket outlives the worker:
    connections that arrive while a dead one is replaced wait for the new one."""
    probe = bind(settings)  # without SO_REUSEPORT: fails when anything holds the port
    if not BALANCED_PORT:
        return [probe]
    port = probe.getsockname()[1]
    probe.close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(settings.workers):
            sockets.append(bind(settings.model_copy(update={"port": port}), reuse_port=True))
    except ServeError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


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
    """`memlane serve`: the checks, the socket, the store and the report once, then serve
    here (one process) or through a supervisor of `settings.workers` processes."""
    # the app (and its HTTP client) before the report: a client that connects as soon as
    # it is printed waits for the lifespan only, not for these imports
    import memlane.proxy.app  # noqa: F401
    from memlane.engine.governance.budget import remember_listed_windows
    from memlane.proxy.startup import probe_both, report
    from memlane.proxy.status import remove_serve_file, write_serve_file
    from memlane.store import StoreError, open_store

    check_address(settings.host)
    check_bind(settings)
    check_workers(settings)
    loop = self_pointing(settings)
    if loop is not None:
        raise ServeError(loop)
    try:
        make_home_private(settings.home_path)
    except NotPrivateError as exc:
        raise ServeError(str(exc)) from None
    except OSError as exc:
        home = settings.home_path
        raise ServeError(f"cannot create the data home {home}: {exc.strerror}") from None
    sockets = [bind(settings)] if settings.workers == 1 else bind_workers(settings)
    if settings.port == 0:
        settings = settings.model_copy(update={"port": sockets[0].getsockname()[1]})
    try:
        store = open_store(settings)  # migrations run here, once, before any worker opens it
    except StoreError as exc:
        for sock in sockets:
            sock.close()
        raise ServeError(str(exc)) from None
    probes = probe_both(settings)
    try:  # the windows the upstream states, for governance (never in front of a request)
        remember_listed_windows(store, probes.openai.windows)
    except StoreError as exc:
        announce(f"warning: could not keep the upstream's model windows: {exc}")
    runtime = Runtime(settings, store) if settings.workers == 1 else None
    if runtime is None:
        store.close()  # each worker opens its own
    try:
        configured = settings.admin_token.get_secret_value() if settings.admin_token else None
        try:
            admin_token.ensure(settings.home_path, configured)  # generated once, for every worker
        except admin_token.AdminTokenError as exc:
            raise ServeError(str(exc)) from None
        lines = report(settings, probes.openai, config_file=config_file, anthropic=probes.anthropic)
        for line in lines:
            announce(line)
        configure_logging(settings)
        if runtime is not None:
            write_serve_file(settings)
            serve_here(settings, runtime, sockets[0])
            return
        from memlane.proxy.workers import Supervisor

        failure = Supervisor(settings, sockets).run()
        if failure:
            raise ServeError(failure)
    finally:
        remove_serve_file(settings)
        for sock in sockets:
            sock.close()
        if runtime is not None:
            runtime.close()


def check_workers(settings: Settings) -> None:
    """Several workers share the home through file locks, which need POSIX `flock`."""
    if settings.workers > 1 and not CROSS_PROCESS:
        raise ServeError(
            "--workers above 1 needs file locks this system does not have (fcntl); "
            "run one process (MEMLANE_WORKERS=1)"
        )
