"""`memlane connect codex|claude`: point an agent's own configuration at memlane.

Each change is shown as a diff of the file it touches before it is written
(`--dry-run` stops there), written atomically, idempotent (a second run writes
nothing) and reversible (`--remove` puts the file back as it was). What is
written lives in `cli.clients`; this module finds the files and talks to the user.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from memlane.cli import clients
from memlane.cli.context import console, fail, print_json, state
from memlane.cli.options import JsonOpt
from memlane.cli.running import home_options, installed_memlane
from memlane.files.atomic import write_atomic


class Client(StrEnum):
    codex = "codex"
    claude = "claude"


RECORD_FILE = "memlane-connect.json"
"""Beside Claude Code's settings: what memlane changed, for `--remove`."""


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None
    after: str | None
    """None: the file is deleted."""

    @property
    def changes(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(lines)


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def claude_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def claude_state_file() -> Path:
    """Where `claude mcp add -s user` keeps user MCP servers: `~/.claude.json`."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) / ".claude.json" if configured else Path.home() / ".claude.json"


def connect(
    ctx: typer.Context,
    client: Annotated[Client, typer.Argument(help="codex or claude.")],
    remove: Annotated[
        bool, typer.Option("--remove", help="Take memlane's changes out again.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the diff; write nothing.")
    ] = False,
    key_env: Annotated[
        str | None,
        typer.Option(
            "--key-env",
            help="Codex: the variable holding the key it sends (default OPENAI_API_KEY when "
            "it is set; else none, and memlane uses MEMLANE_UPSTREAM_API_KEY).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write Codex's or Claude Code's own configuration so it goes through memlane.

    Also adds memlane's MCP server (Codex: $CODEX_HOME/config.toml; Claude Code:
    ~/.claude/settings.json and ~/.claude.json)."""
    settings = state(ctx).settings
    if key_env is None and os.environ.get("OPENAI_API_KEY"):
        key_env = "OPENAI_API_KEY"
    wiring = clients.Wiring(
        base_url=f"http://{settings.host}:{settings.port}",
        executable=installed_memlane(),
        key_env=key_env or None,
        options=home_options(settings.home_path, state(ctx).config_file),
    )
    try:
        plan = _plan(client, wiring, remove=remove)
    except clients.ClientConfigError as exc:
        fail(str(exc))
    changes = [c for c in plan if c.changes]
    if as_json:
        print_json(
            {
                "client": client.value,
                "action": "remove" if remove else "connect",
                "dry_run": dry_run,
                "files": [str(c.path) for c in changes],
                "diff": "".join(c.diff() for c in changes),
            }
        )
    else:
        for change in changes:
            console.print(change.diff(), end="", markup=False, highlight=False, soft_wrap=True)
    if not dry_run:
        for change in changes:
            _apply(change)
    if as_json:
        return
    verb = "would change" if dry_run else "changed"
    if not changes:
        done = "not connected" if remove else "already connected"
        console.print(f"{client.value}: {done}; nothing to write", highlight=False, soft_wrap=True)
    for change in changes:
        console.print(f"{verb} {change.path}", highlight=False, soft_wrap=True)
    if changes and not dry_run and not remove:
        console.print(_next_step(client), highlight=False, soft_wrap=True)


def _plan(client: Client, wiring: clients.Wiring, *, remove: bool) -> list[Change]:
    if client is Client.codex:
        path = codex_home() / "config.toml"
        before = _read(path)
        change = clients.codex_remove if remove else lambda t: clients.codex_connect(t, wiring)
        try:
            after = change(before or "")
        except clients.ClientConfigError as exc:
            raise clients.ClientConfigError(f"{path}: {exc}") from None
        if before is None and not after:
            return []
        return [Change(path, before, after or None)]  # nothing left of it: no file
    return _claude_plan(wiring, remove=remove)


def _claude_plan(wiring: clients.Wiring, *, remove: bool) -> list[Change]:
    record_path = claude_dir() / RECORD_FILE
    files: list[tuple[Path, tuple[str, str], Callable[[clients.Wiring], Any]]] = [
        (claude_dir() / "settings.json", clients.SETTINGS_PATH, clients.claude_settings_value),
        (claude_state_file(), clients.STATE_PATH, clients.claude_mcp_value),
    ]
    record_text = _read(record_path)
    records: dict[str, Any] = json.loads(record_text) if record_text else {}
    changes: list[Change] = []
    new_records: dict[str, Any] = {}
    for path, key, value in files:
        before = _read(path)
        held = records.get(str(path))
        try:
            if remove:
                if held is not None:
                    record = clients.Record.from_json(held)
                    changes.append(Change(path, before, clients.json_restore(before, record, key)))
                continue
            wanted = value(wiring)
            if held is not None and clients.json_value(before, key) == wanted:
                new_records[str(path)] = held  # already connected: keep the first original
                continue
            after, previous = clients.json_set(before, key, wanted)
        except clients.ClientConfigError as exc:
            raise clients.ClientConfigError(f"{path}: {exc}") from None
        original = held["original"] if held is not None else before
        previous = held["previous"] if held is not None else previous
        new_records[str(path)] = clients.Record(original, after, previous).to_json()
        changes.append(Change(path, before, after))
    if remove:
        if record_text is not None:
            changes.append(Change(record_path, record_text, None))
    elif changes:
        changes.append(Change(record_path, record_text, json.dumps(new_records, indent=2) + "\n"))
    return changes


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {exc}")


def _apply(change: Change) -> None:
    try:
        if change.after is None:
            change.path.unlink(missing_ok=True)
        else:
            write_atomic(change.path, change.after, mode=0o600)
    except OSError as exc:
        fail(f"cannot write {change.path}: {exc}")


def _next_step(client: Client) -> str:
    if client is Client.codex:
        return (
            "next: start the proxy (`memlane serve`), then run `codex` as usual; "
            "`codex mcp list` shows memlane's tools"
        )
    return (
        "next: start the proxy (`memlane serve --anthropic-upstream URL` if not "
        "https://api.anthropic.com), then run `claude`; `claude mcp list` shows memlane"
    )
