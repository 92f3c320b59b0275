"""Every `sh` and `python` block of the README runs as written, against a scripted upstream.

A block that cannot run here says why on the line before it
(`<!-- not run: … -->`). The harness changes only what a reader changes too:
the proxy listens on a free port instead of 8100 (and `OPENAI_BASE_URL`, which
the quick start exports, points at it), `ID` is the newest memory's
id and `DIR` an empty folder. Shell blocks run statement by statement, with the
proxy's background work drained between them (a reader looks at one output
before typing the next command).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from memlane.engine.memory.extract import FACT_PROMPT
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int
    reason: str | None


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(match.group(1), match.group(2), line, reason and reason.group(1)))
    return found


RUN = [b for b in readme_blocks() if b.reason is None]


def test_every_skipped_block_says_why() -> None:
    skipped = [b for b in readme_blocks() if b.reason is not None]
    assert RUN, "no README block is run"
    assert all(len(b.reason or "") > 10 for b in skipped)


def statements(code: str) -> list[str]:
    """Shell lines joined across trailing backslashes, comments and blanks dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def memlane_answers(request: RecordedRequest) -> Reply:
    """memlane's own fact extraction finds the preference; anything else gets a plain answer."""
    system = request.messages[0].get("content") if request.messages else None
    if system == FACT_PROMPT:
        return Reply(text='["The user prefers tabs"]')
    return Reply(text="Noted.")


@pytest.mark.parametrize("block", RUN, ids=[f"README:{b.line}" for b in RUN])
def test_readme_block_runs_as_written(
    block: Block,
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    tmp_path: Path,
) -> None:
    upstream.respond_with(memlane_answers)
    proxy = proxy_factory(index_enabled=False)
    home = proxy.settings.home_path
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/tabs/tabs (edited)/' \"$1\"\n")
    editor.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))},
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "share"),
        "MEMLANE_HOME": str(home),
        "MEMLANE_UPSTREAM_URL": upstream.url,
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
        "OPENAI_BASE_URL": proxy.url,  # as the quick start exports it
        "EDITOR": str(editor),
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    port = proxy.base.rsplit(":", 1)[1]
    if block.lang == "python":
        # `~/.local/share/memlane` (the default home) is this test's home too
        (tmp_path / ".local" / "share").mkdir(parents=True)
        (tmp_path / ".local" / "share" / "memlane").symlink_to(home)
        done = subprocess.run(
            [sys.executable, "-c", block.code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"README line {block.line}:\n{done.stderr}"
        return
    script = ""
    for statement in statements(block.code):
        script += statement.replace("127.0.0.1:8100", f"127.0.0.1:{port}") + "\n"
    outputs = []
    for statement in statements(script):
        proxy.drain()
        newest = proxy.store.list_facts(roles=("memory",), include_deleted=True)
        command = re.sub(r"\bID\b", newest[-1].id if newest else "ID", statement)
        command = re.sub(r"\bDIR\b", str(tmp_path / "export"), command)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", _exports(script, statement) + command],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"README line {block.line}: {statement}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        outputs.append(done.stdout)
    if "memory search" in block.code:  # the fact the block's turn taught is found
        assert any("The user prefers tabs" in " ".join(out.split()) for out in outputs), outputs


def _exports(script: str, upto: str) -> str:
    """The block's `export` lines before `upto`: each statement runs in its own shell."""
    lines = statements(script)
    before = lines[: lines.index(upto)]
    return "".join(line + "\n" for line in before if line.startswith("export "))
