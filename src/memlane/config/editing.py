"""`memlane config set` / `unset` and `memlane init`: change one key of config.toml.

The file is edited as text, one `key = value` line, so the user's comments, order
and other keys stay as they were. Keys live at the top of the file, or in its
`[memlane]` table when it has one (the loader reads either). A value is checked
against the setting before it is written, and so is the whole file after.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memlane.config.loader import ConfigError, unknown_key
from memlane.config.settings import Settings

TABLE = "[memlane]"


def file_key(key: str) -> str:
    """`port`, `PORT`, `MEMLANE_PORT` → `port`."""
    return key.strip().lower().removeprefix("memlane_")


def setting_name(key: str) -> str:
    """The setting `key` names; an unknown name is a ConfigError that suggests the nearest
    one (and lists them all when none is near)."""
    lowered = file_key(key)
    if lowered not in Settings.model_fields:
        raise ConfigError(unknown_key(key, "") + "; `memlane config show` lists every setting")
    return lowered


def parsed_value(name: str, raw: str) -> Any:
    """`raw` as the setting takes it (the environment's spelling: `true`, `8100`,
    `gpt-4o=128000`), or a ConfigError naming the setting and what is wrong."""
    if is_secret(name):
        holder = f"{name}_env"
        instead = (
            f"set {holder} to the name of the variable that holds it"
            if holder in Settings.model_fields
            else f"export MEMLANE_{name.upper()}"
        )
        raise ConfigError(f"{name} is a key: keep it out of config.toml; {instead}")
    try:
        settings = Settings.model_validate({name: raw})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"invalid value for {name}: {first['msg']}") from None
    return getattr(settings, name)


def is_secret(name: str) -> bool:
    return "SecretStr" in str(Settings.model_fields[name].annotation)


def set_key(text: str, name: str, value: Any) -> str:
    """`text` with `name = value` (replacing its line if there is one)."""
    line = f"{name} = {toml_value(value)}"
    lines = text.splitlines()
    start, end = _region(lines)
    for index in range(start, end):
        if _names(lines[index], name):
            lines[index] = line
            return "\n".join(lines) + "\n"
    at = end
    while at > start and not lines[at - 1].strip():
        at -= 1  # before the blank lines that end the region
    lines.insert(at, line)
    return "\n".join(lines) + "\n"


def has_key(text: str, name: str) -> bool:
    lines = text.splitlines()
    start, end = _region(lines)
    return any(_names(lines[i], name) for i in range(start, end))


def unset_key(text: str, name: str) -> str:
    lines = text.splitlines()
    start, end = _region(lines)
    kept = [line for i, line in enumerate(lines) if not (start <= i < end and _names(line, name))]
    return "\n".join(kept) + "\n" if kept else ""


def checked(text: str, path: Path, *, before: str | None = None) -> str:
    """`text` if it is a config file memlane loads, else a ConfigError saying why. With
    `before` (the file as it was), only a problem the change brings is refused: a file
    already wrong in one key can still have another set or taken out, as the error that
    names the wrong key tells the user to do."""
    found = _problems(text, path)
    if found and before is not None:
        try:
            known = set(_problems(before, path))
        except ConfigError:  # it was not TOML: every problem now is the change's
            known = set()
        found = [problem for problem in found if problem not in known]
    if found:
        raise ConfigError(f"{path} would be invalid: {found[0]}")
    return text


def _problems(text: str, path: Path) -> list[str]:
    """What keeps `text` from loading, one `key: why` each (a ConfigError when it is not
    TOML at all)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} would not be valid TOML: {exc}") from None
    table: Mapping[str, Any] = data.get("memlane", data)
    values = {file_key(k): v for k, v in table.items()}
    values = {k: v for k, v in values.items() if k in Settings.model_fields}  # typos: reported
    try:
        Settings(**values)
    except ValidationError as exc:
        return [
            f"{'.'.join(str(p) for p in error['loc']) or 'settings'}: {error['msg']}"
            for error in exc.errors()
        ]
    return []


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return (
            "{ "
            + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
            + " }"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _region(lines: list[str]) -> tuple[int, int]:
    """The lines where settings go: the `[memlane]` table's, else those before any table."""
    headers = [i for i, line in enumerate(lines) if line.lstrip().startswith("[")]
    own = next((i for i in headers if lines[i].strip() == TABLE), None)
    if own is None:
        return 0, headers[0] if headers else len(lines)
    after = [i for i in headers if i > own]
    return own + 1, after[0] if after else len(lines)


def _names(line: str, name: str) -> bool:
    key, sep, _ = line.partition("=")
    if not sep or line.lstrip().startswith("#"):
        return False
    return file_key(key.strip().strip("\"'")) == name
