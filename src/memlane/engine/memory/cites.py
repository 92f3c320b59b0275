"""What a memory cites: the project files it names, recorded when it is stored.

"The service config lives in conf/app.toml", "`parse_rows` in store/rows.py returns
dicts": a memory about code names files. When such a memory (a fact, or a remembered
turn) is written, and its project folder is on this machine, each named file that
exists inside the project is recorded with what it held then (`files.project`: the git
blob id when git tracks it, else a SHA-256), with the project's HEAD commit
(`Fact.cites`). Recall compares (`engine.memory.stale`).

Runs on the write path, in the background, never in front of a response: it reads the
named files and asks git which it tracks (a subprocess).

A memory's project is its namespace when that namespace is an absolute path to a folder
on this machine (`project_of`); any other memory has no local project and is never
checked.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from memlane.engine import threads
from memlane.engine.memory.scopes import NAMESPACE_PREFIX, unqualified
from memlane.engine.runtime import Runtime
from memlane.files import project
from memlane.files.memory_files import now_utc
from memlane.types import Citations, CitedFile, Fact

log = logging.getLogger("memlane.memory")

MAX_CITED = 8
"""The most files one memory records (the first named)."""
MAX_FILE_BYTES = project.MAX_HASHED_BYTES
"""A larger file is not recorded (hashing it at recall would cost more than it is worth)."""

_PATH = re.compile(
    r"(?<![\w@:/.-])"  # not inside a longer word, an e-mail, a URL
    r"(?P<path>(?:\.{0,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*(?:/|\.[A-Za-z0-9_]{1,10}\b|(?=/)))"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_BARE = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_]{1,10})+$")
_NUMBER = re.compile(r"^[\d.]+$")


def project_of(scope: str, namespace: str | None = None) -> Path | None:
    """The project folder of a memory: its namespace (from a namespace scope, else the one
    given: a conversation's turns) when that is an absolute path to a folder here."""
    inner = unqualified(scope)
    if inner.startswith(NAMESPACE_PREFIX):
        return project.project_folder(inner.removeprefix(NAMESPACE_PREFIX))
    return project.project_folder(namespace) if namespace else None


def mentioned(text: str) -> list[str]:
    """Path-like words of `text`, in order, once each: `conf/app.toml`, `src/`,
    `store/rows.py` out of `store/rows.py:parse_rows` or `` `store/rows.py::parse_rows` ``,
    `Makefile`-less bare names with an extension (`app.toml`). Whether each is a file of
    the project is for `note` to find out."""
    found: dict[str, None] = {}
    for match in _PATH.finditer(_URL.sub(" ", text)):
        word = match.group("path").rstrip(".").removeprefix("./")
        if not word or _NUMBER.match(word) or word.startswith("/"):
            continue
        if "/" not in word.rstrip("/") and not _BARE.match(word):
            continue
        found.setdefault(word.rstrip("/"))
    return [w for w in found if w and ".." not in Path(w).parts]


def note(fact: Fact, root: Path | None) -> Fact:
    """`fact` with the project files it names recorded (`cites`), or as it is when it names
    none, has no project here, or the project cannot be read (logged). Blocking."""
    return note_all([fact], root)[0]


def note_all(facts: Sequence[Fact], root: Path | None) -> list[Fact]:
    """`note` for each fact of one project, asking git once for them all: what the write
    path calls, in a worker thread."""
    named = {fact.id: mentioned(fact.text) for fact in facts}
    words = list(dict.fromkeys(word for each in named.values() for word in each))
    if root is None or not words:
        return list(facts)
    try:
        tracked = set(project.tracked_paths(root, words))
        head = project.read_head(root)
        found = [_citations(named[fact.id], root, tracked, head) for fact in facts]
    except OSError as exc:
        log.info("cited files not recorded in %s: %s", root, exc)
        return list(facts)
    return [f if c is None else replace(f, cites=c) for f, c in zip(facts, found, strict=True)]


def citations(text: str, root: Path) -> Citations | None:
    """What `text` cites in the project at `root`, read now; None when it names no file
    of it."""
    words = mentioned(text)
    if not words:
        return None
    tracked = set(project.tracked_paths(root, words))
    return _citations(words, root, tracked, project.read_head(root))


def _citations(
    words: Sequence[str], root: Path, tracked: set[str], head: str | None
) -> Citations | None:
    paths: list[str] = []
    for word in words:
        paths += _files_named(root, word, tracked)
    files: list[CitedFile] = []
    for relative in dict.fromkeys(paths):
        cited = _cited(root, relative, relative in tracked)
        if cited is not None:
            files.append(cited)
        if len(files) >= MAX_CITED:
            break
    if not files:
        return None
    return Citations(str(root), tuple(files), now_utc(), head)


def _files_named(root: Path, word: str, tracked: set[str]) -> list[str]:
    """The project files `word` names: itself when it is one, else (a bare name) the one
    tracked file of that name (several: too vague to record)."""
    target = project.inside(root, word)
    if target is not None and target.is_file():
        return [word]
    if "/" in word:
        return []
    named = [p for p in tracked if p.rsplit("/", 1)[-1] == word]
    return named if len(named) == 1 else []


def _cited(root: Path, relative: str, tracked: bool) -> CitedFile | None:
    target = project.inside(root, relative)
    if target is None or not target.is_file() or target.stat().st_size > MAX_FILE_BYTES:
        return None
    kind = project.GIT_PREFIX if tracked else project.HASH_PREFIX
    return CitedFile(relative, project.identity(target.read_bytes(), kind))


async def noted(rt: Runtime, fact: Fact) -> Fact:
    """`fact` with the files it cites recorded again (`memory_cites` on, its project
    here): a memory a person adds or edits."""
    if not rt.settings.memory_cites:
        return fact
    bare = replace(fact, cites=None)
    was = fact.cites.root if fact.cites is not None else None
    return await threads.to_thread(lambda: note(bare, project_of(fact.scope, was)))
