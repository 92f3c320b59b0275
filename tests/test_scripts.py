"""The set-up scripts: running the proxy installs only memlane, and says what each step does."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import aiohttp

import memlane

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
INSTALLS = re.compile(r"(-m venv|pip install|uv sync(?!.*--check)|npm (?:install|ci))")


def test_serving_never_installs_the_test_clients() -> None:
    for name in ("serve", "bootstrap"):
        text = (SCRIPTS / name).read_text()
        assert "npm" not in text, name
        assert "codex" not in text.lower(), name
        assert "test-clients" not in text, name
    assert "scripts/test-clients" in (SCRIPTS / "test").read_text()


def test_every_install_step_of_the_set_up_says_what_it_does_first() -> None:
    lines = (SCRIPTS / "bootstrap").read_text().splitlines()
    steps = [i for i, line in enumerate(lines) if INSTALLS.search(line)]
    assert steps, "bootstrap installs nothing?"
    for index in steps:
        before = [line.strip() for line in lines[:index] if line.strip()]
        assert before[-1].startswith("step "), f"silent install: {lines[index].strip()}"


def test_the_docs_script_serves_the_site_on_loopback(tmp_path: Path) -> None:
    """`scripts/docs` installs what it needs, then serves the built site until stopped."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "docs.log"
    with log.open("wb") as output:
        served = subprocess.Popen(
            [str(SCRIPTS / "docs"), "--dev-addr", f"127.0.0.1:{port}", "--no-livereload"],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        page = _fetch(f"http://127.0.0.1:{port}/getting-started/", served, log)
        assert "<title>Getting started - memlane</title>" in page
    finally:
        os.killpg(served.pid, signal.SIGTERM)
        served.wait(timeout=30)


def _fetch(url: str, served: subprocess.Popen[bytes], log: Path) -> str:
    """The page once the server answers (building the site comes first)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert served.poll() is None, log.read_text(errors="replace")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return str(answer.read().decode("utf-8"))
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"scripts/docs did not serve {url}")


def test_the_set_up_leaves_every_module_compiled_so_no_process_compiles_at_start() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set Python never writes a .pyc, and each memlane
    process compiled its imports from source (about a second of CPU per `memlane` command
    and per server a test starts): the set-up compiles them once. `aiohttp/worker.py` is
    a dependency's module no memlane code imports, so only the install compiled it."""

    def compiled(source: Path) -> bool:
        return Path(importlib.util.cache_from_source(str(source))).is_file()

    assert compiled(Path(aiohttp.__file__).parent / "worker.py")
    own = sorted(Path(memlane.__file__).parent.rglob("*.py"))
    assert own
    assert [path for path in own if not compiled(path)] == []
