"""Which project a folder belongs to: the one identity every face files a project under.

A project is a git work tree: a folder inside one (a subfolder of the repository)
belongs to the repository's root. The namespace of a project is that root's
absolute path, so two repositories both called `api` never share memories; its
display name is the root folder's name. A folder in no repository is a project of
its own (its absolute path). A folder that is not on this machine (the proxy
serves a client elsewhere) is named by the path as the client sent it.

The proxy, `memlane chat` and `memlane mcp` all ask `project_of`, so a project's
memories land under one namespace whichever face wrote them. Reading it takes a
few `stat` calls (the folder, then `.git` in it and each parent); the answer is
memoised per folder, so the request path pays them once per folder and process.
No `git` process is started.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from memlane.files.paths import repository_namespace, repository_root

MEMO_SIZE = 1_024
"""Folders whose project is remembered (per process)."""


@dataclass(frozen=True, slots=True)
class Project:
    namespace: str
    """The root's absolute path (or the path as the client sent it)."""
    name: str
    """What a person reads: the root folder's name."""


def project_of(folder: str | Path) -> Project | None:
    """The project `folder` belongs to; None for an empty or relative path."""
    text = str(folder).strip()
    if not text:
        return None
    return _project(text)


@functools.lru_cache(maxsize=MEMO_SIZE)
def _project(text: str) -> Project | None:
    path = Path(text)
    if path.is_absolute() and _is_dir(path):
        root = repository_root(path) or path.resolve()
        namespace = repository_namespace(root)
        return Project(namespace, display_name(namespace))
    if not (path.is_absolute() or PureWindowsPath(text).is_absolute()):
        return None  # a relative path names no folder memlane could tell apart
    sent = _without_trailing_separator(text)
    return Project(sent, display_name(sent))


def display_name(namespace: str) -> str:
    """A namespace as a person reads it: a path's last folder, any other name itself."""
    for pure in (PurePosixPath, PureWindowsPath):
        if pure(namespace).is_absolute():
            return pure(namespace).name or namespace
    return namespace


def forget() -> None:
    """Drop the memo (a test that turns a folder into a repository)."""
    _project.cache_clear()


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long, a folder we may not read
        return False


def _without_trailing_separator(text: str) -> str:
    stripped = text.rstrip("/\\")
    return stripped if stripped and not stripped.endswith(":") else text
