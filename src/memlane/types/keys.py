"""What a session key or a namespace may be: the rule the proxy and an import share.

The proxy stores a key or namespace that is too long or holds control characters (an
escape sequence, a newline) as its SHA-256 (`proxy.identity.bounded`); an import, which
has no client to answer, refuses it instead. `session:<key>` is the namespace of a
session that names no project when such sessions are isolated: no client and no file
may name it for another session.
"""

from __future__ import annotations

import re

MAX_KEY_CHARS = 200
"""Longer keys (or namespaces) are stored as `sha256:<hex>` of the key."""
OWN_NAMESPACE = "session:"
"""With `sessions_without_project = isolated`, a session that names no project is a namespace
of its own, `session:<key>`: never the namespace of a repo that happens to be called like the
key (it would read that repo's facts). A repo name may not start with it."""
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def plain_key_problem(key: str) -> str | None:
    """Why `key` cannot be stored as it is (a phrase to follow the key), or None."""
    if not key.strip():
        return "is empty"
    if len(key) > MAX_KEY_CHARS:
        return f"is longer than {MAX_KEY_CHARS} characters"
    if CONTROL.search(key):
        return "holds control characters (an escape sequence or a line break)"
    return None
