"""The set-up scripts: running the proxy installs only memlane, and says what each step does."""

from __future__ import annotations

import re
from pathlib import Path

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
