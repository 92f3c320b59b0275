"""What `memlane connect` writes into Codex's and Claude Code's own configuration.

Pure functions from a file's text to its new text, so a change can be shown as a
diff before it is written and taken out again exactly:

- **Codex** (`$CODEX_HOME/config.toml`, TOML with comments): memlane's lines go
  between marker comments, a top-level `model_provider = "memlane"` before the
  first table and a `[model_providers.memlane]` + `[mcp_servers.memlane]` block at
  the end; a `model_provider` line the user had is kept as a marked comment.
  Removing deletes the marked lines and uncomments the kept one: the file is what it
  was, byte for byte.
- **Claude Code** (JSON, no comments): `env.ANTHROPIC_BASE_URL` in
  `settings.json` and `mcpServers.memlane` in `.claude.json` (where
  `claude mcp add -s user` writes). What was there before is recorded
  (`Record`); removing restores the recorded text when the file is still what
  memlane wrote, else puts back the recorded values and leaves the rest alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SERVER_NAME = "memlane"
"""The name of memlane's provider and MCP server in both clients."""
BEGIN = "# >>> memlane connect (`memlane connect codex --remove` takes this out)"
END = "# <<< memlane connect"
KEPT = "# memlane connect kept: "
"""Prefix of a user's own line memlane had to put aside (restored on removal)."""


class ClientConfigError(ValueError):
    """A client's file memlane cannot change safely; the message says what to do."""


@dataclass(frozen=True)
class Wiring:
    """Where the client should go: memlane's address and the `memlane` executable."""

    base_url: str
    """`http://127.0.0.1:8100` (no `/v1`)."""
    executable: str
    """Absolute path of the installed `memlane`, for the MCP entry (never a bare name)."""
    key_env: str | None = None
    """Codex's `env_key`: the variable holding the key it sends (None: it sends none, and
    memlane uses its configured upstream key)."""
    options: tuple[str, ...] = ()
    """The global options the MCP server needs to open the proxy's home (`--home PATH`,
    `--config FILE`): the client starts it with its own environment, not the shell's."""


# --- Codex ---------------------------------------------------------------------------


def codex_provider(wiring: Wiring) -> dict[str, str]:
    provider = {
        "name": SERVER_NAME,
        "base_url": f"{wiring.base_url}/v1",
        "wire_api": "responses",
    }
    if wiring.key_env:
        provider["env_key"] = wiring.key_env
    return provider


def mcp_entry(wiring: Wiring) -> dict[str, Any]:
    return {"command": wiring.executable, "args": [*wiring.options, "mcp"]}


def codex_connect(text: str, wiring: Wiring) -> str:
    """`text` (Codex's config.toml, maybe empty) going through memlane."""
    lines = codex_remove(text).splitlines()
    _refuse_hand_made(lines)
    first_table = next((i for i, line in enumerate(lines) if _is_table(line)), len(lines))
    top = [KEPT + line if _is_key(line, "model_provider") else line for line in lines[:first_table]]
    head = [BEGIN, f"model_provider = {_toml(SERVER_NAME)}", END]
    tail = [
        BEGIN,
        f"[model_providers.{SERVER_NAME}]",
        *(f"{k} = {_toml(v)}" for k, v in codex_provider(wiring).items()),
        "",
        f"[mcp_servers.{SERVER_NAME}]",
        *(f"{k} = {_toml(v)}" for k, v in mcp_entry(wiring).items()),
        END,
    ]
    return "\n".join([*head, *top, *lines[first_table:], *tail]) + "\n"


def codex_remove(text: str) -> str:
    """`text` without memlane's lines, the user's own put back; unchanged if none."""
    if BEGIN not in text and KEPT not in text:
        return text
    kept: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare == BEGIN:
            inside = True
        elif bare == END and inside:
            inside = False
        elif not inside:
            kept.append(line[len(KEPT) :] if line.startswith(KEPT) else line)
    return "".join(kept)


def codex_connected(text: str) -> bool:
    return BEGIN in text


def _refuse_hand_made(lines: list[str]) -> None:
    for table in (f"model_providers.{SERVER_NAME}", f"mcp_servers.{SERVER_NAME}"):
        if any(line.strip() == f"[{table}]" for line in lines):
            raise ClientConfigError(
                f"the file already has a [{table}] table written by hand: delete it (memlane "
                "connect writes its own), then run the command again"
            )


def _is_table(line: str) -> bool:
    return line.lstrip().startswith("[")


def _is_key(line: str, key: str) -> bool:
    name, sep, _ = line.partition("=")
    return bool(sep) and name.strip() == key


def _toml(value: Any) -> str:
    """A TOML string or array of strings (JSON's escapes are TOML's for these)."""
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


# --- Claude Code -----------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One JSON file as memlane found it and as it wrote it."""

    original: str | None
    """The file's text before (None: there was no file)."""
    written: str
    previous: Any
    """The value at memlane's key before (None: absent)."""

    def to_json(self) -> dict[str, Any]:
        return {"original": self.original, "written": self.written, "previous": self.previous}

    @classmethod
    def from_json(cls, data: Any) -> Record:
        if not isinstance(data, dict) or not isinstance(data.get("written"), str):
            raise ClientConfigError("memlane's record of what it changed is unreadable")
        return cls(data.get("original"), data["written"], data.get("previous"))


SETTINGS_PATH = ("env", "ANTHROPIC_BASE_URL")
STATE_PATH = ("mcpServers", SERVER_NAME)


def claude_settings_value(wiring: Wiring) -> str:
    return wiring.base_url


def claude_mcp_value(wiring: Wiring) -> dict[str, Any]:
    return {"type": "stdio", **mcp_entry(wiring), "env": {}}


def json_set(text: str | None, path: tuple[str, str], value: Any) -> tuple[str, Any]:
    """The file with `value` at `path`, and the value that was there (None: absent)."""
    data = _json_object(text)
    section = data.setdefault(path[0], {})
    if not isinstance(section, dict):
        raise ClientConfigError(f"`{path[0]}` in the file is not an object: fix it by hand")
    previous = section.get(path[1])
    section[path[1]] = value
    return json.dumps(data, indent=2) + "\n", previous


def json_restore(text: str | None, record: Record, path: tuple[str, str]) -> str | None:
    """The file as it was before memlane wrote it (None: delete it)."""
    if text == record.written:
        return record.original
    data = _json_object(text)
    section = data.get(path[0])
    if isinstance(section, dict):
        if record.previous is None:
            section.pop(path[1], None)
            if not section and record.original is None:
                data.pop(path[0])
        else:
            section[path[1]] = record.previous
    return json.dumps(data, indent=2) + "\n"


def json_value(text: str | None, path: tuple[str, str]) -> Any:
    section = _json_object(text).get(path[0])
    return section.get(path[1]) if isinstance(section, dict) else None


def _json_object(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ClientConfigError(f"the file is not valid JSON ({exc}): fix it first") from None
    if not isinstance(data, dict):
        raise ClientConfigError("the file does not hold a JSON object: fix it first")
    return data
