"""Long-term memory as plain Markdown files: the source of truth in embedded (SQLite) mode.

Layout under the memory root (`$MEMLANE_HOME/memory`)::

    entries/<scope>/facts/<timestamp>__<id>.md
    entries/<scope>/turns/user/<timestamp>__<id>.md
    entries/<scope>/turns/assistant/<timestamp>__<id>.md
    entries/<scope>/summaries/<timestamp>__<id>.md
    entries/<scope>/deleted/<same sub-folders>/…      # soft deletes and tombstones

Each file is YAML front matter (`id`, `role`, `scope`, `conversation_id`,
`created_at`, validity: `valid_from`, `valid_to`, the links between versions:
`replaced_by`, `supersedes`, `summary_kind`, provenance: `source_session`,
`source_message`, and `source_turns`, the turn entries a fact came from; `cites`, the project
files a memory names as they were when it was noted: the project folder, its HEAD commit,
each file's path and blob id) and the text as body,
so a person can read, edit, create or delete any memory with an editor (setting
`valid_to` by hand closes a memory: recall stops showing it after that moment).
`<scope>` is `global` or the scope made safe by `files.paths.safe_key`; the
exact scope is also kept in the folder's `.scope` file, so a hand-written file
without front matter still lands in the right scope. Writes are atomic
(`files.atomic.write_atomic`): a crash leaves the old file or the new one. What a file
must be to be read as a memory (its id, its size, no symbolic link) is
`files.memory_checks`; its scope follows the scope grammar (`types.scopes.check_scope`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from memlane.files.atomic import sync_folder, write_atomic, write_atomic_many
from memlane.files.memory_checks import ID_PATTERN, MAX_ENTRY_BYTES, check_id, read_entry
from memlane.files.memory_render import render
from memlane.files.paths import safe_key
from memlane.store.codec import cites_from_json
from memlane.types import Fact, FactRole
from memlane.types.scopes import check_scope

ENTRIES = "entries"
DELETED = "deleted"
SCOPE_FILE = ".scope"
GLOBAL_SCOPE = "global"
ROLE_DIRS: dict[FactRole, str] = {
    "memory": "facts",
    "user": "turns/user",
    "assistant": "turns/assistant",
    "summary": "summaries",
}
_DIR_ROLES = {value: key for key, value in ROLE_DIRS.items()}
_NAME = re.compile(rf"^(?P<stamp>[^_]+)__(?P<id>{ID_PATTERN})\.md$")
_STAMP = "%Y%m%dT%H%M%S%fZ"
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it (5-9x faster, same output)."""


class MemoryFileError(Exception):
    """A memory file that cannot be read as a memory; the message names the file and why."""


@dataclass(frozen=True, slots=True)
class EntryFile:
    """A memory read from disk, with the hash of the exact bytes (the snapshot compares it)."""

    path: Path
    fact: Fact
    digest: str


def new_id() -> str:
    return uuid.uuid4().hex


def now_utc() -> datetime:
    return datetime.now(UTC)


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def id_from_name(name: str) -> str | None:
    """The entry id a file name carries (`<timestamp>__<id>.md`), if it follows the layout."""
    match = _NAME.match(name)
    return match.group("id") if match else None


def scope_dir_name(scope: str) -> str:
    """The folder of a scope: `global` stays readable, everything else goes through safe_key."""
    return GLOBAL_SCOPE if scope == GLOBAL_SCOPE else safe_key(scope)


def parse(
    text: str,
    *,
    path: Path,
    scope_hint: str | None,
    role_hint: FactRole | None,
    deleted: bool,
    mtime: datetime,
) -> Fact:
    """An entry from file text. Missing fields come from the file's place; bad ones raise."""
    meta, body = _split_front_matter(text, path)
    body = body.strip()
    if not body:
        raise MemoryFileError(f"{path}: empty memory (no text after the front matter)")
    name = _NAME.match(path.name)
    fact_id = _id(meta, "id", path) or (name.group("id") if name else _path_id(path))
    role = _text(meta, "role", path) or role_hint
    if role not in ROLE_DIRS:
        raise MemoryFileError(f"{path}: role must be one of {sorted(ROLE_DIRS)}, not {role!r}")
    scope = _text(meta, "scope", path) or scope_hint
    if not scope:
        raise MemoryFileError(f"{path}: no scope in the front matter nor in the folder")
    try:
        check_scope(scope)
    except ValueError as exc:
        raise MemoryFileError(f"{path}: {exc}") from None
    created = _time(meta, "created_at", path) or mtime
    valid_from, valid_to = _time(meta, "valid_from", path), _time(meta, "valid_to", path)
    if valid_to is not None and valid_to < (valid_from or created):
        raise MemoryFileError(f"{path}: valid_to is before the memory became valid")
    source_message = meta.get("source_message")
    if source_message is not None and not isinstance(source_message, int):
        raise MemoryFileError(f"{path}: source_message must be an integer")
    source_turns = meta.get("source_turns") or []
    if not isinstance(source_turns, list) or not all(isinstance(t, str) for t in source_turns):
        raise MemoryFileError(f"{path}: source_turns must be a list of memory ids")
    for turn in source_turns:
        _id({"source_turns": turn}, "source_turns", path)
    cites = meta.get("cites")
    try:
        cited = None if cites is None else cites_from_json(cites)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MemoryFileError(
            f"{path}: cites must hold root, noted_at and files (each a path and a blob): {exc}"
        ) from None
    return Fact(
        id=fact_id,
        scope=scope,
        conversation_id=_text(meta, "conversation_id", path) or scope,
        role=role,
        text=body,
        created_at=created,
        updated_at=_time(meta, "updated_at", path) or max(created, mtime),
        deleted=deleted,
        replaced_by=_id(meta, "replaced_by", path),
        summary_kind=_text(meta, "summary_kind", path),
        source_session=_text(meta, "source_session", path),
        source_message=source_message,
        valid_from=valid_from,
        valid_to=valid_to,
        supersedes=_id(meta, "supersedes", path),
        source_turns=() if deleted else tuple(source_turns),
        cites=cited,
    )


class MemoryFiles:
    """Reads and writes the Markdown tree. Stateless apart from its root; safe to share."""

    def __init__(self, root: Path, *, max_bytes: int = MAX_ENTRY_BYTES) -> None:
        self.root = root
        self.entries = root / ENTRIES
        self.max_bytes = max_bytes
        """A bigger file is skipped (`memory_checks.max_entry_bytes`)."""

    # --- layout -----------------------------------------------------------
    def scope_dir(self, scope: str) -> Path:
        path = self.entries / scope_dir_name(scope)
        if path.parent != self.entries:
            raise ValueError(f"memory scope folder escapes {self.entries}")
        return path

    def path_for(self, fact: Fact) -> Path:
        """Where an entry lives: active, or under `deleted/` once tombstoned. A `ValueError`
        for an id that is not one (`memory_checks.ENTRY_ID`): never a path of its own."""
        check_id(fact.id)
        base = self.scope_dir(fact.scope)
        if fact.deleted:
            base = base / DELETED
        stamp = fact.created_at.astimezone(UTC).strftime(_STAMP)
        return base / ROLE_DIRS[fact.role] / f"{stamp}__{fact.id}.md"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def find(self, fact: Fact) -> Path | None:
        """The file currently holding this entry (a hand edit may have changed its name)."""
        expected = self.path_for(fact)
        if expected.exists():
            return expected
        base = self.scope_dir(fact.scope)
        if fact.deleted:
            base = base / DELETED
        for path in base.glob(f"{ROLE_DIRS[fact.role]}/*__{fact.id}.md"):
            return path
        return None

    # --- writing ----------------------------------------------------------
    def write(
        self, fact: Fact, *, new: bool = False, folders: set[Path] | None = None
    ) -> EntryFile:
        """Write (or rewrite) an entry atomically; returns what is now on disk.

        `new`: the entry's id was just minted, so no file of it is looked for. `folders`:
        the caller makes the new name durable (`sync_folders`) once for many writes."""
        self._ensure_scope(fact.scope)
        path = self.path_for(fact)
        stale = None if new else self.find(fact)
        data = render(fact).encode("utf-8")
        write_atomic(path, data, sync=folders is None)
        if folders is not None:
            folders.add(path.parent)
        if stale is not None and stale != path:
            stale.unlink(missing_ok=True)
        return EntryFile(path, fact, digest_bytes(data))

    def write_many(
        self, facts: Sequence[tuple[Fact, bool]], folders: set[Path]
    ) -> list[tuple[EntryFile, Path | None]]:
        """`write` for several entries (each with its `new`), their files flushed together
        (`write_atomic_many`); the caller syncs `folders` (`sync_folders`). Each comes
        back with the file that held it before, if any."""
        planned: list[tuple[Path, Fact, bytes, Path | None]] = []
        for scope in {fact.scope for fact, _ in facts}:  # a stat each, not one per entry
            self._ensure_scope(scope)
        for fact, new in facts:
            path = self.path_for(fact)
            stale = None if new else self.find(fact)
            planned.append((path, fact, render(fact).encode("utf-8"), stale))
        write_atomic_many([(path, data) for path, _, data, _ in planned])
        for path, _, _, stale in planned:
            folders.add(path.parent)
            if stale is not None and stale != path:
                stale.unlink(missing_ok=True)
        return [
            (EntryFile(path, fact, digest_bytes(data)), stale)
            for path, fact, data, stale in planned
        ]

    @staticmethod
    def sync_folders(folders: set[Path]) -> None:
        """Make the names written with `write(..., folders=...)` durable, one fsync a folder."""
        for folder in sorted(folders):
            sync_folder(folder)

    def move_to_deleted(self, fact: Fact, *, replaced_by: str | None = None) -> EntryFile:
        """Soft delete: the file moves under `deleted/` with its tombstone fields set."""
        tomb = replace(
            fact,
            deleted=True,
            replaced_by=replaced_by or fact.replaced_by,
            updated_at=now_utc(),
            source_turns=(),  # a deleted fact links nothing
        )
        active = self.find(replace(fact, deleted=False))
        written = self.write(tomb)
        if active is not None and active != written.path:
            active.unlink(missing_ok=True)
        return written

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    # --- reading ----------------------------------------------------------
    def scan(self) -> Iterator[Path]:
        """Every memory file, active and deleted, in a stable order."""
        if not self.entries.is_dir():
            return
        for path in sorted(self.entries.rglob("*.md")):
            if not path.name.startswith(".") and (path.is_file() or path.is_symlink()):
                yield path  # a link too: reading it says why it is skipped

    def read(self, path: Path) -> EntryFile:
        """Parse one file; raises `MemoryFileError` when it is not a usable memory."""
        return self._read(path)[0]

    def redo_text(self, path: Path, change: Callable[[str], str]) -> EntryFile:
        """The entry at `path` with its text passed through `change` (redaction): when
        that changes it, the file is written again first, in place and atomically, with
        its front matter as it was written."""
        entry, text = self._read(path)
        body = split_front_matter(text)[1]
        changed = change(body)
        if changed == body:
            return entry
        write_atomic(path, text[: len(text) - len(body)] + changed)
        return self.read(path)

    def _read(self, path: Path) -> tuple[EntryFile, str]:
        try:
            data, stat = read_entry(path, self.root, self.max_bytes)
        except ValueError as exc:
            raise MemoryFileError(f"{path}: {exc}") from None
        except OSError as exc:
            raise MemoryFileError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise MemoryFileError(f"{path}: not UTF-8 text") from None
        scope_hint, role_hint, deleted = self._place(path)
        mtime = datetime.fromtimestamp(stat.st_mtime, UTC)
        fact = parse(
            text,
            path=path,
            scope_hint=scope_hint,
            role_hint=role_hint,
            deleted=deleted,
            mtime=mtime,
        )
        return EntryFile(path, fact, digest_bytes(data)), text

    def is_entry_path(self, path: Path) -> bool:
        try:
            rel = path.relative_to(self.entries)
        except ValueError:
            return False
        return path.suffix == ".md" and not path.name.startswith(".") and len(rel.parts) >= 3

    def _place(self, path: Path) -> tuple[str | None, FactRole | None, bool]:
        """Scope, role and deleted-ness implied by where a file sits."""
        rel = path.relative_to(self.entries).parts
        scope_folder = self.entries / rel[0]
        rest = list(rel[1:-1])
        deleted = bool(rest) and rest[0] == DELETED
        if deleted:
            rest = rest[1:]
        role = _DIR_ROLES.get("/".join(rest))
        return self._scope_of(scope_folder), role, deleted

    def _scope_of(self, folder: Path) -> str | None:
        if folder.name == GLOBAL_SCOPE:
            return GLOBAL_SCOPE
        try:
            return (folder / SCOPE_FILE).read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def _ensure_scope(self, scope: str) -> None:
        folder = self.scope_dir(scope)
        marker = folder / SCOPE_FILE
        if not marker.exists():
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(marker, f"{scope}\n".encode())


def entry_text(data: bytes) -> str:
    """The text a version of an entry file holds, its front matter left out unread (a
    broken one too): what `--purge` scrubs from commit messages (`files.git_purge`)."""
    text = data.decode("utf-8", "replace")
    try:
        return split_front_matter(text)[1].strip()
    except ValueError:  # not closed: nothing tells the text apart from the rest
        return text.strip()


def split_front_matter(text: str) -> tuple[str | None, str]:
    """A file's front matter, its YAML unread (None when there is none), and its body.
    Raises `ValueError` when the front matter is not closed by a `---` line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.startswith("---"):
        return None, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return None, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise ValueError("front matter is not closed by a '---' line")


def _split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    try:
        head, body = split_front_matter(text)
    except ValueError as exc:
        raise MemoryFileError(f"{path}: {exc}") from None
    if head is None:
        return {}, body
    try:
        meta = yaml.load(head, Loader=_LOADER) if head.strip() else {}
    except yaml.YAMLError as exc:
        raise MemoryFileError(f"{path}: front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise MemoryFileError(f"{path}: front matter must be a mapping of fields")
    return meta, body


def _text(meta: dict[str, Any], key: str, path: Path) -> Any:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise MemoryFileError(f"{path}: {key} must be text")
    return str(value).strip() or None


def _id(meta: dict[str, Any], key: str, path: Path) -> str | None:
    value = _text(meta, key, path)
    try:
        return None if value is None else check_id(value, key)
    except ValueError as exc:
        raise MemoryFileError(f"{path}: {exc}") from None


def _time(meta: dict[str, Any], key: str, path: Path) -> datetime | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise MemoryFileError(f"{path}: {key} is not an ISO 8601 time: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _path_id(path: Path) -> str:
    """A stable id for a hand-made file with no id anywhere: a hash of its name."""
    return "f" + hashlib.sha256(path.name.encode("utf-8")).hexdigest()[:31]
