"""Tenants: whose sessions and memories a request may reach.

With `tenancy = none` (one person, loopback) everything belongs to the tenant "".
With `tenancy = credential` (the default off loopback) every session and memory
belongs to the tenant of the credential that created it: an HMAC-SHA256 of the
client's key (its `Authorization` bearer value or `x-api-key`) under a salt memlane
generated once, cut to 32 hex characters. The key itself is never stored or logged,
and without the salt the tenant id cannot be tested against guessed keys.

The salt lives in the home (`tenant_salt`, mode 0600) with the SQLite store; with
PostgreSQL, replicas share no disk, so it lives in the database's meta table, the
first replica's value winning.

What a tenant scopes: sessions (a key is unique per tenant; lookups by id, prefix,
key or name see only the tenant's sessions), memory scopes (`engine.memory.scopes`
qualifies a tenant's `conv:`, `ns:` and `global` scopes), and the session folder.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from memlane.config import Settings
from memlane.files.home_secret import ensure_secret
from memlane.store import MetaStore
from memlane.store.urls import StoreKind

NO_TENANT = ""
"""The tenant of everything under `tenancy = none`, and of data made before tenancy."""
OPERATOR = None
"""What the operator's faces (the CLI, the library, the admin token) pass as the tenant of
a lookup: every tenant's sessions. The person who holds the home can read them anyway."""
SALT_FILE = "tenant_salt"
SALT_META = "tenancy.salt"
TENANT_CHARS = 32


def tenant_salt(settings: Settings, store: MetaStore, kind: StoreKind) -> bytes:
    """The salt tenant ids are made with: the home's file, or the shared database's."""
    if kind == "postgres":
        return store.claim_meta(SALT_META, secrets.token_urlsafe(32)).encode("utf-8")
    return ensure_secret(settings.home_path / SALT_FILE).encode("utf-8")


def tenant_of(salt: bytes, credential: str) -> str:
    """The tenant id of a credential: never the credential, never reversible without the salt."""
    digest = hmac.new(salt, credential.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return digest.hexdigest()[:TENANT_CHARS]


def short(tenant: str) -> str:
    """A tenant as a person reads it in a table: `-` for none, else its first 8 characters."""
    return tenant[:8] if tenant else "-"
