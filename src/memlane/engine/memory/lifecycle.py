"""Start and stop long-term memory with the process that serves it.

`start_memory` catches the index up with the files (edits made while memlane
was stopped; in the background, so the proxy starts at once), queues again the
memory work of the turns a stop or a crash left unremembered
(`engine.memory.resume`), and, when
`memory_watch` is on, follows hand edits while running; of several workers, only the
primary does either (`Runtime.primary`). `stop_memory` ends the watcher. Both are
no-ops with memory disabled or in PostgreSQL mode.
"""

from __future__ import annotations

from memlane.engine.memory.resume import resume
from memlane.engine.runtime import Runtime
from memlane.store.codec import now


async def start_memory(rt: Runtime) -> None:
    if not rt.settings.memory_enabled:
        return
    book = rt.memory_book
    rt.background.spawn(book.ready(), name="memory-startup-sync")
    # the turns stored before now: what this process stores from here it remembers itself
    rt.background.spawn(resume(rt, before=now()), name="memory-resume")
    if rt.settings.memory_watch and rt.primary:  # one watcher per home
        await book.start_watching()


async def stop_memory(rt: Runtime) -> None:
    """Stop watching files and commit what is queued (memlane stops; nothing is left out)."""
    book = rt.opened_memory_book
    if book is not None:
        await book.stop_watching()
        await book.flush(sweep=True)  # hand edits no watcher saw go in too
