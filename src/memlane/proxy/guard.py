"""Who may drive memlane over HTTP: the checks every route passes before it runs.

memlane listens on loopback and holds every conversation an agent had, and it forwards
requests with the server's key. So, before any route:

- the `Host` must be one memlane answers to (its loopback names, its bind address,
  `allowed_hosts`): a page that rebinds its own name to 127.0.0.1 is refused;
- a request from a web page (an `Origin` header) must come from memlane's own origin or
  an `allowed_origins` entry: a page the user visits cannot spend the key or write into
  a session;
- a body sent to a JSON route must be JSON: a cross-site `text/plain` or form POST (the
  kinds a page may send without asking) is refused;
- a request that already went through this memlane (its `Via` marker) is refused, so a
  proxy configured to forward to itself, directly or through another proxy, stops;
- one of memlane's own LLM calls (`x-memlane-own-call`) is refused with 508: memlane's
  extraction prompts must never become turns that are extracted again.

Refusals are answered before anything is read, stored or forwarded.
"""

# `is_loopback` is the config layer's (the tenancy default needs it too); re-exported here.

from __future__ import annotations

import ipaddress
import json
import socket
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from memlane.config import Settings
from memlane.config.core import is_loopback
from memlane.proxy.errors import error_payload
from memlane.proxy.headers import OWN_CALL_HEADER

VIA_TOKEN = f"memlane-{uuid.uuid4().hex[:12]}"
"""This process's forwarding marker: what it adds to the `Via` header of what it forwards."""
VIA_VALUE = f"1.1 {VIA_TOKEN}"

JSON_TYPES = ("application/json",)
JSON_ROUTES = ("/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/memlane/", "/mcp")
"""memlane's own JSON routes; other `/v1/*` routes are passed through as the client sent them
(a browser's cross-site POST to those carries an Origin, which is checked)."""
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def host_name(host_header: str) -> str:
    """`example.com:8100` -> `example.com`, `[::1]:8100` -> `::1` (lower case)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(settings: Settings, host_header: str) -> bool:
    name = host_name(host_header)
    if not name or "*" in settings.allowed_hosts:
        return True
    if name in (h.lower() for h in settings.allowed_hosts):
        return True
    bind = settings.host.lower()
    if name == bind:
        return True
    if bind in WILDCARD_BINDS:
        # Listening everywhere: clients reach it by the machine's addresses. A literal
        # address cannot be a rebinding attack (that needs a name the attacker controls).
        return is_loopback(name) or _is_ip(name)
    return is_loopback(name)


def origin_allowed(settings: Settings, origin: str, host_header: str) -> bool:
    if origin in settings.allowed_origins:
        return True
    parts = urlsplit(origin)
    return bool(parts.netloc) and parts.netloc.lower() == host_header.strip().lower()


def json_body_allowed(content_type: str) -> bool:
    """A missing type is fine (no browser sends a body without one); others must be JSON."""
    kind = content_type.split(";", 1)[0].strip().lower()
    return not kind or kind in JSON_TYPES or kind.endswith("+json")


def looped(via: str) -> bool:
    return VIA_TOKEN in via


def with_via(via: str | None) -> str:
    """The `Via` value to forward: the client's, plus this memlane's marker."""
    return f"{via}, {VIA_VALUE}" if via else VIA_VALUE


def points_at_self(settings: Settings, url: str) -> bool:
    """Whether `url` reaches memlane's own listening address (a loop), after resolution:
    `localhost`, `0.0.0.0`, `[::1]`, `[::ffff:127.0.0.1]` and `/etc/hosts` names alike."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if port != settings.port:
        return False
    name = parts.hostname.lower()
    bind = settings.host.lower()
    if name == bind:
        return True
    targets = _addresses(name, port)
    if bind in WILDCARD_BINDS:
        return bool(targets)  # listening everywhere: any address of the same port is us
    binds = _addresses(bind, port)
    if targets & binds:
        return True
    return any(_is_local(t) for t in targets) and any(_is_local(b) for b in binds)


def _addresses(name: str, port: int) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Where `name` leads: itself when it is an address, else what the resolver (the hosts
    file first) says; IPv4 written as IPv6 (`::ffff:127.0.0.1`) as IPv4."""
    try:
        found = {ipaddress.ip_address(name)}
    except ValueError:
        try:
            infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return set()
        found = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos}
    return {_plain(a) for a in found}


def _plain(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def _is_local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Loopback, or the unspecified address (a connection to 0.0.0.0 reaches this host)."""
    return address.is_loopback or address.is_unspecified


OWN_URLS = (
    ("upstream_url", "MEMLANE_UPSTREAM_URL (or --upstream)"),
    ("anthropic_upstream_url", "MEMLANE_ANTHROPIC_UPSTREAM_URL (or --anthropic-upstream)"),
    ("llm_base_url", "MEMLANE_LLM_BASE_URL"),
    ("summary_base_url", "MEMLANE_SUMMARY_BASE_URL"),
    ("embedding_base_url", "MEMLANE_EMBEDDING_BASE_URL"),
)
"""Every URL memlane sends requests to by itself, and where the user sets it."""


def self_pointing(settings: Settings) -> str | None:
    """Why memlane must not start when one of its own URLs is its own address, else None."""
    for name, where in OWN_URLS:
        url = getattr(settings, name)
        if url and points_at_self(settings, url):
            return (
                f"{name} {url} is memlane's own address ({settings.host}:{settings.port}): "
                f"its requests would come back to it and loop; set {where} to the model "
                "server (e.g. http://127.0.0.1:11434/v1 for Ollama, https://api.anthropic.com), "
                "or run memlane on another port"
            )
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


CHECKED_HEADERS = frozenset({"host", "origin", "via", "content-type", OWN_CALL_HEADER})
"""The request headers `Guard.refusal` reads; the others are not decoded."""
KNOWN_HOSTS = 64


class Guard:
    """Pure ASGI middleware applying the checks above to every HTTP request."""

    def __init__(self, app: App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.hosts: dict[str, bool] = {}
        """`host_allowed` per Host header seen, up to `KNOWN_HOSTS` of them: a client sends
        the same one every time."""

    def host_allowed(self, host: str) -> bool:
        known = self.hosts.get(host)
        if known is None:
            known = host_allowed(self.settings, host)
            if len(self.hosts) < KNOWN_HOSTS:
                self.hosts[host] = known
        return known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        path = str(scope.get("path", ""))
        payload = error_payload(
            path, status, message, type="invalid_request_error", code=code, param=None
        )
        body = json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = {
            name: value.decode("latin-1")
            for raw, value in scope["headers"]
            if (name := raw.decode("latin-1").lower()) in CHECKED_HEADERS
        }
        host = headers.get("host", "")
        if not self.host_allowed(host):
            return (
                403,
                "host_not_allowed",
                f"memlane does not answer to Host {host_name(host)!r}: add it to "
                "MEMLANE_ALLOWED_HOSTS if it is yours",
            )
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(self.settings, origin, host):
            return (
                403,
                "origin_not_allowed",
                f"requests from the web page {origin!r} are refused: add the origin to "
                "MEMLANE_ALLOWED_ORIGINS if it is yours",
            )
        if OWN_CALL_HEADER in headers:
            return (
                508,
                "own_call_loop",
                "this is one of memlane's own LLM calls (it carries "
                f"{OWN_CALL_HEADER}) and memlane does not answer itself: point "
                "MEMLANE_LLM_BASE_URL / MEMLANE_SUMMARY_BASE_URL at the model server",
            )
        if looped(headers.get("via", "")):
            return (
                508,
                "forwarding_loop",
                "this request already went through this memlane: its upstream points back at "
                "it; set MEMLANE_UPSTREAM_URL to the model server",
            )
        json_route = str(scope.get("path", "")).startswith(JSON_ROUTES)
        if (
            json_route
            and scope["method"] in ("POST", "PUT", "PATCH")
            and not json_body_allowed(headers.get("content-type", ""))
        ):
            return (
                415,
                "unsupported_media_type",
                "memlane accepts JSON bodies only: send Content-Type: application/json",
            )
        return None
