"""Where things live under the data home, and the one way a session key becomes a folder name."""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

MAX_SAFE_KEY = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@functools.lru_cache(maxsize=4096)
def safe_key(key: str) -> str:
    """A folder name for a session key: readable, bounded, collision-free, never a path.

    The readable part keeps letters, digits, `.`, `_` and `-`; a short hash of
    the exact key is always appended, so two keys that clean up to the same text
    (`a/b` and `a_b`) still get different folders, and `..` can never survive.
    """
    cleaned = _UNSAFE.sub("_", key).strip("._-")[:MAX_SAFE_KEY] or "session"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned}-{digest}"


TENANTS_FOLDER = "tenants"
"""Sessions of a tenant live under `sessions/tenants/<tenant>/`: `safe_key` always ends in
`-<hash>`, so no session key's folder can be named `tenants`."""
_TENANT = re.compile(r"^[0-9a-f]{32}$")


@functools.lru_cache(maxsize=4096)
def session_dir(sessions_root: Path, key: str, tenant: str = "") -> Path:
    """The session's folder: a direct child of `sessions_root`, or of its tenant's folder.

    Two tenants using one key get two folders. Memoised (with `safe_key`): a pure
    function the proxy calls several times a turn.
    """
    parent = sessions_root
    if tenant:
        if not _TENANT.match(tenant):
            raise ValueError(f"not a tenant id: {tenant!r}")
        parent = sessions_root / TENANTS_FOLDER / tenant
    path = parent / safe_key(key)
    if path.parent != parent or path.name in {"", ".", ".."}:
        raise ValueError(f"session folder escapes {sessions_root}")
    return path


def repository_namespace(root: Path) -> str:
    """The memory namespace of a git repository: its root's absolute path (two repositories
    both called `api` stay apart). The proxy finds it from the working directory an agent
    sends, and `memlane mcp` and `memlane chat` started inside the repository use it
    (`files.projects.project_of`), so every face files a repository's memories under one
    namespace."""
    return str(root)


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding `.git` (a work tree), or None.

    Read from the file system alone: no `git` process is started.
    """
    folder = start.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None
