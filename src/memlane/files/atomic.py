"""Replacing a file so that a reader, or a crash, sees the old content or the new, never half.

Every file memlane replaces goes through `write_atomic`: memory files, scaffold texts,
`meta.json`, offloaded tool outputs, the snapshot, `serve.json`. It lives in `files`, the
innermost layer that writes files, so the engine and the faces use the same guarantees:

1. the data goes to a temporary file in the same folder (a rename across file systems
   would not be atomic), named `.<name>.<random>.tmp` so a reader listing `*.md` or
   `*.json` never picks it up;
2. the temporary file is flushed and fsynced, then renamed over the target (atomic on
   POSIX and on Windows' `os.replace`);
3. the folder is fsynced, so the rename itself survives a power loss;
4. whatever fails, the temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path


def write_atomic(
    path: Path,
    data: bytes | str | Iterable[bytes],
    *,
    mode: int = 0o666,
    sync: bool = True,
    durable: bool = True,
) -> int:
    """Replace `path` with `data` (text is written as UTF-8; an iterable of byte chunks a
    chunk at a time, so a large file need not be held whole); creates the folder if
    needed. Returns the bytes written.

    `mode` is the new file's permission bits before the umask, as for any new file
    (0o600 keeps a secret to its owner from the first byte). `sync=False` leaves step 3
    to the caller, who writes several files in a folder and syncs it once.
    `durable=False` syncs nothing: the file is whole or absent after a crash of the
    process, and a crash of the machine may lose it; for what its source sends again.
    """
    chunks = [data.encode("utf-8")] if isinstance(data, str) else data
    chunks = [chunks] if isinstance(chunks, bytes) else chunks
    written = 0
    folder = path.parent
    tmp = folder / f".{path.name}.{secrets.token_hex(4)}.tmp"
    descriptor = _create(os.fspath(tmp), os.fspath(folder), mode)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            for chunk in chunks:
                written += handle.write(chunk)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync and durable:
        sync_folder(folder)
    return written


def write_atomic_many(files: Sequence[tuple[Path, bytes]]) -> None:
    """`write_atomic` for several files, their folders left to the caller (`sync_folder`
    once each): every file is written before any is fsynced, so the file system flushes
    them together (one journal commit, where one fsync each commits one each), and each
    is renamed over its target once its data is durable. Whatever fails, the temporary
    files not renamed yet are removed. The names are handled as text: building and
    formatting `Path` objects for each file's temporary name cost more than its write's
    own Python code."""
    written: list[tuple[str, str, int]] = []
    renamed = 0
    try:
        for path, payload in files:
            target = os.fspath(path)
            folder, name = os.path.split(target)
            tmp = f"{folder}/.{name}.{secrets.token_hex(4)}.tmp"
            descriptor = _create(tmp, folder, 0o666)
            written.append((target, tmp, descriptor))
            with memoryview(payload) as view:
                while view:
                    view = view[os.write(descriptor, view) :]
        for _, _, descriptor in written:
            os.fsync(descriptor)
        for target, tmp, _ in written:
            os.replace(tmp, target)
            renamed += 1
    finally:
        for index, (_, tmp, descriptor) in enumerate(written):
            os.close(descriptor)
            if index >= renamed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)


def _create(tmp: str, folder: str, mode: int) -> int:
    """A new temporary file, open for writing; its folder made when it is missing (not
    asked for first: a failed `mkdir` and a `stat` a write, in folders that exist)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        return os.open(tmp, flags, mode)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        return os.open(tmp, flags, mode)


def sync_folder(folder: Path) -> None:
    """Make a rename or a new name in `folder` durable (a no-op where folders cannot be
    opened, as on Windows)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        descriptor = os.open(folder, flags)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
