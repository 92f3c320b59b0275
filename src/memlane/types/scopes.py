"""Scope strings as they are stored: who may see a memory (`engine.memory.scopes` says when).

- `conv:<session id>`: one conversation; `ns:<namespace>`: every conversation of a
  namespace; `global`: everything of a tenant;
- under credential tenancy each is qualified with its tenant, `t:<tenant>:ns:…`.

Plain string functions, so the store can scope the documents it derives (a session's
summary is a document of its namespace) as the engine scopes what it writes.
"""

from __future__ import annotations

GLOBAL = "global"
CONVERSATION_PREFIX = "conv:"
NAMESPACE_PREFIX = "ns:"
TENANT_PREFIX = "t:"


def qualified(scope: str, tenant: str = "") -> str:
    """`scope` as it is stored for `tenant` ("" leaves it as it is)."""
    return f"{TENANT_PREFIX}{tenant}:{scope}" if tenant else scope


def conversation_scope(session_id: str, tenant: str = "") -> str:
    return qualified(f"{CONVERSATION_PREFIX}{session_id}", tenant)


def namespace_scope(namespace: str, tenant: str = "") -> str:
    return qualified(f"{NAMESPACE_PREFIX}{namespace}", tenant)


def global_scope(tenant: str = "") -> str:
    return qualified(GLOBAL, tenant)
