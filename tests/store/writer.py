"""A child process for the SQLite crash and concurrency tests: writes to a store in a loop.

    python -m tests.store.writer DB append TAG COUNT   # one append per message, prints each
    python -m tests.store.writer DB sync TAG COUNT     # resends a growing shared history

Each line printed means that write has committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def main(path: str, mode: str, tag: str, count: int) -> None:
    store = SQLiteStore(Path(path))
    session = store.ensure_session("shared")
    history: list[NewMessage] = []
    for i in range(count):
        if mode == "append":
            text = f"{tag} message {i}"
            store.append_messages(session.id, [NewMessage(Message(role="user", text=text))])
        else:
            history.append(NewMessage(Message(role="user", text=f"turn {i}")))
            store.sync_messages(session.id, history)
        sys.stdout.write(f"{i}\n")
        sys.stdout.flush()
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
