"""Scope strings as they are stored: who may see a memory (`engine.memory.scopes` says when).

- `conv:<session id>`: one conversation; `ns:<namespace>`: every conversation of a
  namespace; `global`: everything of a tenant;
- under credential tenancy each is qualified with its tenant, `t:<tenant>:ns:…`.

Plain string functions, so the store can scope the documents it derives (a session's
summary is a document of its namespace) as the engine scopes what it writes.
"""

from __future__ import annotations

import re

GLOBAL = "global"
CONVERSATION_PREFIX = "conv:"
NAMESPACE_PREFIX = "ns:"
TENANT_PREFIX = "t:"
QUALIFIED = re.compile(r"^t:(?P<tenant>[0-9a-f]{32}):(?P<scope>.+)$", re.S)
"""A scope qualified by its tenant (`t:<tenant id>:<scope>`)."""


def qualified(scope: str, tenant: str = "") -> str:
    """`scope` as it is stored for `tenant` ("" leaves it as it is)."""
    return f"{TENANT_PREFIX}{tenant}:{scope}" if tenant else scope


def conversation_scope(session_id: str, tenant: str = "") -> str:
    return qualified(f"{CONVERSATION_PREFIX}{session_id}", tenant)


def namespace_scope(namespace: str, tenant: str = "") -> str:
    return qualified(f"{NAMESPACE_PREFIX}{namespace}", tenant)


def global_scope(tenant: str = "") -> str:
    return qualified(GLOBAL, tenant)


def check_scope(text: str) -> str:
    """`text` when it is a scope: `global`, `ns:<namespace>` or `conv:<session id>`, each
    optionally qualified by a tenant (`t:<tenant id>:ns:<name>`); raises `ValueError`
    saying the forms otherwise. What a person types and what a memory file's front
    matter says pass here alike. A namespace or session id may hold any text (a
    repository's path, a client's key): a scope becomes a folder name only through
    `files.paths.safe_key`."""
    match = QUALIFIED.match(text)
    inner = match.group("scope") if match else text
    if inner == GLOBAL:
        return text
    for prefix in (CONVERSATION_PREFIX, NAMESPACE_PREFIX):
        if inner.startswith(prefix) and inner[len(prefix) :].strip():
            return text
    raise ValueError(
        f"invalid scope {text!r}: use 'global', 'ns:<namespace>' or 'conv:<session id>' "
        "(a tenant's: 't:<tenant id>:' before it)"
    )
