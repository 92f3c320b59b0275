"""`memlane serve --workers N`: several processes serving one port on one store.

The supervisor (the `memlane serve` process) does the once-per-home work before any
worker starts (`proxy.server.run`): it checks the address, binds the socket, opens
the store (migrations run once), makes the admin token, prints the start-up report
and writes `serve.json`. Then it starts the workers, each a fresh interpreter (spawned,
not forked) handed the listening socket, and watches them:

- worker 0 is the primary (`Runtime.primary`): it catches the memory index up with
  the files at start and watches them. Every worker serves requests, stores their
  turns and runs the background work of the turns it served, with the credentials of
  their requests, which never leave its memory; what the workers share on disk is
  written under the home's locks (`files.locks`), and the store orders their writes
  (a session's history has one writer at a time, in any process);
- a worker that dies is reported (a warning here, `memlane status`) and replaced by
  a new one with the same number: what it had in flight is lost (at most the turns it
  was answering, as in a crash of one process), the others serve on. A worker that
  fails before it serves, or `MAX_DEATHS` deaths within `DEATH_WINDOW` seconds, stop
  the whole serve with an error instead: a broken configuration would only die again;
- SIGTERM or Ctrl-C stops them all: each worker gets one SIGTERM, stops accepting,
  finishes the requests in flight (`MEMLANE_SHUTDOWN_GRACE_SECONDS`), lets the answers
  they queued reach the store, drains the background work those started
  (`MEMLANE_SHUTDOWN_DRAIN_SECONDS`) and commits its memory (`Runtime.settle`); one
  still running `STOP_MARGIN_SECONDS` past both is killed. A second signal kills them
  at once.
  A worker whose supervisor disappeared stops the same way.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

from memlane.config import Settings
from memlane.proxy.state import WorkerInfo

log = logging.getLogger("memlane.serve")

STOP_MARGIN_SECONDS = 10.0
"""How long a stopping worker may take beyond the grace its requests in flight get
(`shutdown_grace_seconds`) and its drain (`shutdown_drain_seconds`): the last commit and
the store's close. Then it is killed."""
READY_SECONDS = 120.0
"""How long a worker may take to start serving (imports, store, tokenizers)."""
MAX_DEATHS = 5
DEATH_WINDOW = 60.0
PARENT_CHECK_SECONDS = 1.0
TICK = 0.5
READY = "ready"


@dataclass
class Worker:
    index: int
    process: BaseProcess
    channel: Connection
    """The supervisor's end of the pipe the worker says "ready" on."""
    ready: bool = False
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.process.pid or 0


class Supervisor:
    """Starts `settings.workers` workers on `sockets`, replaces the ones that die, stops them."""

    def __init__(self, settings: Settings, sockets: list[socket.socket]) -> None:
        self.settings = settings
        self.sockets = sockets
        """One per worker (the kernel balances them), or one they all share."""
        self.count = settings.workers
        self.since = datetime.now(UTC)
        self.workers: dict[int, Worker] = {}
        self.deaths: list[float] = []
        self.restarts = 0
        self.last_restart = ""
        self.signals = 0
        self._context = multiprocessing.get_context("spawn")

    def run(self) -> str | None:
        """Serve until told to stop; None after a clean stop, else what went wrong."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        try:
            for index in range(self.count):
                self._start(index)
            failure = self._watch()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return failure

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals > 1:
            for worker in self.workers.values():
                _kill(worker, signal.SIGKILL)

    def _start(self, index: int) -> None:
        ours, theirs = self._context.Pipe(duplex=False)
        info = WorkerInfo(index=index, count=self.count, serving_since=self.since)
        process = self._context.Process(
            target=worker_main,
            args=(self.settings, self.sockets[index % len(self.sockets)], info, theirs),
            name=f"memlane-worker-{index}",
        )
        process.start()
        theirs.close()
        self.workers[index] = Worker(index, process, ours)
        self._publish()

    def _publish(self) -> None:
        from memlane.proxy.status import write_serve_file

        pids = [{"index": w.index, "pid": w.pid, "ready": w.ready} for w in self.workers.values()]
        try:
            write_serve_file(
                self.settings,
                started_at=self.since.isoformat(),
                workers=pids,
                restarts=self.restarts,
                last_restart=self.last_restart,
            )
        except OSError as exc:
            log.warning("serve.json not written (memlane status cannot find this proxy): %s", exc)

    def _watch(self) -> str | None:
        while not self.signals:
            waiting = [w.channel for w in self.workers.values() if not w.ready]
            sentinels = {w.process.sentinel: w for w in self.workers.values()}
            for ready in wait([*waiting, *sentinels], timeout=TICK):
                worker = sentinels.get(ready) if isinstance(ready, int) else None
                if worker is not None:
                    failure = self._died(worker)
                    if failure:
                        return failure
                else:
                    self._heard(ready)
            for worker in list(self.workers.values()):
                if not worker.ready and time.monotonic() - worker.started > READY_SECONDS:
                    _kill(worker, signal.SIGKILL)
                    worker.process.join()
                    return (
                        f"worker {worker.index} did not start serving within "
                        f"{READY_SECONDS:g} s; see the lines above"
                    )
        return None

    def _heard(self, channel: object) -> None:
        for worker in self.workers.values():
            if worker.channel is channel:
                try:
                    worker.ready = worker.channel.recv() == READY
                except (EOFError, OSError):
                    worker.ready = False  # it is dying: its sentinel tells
                if worker.ready:
                    self._publish()
                return

    def _died(self, worker: Worker) -> str | None:
        worker.process.join()
        worker.channel.close()
        how = describe_exit(worker.process.exitcode)
        if self.signals:
            return None
        if not worker.ready:
            return f"worker {worker.index} failed to start ({how}); see the lines above"
        now = time.monotonic()
        self.deaths = [t for t in self.deaths if now - t < DEATH_WINDOW] + [now]
        if len(self.deaths) > MAX_DEATHS:
            return (
                f"workers died {len(self.deaths)} times within {DEATH_WINDOW:g} s (the last: "
                f"worker {worker.index}, {how}); see the lines above"
            )
        self.restarts += 1
        self.last_restart = (
            f"worker {worker.index} (pid {worker.pid}) {how} at "
            f"{datetime.now(UTC).isoformat(timespec='seconds')}"
        )
        log.warning(
            "worker %d (pid %d) %s; starting a new one (what it was answering is lost)",
            worker.index,
            worker.pid,
            how,
        )
        self._start(worker.index)
        return None

    def _stop_all(self) -> None:
        """One SIGTERM each, then wait; kill what is still running after the grace and the
        drain it was given and `STOP_MARGIN_SECONDS`: a longer stop a user asked for is not
        cut short."""
        running = [w for w in self.workers.values() if w.process.is_alive()]
        for worker in running:
            _kill(worker, signal.SIGTERM)
        settings = self.settings
        budget = settings.shutdown_grace_seconds + settings.shutdown_drain_seconds
        budget += STOP_MARGIN_SECONDS
        deadline = time.monotonic() + budget
        for worker in running:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                log.warning(
                    "worker %d (pid %d) did not stop within %g s; killed it",
                    worker.index,
                    worker.pid,
                    budget,
                )
                _kill(worker, signal.SIGKILL)
                worker.process.join()
            worker.channel.close()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _kill(worker: Worker, sig: int) -> None:
    if worker.process.pid is not None and worker.process.exitcode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.process.pid, sig)


def describe_exit(code: int | None) -> str:
    """How a process ended, for a person: `was killed by SIGKILL`, `exited with code 3`."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# --- in the worker -----------------------------------------------------------------------


def worker_main(
    settings: Settings, sock: socket.socket, worker: WorkerInfo, channel: Connection
) -> None:
    """One worker: its own store connections, runtime and event loop, serving `sock`."""
    from memlane.engine.runtime import Runtime
    from memlane.proxy.serving import configure_logging, serve_here
    from memlane.store import open_store

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    configure_logging(settings, worker=worker.index)
    _stop_with_parent()
    runtime = Runtime(settings, open_store(settings), primary=worker.index == 0)
    try:
        serve_here(settings, runtime, sock, worker=worker, on_started=lambda: channel.send(READY))
    finally:
        runtime.close()
        channel.close()


def _stop_with_parent() -> None:
    """SIGTERM this worker (a graceful stop) if its supervisor goes away (killed, crashed):
    a worker must not serve on alone, unsupervised."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="memlane-parent-watch", daemon=True).start()
