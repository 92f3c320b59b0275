"""Serving the proxy's app in this process: the uvicorn server, its logging, its heap.

`proxy.server.run` serves here when memlane runs as one process; each worker of
`serve --workers N` does the same in its own (`proxy.workers`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn

from memlane.config import Settings
from memlane.engine.heap import glibc_mallopt, tune_allocator
from memlane.engine.runtime import Runtime
from memlane.proxy.repeats import RepeatedWarnings
from memlane.proxy.state import WorkerInfo

GIL_SWITCH_SECONDS = 0.0005
"""How long a thread may hold the GIL while another waits for it (Python's default: 5 ms).

Background work (turn files, index documents, session metadata) runs Python code in
threads of its own; each time the event loop wakes for a request while such a thread
runs, it waits up to this long for the GIL, and a request wakes the loop several
times. At 5 ms that is what background work added to a request; at 0.5 ms the loop
gets the GIL back ten times sooner, for a few more switches while both are busy."""


CLIENT_IDLE_SECONDS = 30
"""How long a client's idle connection is kept open. Clients' pools (httpx and the SDKs
built on it: 5 s) drop theirs first, so none sends a request on a connection memlane is
closing at that moment (uvicorn's own default is the same 5 s)."""


def collect_garbage() -> None:
    """A full collection while nothing is served yet: the garbage start-up left is freed
    before the heap is frozen (`freeze_heap`), not kept for good."""
    gc.collect()


YOUNG_COLLECTION_THRESHOLD = 10_000
"""Objects allocated (net) between two collections of the youngest generation, once the
proxy serves (Python's default: 700).

Under load hundreds of requests are in flight at once, each alive for a second or more,
so at 700 a young collection ran every millisecond or so and found nearly everything
still alive: it scanned it, moved it to the next generation, which was scanned again ten
collections later. Waiting for 10,000 lets most of a request's objects be freed by their
reference counts before any collection looks at them: the collector's CPU fell from
0.52 s to 0.23 s per 20 s (`load.py`, 200 streaming clients, memory off; the time is the
collector's own, read from `gc.callbacks`). Cycles still go at the next young collection,
a few milliseconds later."""


def tune_collector() -> None:
    """Collect the youngest generation less often (`YOUNG_COLLECTION_THRESHOLD`)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, oldest)


def freeze_heap() -> None:
    """Move every object alive now (modules, classes, the runtime, the tokenizers: about
    150k of them) out of the garbage collector's sight, for good.

    Python's full collection walks every object it tracks, and holds the GIL throughout:
    in a started proxy that took 65 to 96 ms, twice in six minutes of benchmark traffic,
    and a request in flight then waited for all of it. What start-up built lives as long
    as the process, so scanning it again finds nothing; with it frozen a full collection
    takes well under a millisecond (`benchmarks/gc_pause.py`). Objects made later are
    collected as before."""
    gc.freeze()


def configure_logging(settings: Settings, *, worker: int | None = None) -> None:
    """memlane's own lines (requests, upstream errors, background failures) on stderr; a
    warning repeated within 10 s is printed once (`proxy.repeats`); with several workers,
    each line names the worker that wrote it."""
    tag = f"[worker {worker}] " if worker is not None else ""
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s %(levelname)s {tag}%(message)s", "%H:%M:%S")
    )
    handler.addFilter(RepeatedWarnings())
    root = logging.getLogger("memlane")
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    root.propagate = False


Started = Callable[[], object] | None
"""Called once the server accepts connections (a worker tells its supervisor)."""


class MemlaneServer(uvicorn.Server):
    """uvicorn's server, ending like any function once it has shut down gracefully.

    uvicorn re-raises the signal that stopped it after shutting down, which kills the
    process before `run`'s cleanup (`serve.json`, the store). A worker of several also
    leaves Ctrl-C to its supervisor, which stops every worker with one SIGTERM: a second
    signal would make uvicorn skip the drain; and it tells the supervisor once it serves.
    """

    def __init__(
        self, config: uvicorn.Config, *, worker: bool = False, on_started: Started = None
    ) -> None:
        super().__init__(config)
        self.worker = worker
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        collect_garbage()
        await super().startup(sockets)  # the app's lifespan, then the sockets served
        freeze_heap()
        tune_collector()
        tune_allocator(glibc_mallopt())
        if self.started and self.on_started is not None:
            self.on_started()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.worker and sig == signal.SIGINT:
            return  # the terminal's Ctrl-C reaches every worker: the supervisor decides
        super().handle_exit(sig, frame)


def serve_here(
    settings: Settings,
    runtime: Runtime,
    sock: socket.socket,
    *,
    worker: WorkerInfo | None = None,
    on_started: Started = None,
) -> None:
    """Serve the proxy on `sock` in this process until SIGTERM or Ctrl-C, then drain."""
    from memlane.proxy.app import create_app

    app = create_app(settings, runtime=runtime, worker=worker)
    config = uvicorn.Config(
        app,
        log_level="debug" if settings.log_level == "debug" else "warning",
        access_log=False,
        timeout_keep_alive=CLIENT_IDLE_SECONDS,
        # then each request still in flight is stopped, answered as `ProxyApp` says
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
    )
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    MemlaneServer(config, worker=worker is not None, on_started=on_started).run(sockets=[sock])
