"""Build `Settings` from its layers and remember where each value came from.

Precedence, lowest first: built-in defaults < TOML file (`$MEMLANE_HOME/config.toml`
or `--config`) < `MEMLANE_*` environment < CLI flags.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from memlane.config.private import NotPrivateError, check_not_shared
from memlane.config.settings import Settings

ENV_PREFIX = "MEMLANE_"
CONFIG_FILE_NAME = "config.toml"


class ConfigError(Exception):
    """Configuration that cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    sources: Mapping[str, str]
    config_file: Path | None
    # Things worth telling the user that do not stop memlane (an unknown MEMLANE_* variable).
    warnings: tuple[str, ...] = ()


def default_home(environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path("~/.local/share")
    return (base / "memlane").expanduser()


def load_settings(
    *,
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    lenient: bool = False,
) -> LoadedSettings:
    """The settings, from every layer. `lenient`: an unknown key or a value that does not
    validate is left out (its default applies) and reported in `warnings`, instead of
    failing: `memlane config show` must work to show what is wrong."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {"home": default_home(env)}
    sources: dict[str, str] = {name: "default" for name in Settings.model_fields}
    if env.get("OPENAI_BASE_URL"):
        values["upstream_url"] = env["OPENAI_BASE_URL"]
        sources["upstream_url"] = "env OPENAI_BASE_URL"

    env_values, unknown_env = _from_env(env)
    cli_values = {k: v for k, v in (overrides or {}).items() if v is not None}
    home = Path(cli_values.get("home") or env_values.get("home") or values["home"]).expanduser()
    _check_home(home)

    explicit_file = config_file is not None or bool(env.get("MEMLANE_CONFIG"))
    path = config_file or Path(env.get("MEMLANE_CONFIG") or home / CONFIG_FILE_NAME)
    file_values, unknown_file = _from_toml(path, required=explicit_file)
    if unknown_file and not lenient:
        raise ConfigError(
            unknown_key(unknown_file[0], f"in {path}") + ": fix or remove it "
            "(`memlane config unset KEY`; `memlane config show` still works)"
        )
    for layer, origin in (
        (file_values, f"file {path}"),
        (env_values, "env"),
        (cli_values, "flag"),
    ):
        for key, value in layer.items():
            values[key] = value
            sources[key] = f"env {ENV_PREFIX}{key.upper()}" if origin == "env" else origin

    _keys_from_env(values, sources, env)
    notes = [unknown_key(key, f"in {path}") + "; it is ignored" for key in unknown_file]
    notes += [unknown_key(name, "") + "; it is ignored" for name in unknown_env]
    settings = _validated(values, sources, notes if lenient else None)
    found = path if file_values or unknown_file or explicit_file else None
    return LoadedSettings(settings, sources, found, warnings=tuple(notes))


def _validated(
    values: dict[str, Any], sources: dict[str, str], notes: list[str] | None
) -> Settings:
    """`Settings(**values)`; with `notes` (lenient), each failing value is dropped and noted."""
    while True:
        try:
            return Settings(**values)
        except ValidationError as exc:
            message = _describe(exc, sources)
            key = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
            if notes is None or key not in values or sources.get(key) == "default":
                raise ConfigError(message) from None
            notes.append(f"{message}; the default is used")
            del values[key]
            sources[key] = "default"


KEY_ENV_SUFFIX = "_env"
"""`upstream_api_key_env = "OPENAI_API_KEY"`: the key is read from that variable."""


def _keys_from_env(values: dict[str, Any], sources: dict[str, str], env: Mapping[str, str]) -> None:
    """Fill each `*_api_key` from the variable its `*_api_key_env` setting names, when the
    key itself is not set: config.toml names where the key lives, never the key."""
    for name in Settings.model_fields:
        if not name.endswith("_api_key" + KEY_ENV_SUFFIX):
            continue
        key = name.removesuffix(KEY_ENV_SUFFIX)
        variable = values.get(name)
        if values.get(key) or not variable or not env.get(variable):
            continue
        values[key] = env[variable]
        sources[key] = f"env {variable}"


def unknown_key(name: str, where: str) -> str:
    """`unknown setting 'upstrem_url' in … (did you mean 'upstream_url'?)`: the nearest setting
    by spelling (difflib), in the user's own spelling of names."""
    bare = _file_key(name)
    close = difflib.get_close_matches(bare, list(Settings.model_fields), n=1, cutoff=0.6)
    shown = name if name.startswith(ENV_PREFIX) else repr(name)
    hint = f" (did you mean {_spelled_like(name, close[0])!r}?)" if close else ""
    return f"unknown setting {shown}" + (f" {where}" if where else "") + hint


def _spelled_like(name: str, key: str) -> str:
    """The suggestion in the spelling the user used (`MEMLANE_PORT`, `port`)."""
    return ENV_PREFIX + key.upper() if name.startswith(ENV_PREFIX) else key


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The settings named by `MEMLANE_*` variables, and the variables that name none.

    An unknown variable is not an error: other tools (a test run's `MEMLANE_TEST_PG_URL`,
    a wrapper script) share the prefix, and refusing every command over one would leave
    the user no way to even run `memlane config show`.
    """
    found: dict[str, str] = {}
    unknown: list[str] = []
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name == "MEMLANE_CONFIG":
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key in Settings.model_fields:
            found[key] = value
        else:
            unknown.append(name)
    return found, unknown


def _check_home(home: Path) -> None:
    """Refuse a home that can never be a folder, naming the file in the way."""
    for part in (home, *home.parents):
        if part.exists():
            if not part.is_dir():
                raise ConfigError(
                    f"MEMLANE_HOME {home} cannot be a folder: {part} is a file; "
                    "set MEMLANE_HOME (or --home) to a folder"
                )
            return


def _from_toml(path: Path, *, required: bool) -> tuple[dict[str, Any], list[str]]:
    """The file's settings, and the keys in it that name none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file {path} does not exist") from None
        return {}, []
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8"
        ) from None
    try:
        check_not_shared(path)
        data = tomllib.loads(text)
    except NotPrivateError as exc:
        raise ConfigError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            f"config file {path} nests arrays or tables too deeply to read: flatten it"
        ) from None
    section = data.get("memlane", data)
    if not isinstance(section, dict):
        raise ConfigError(f"[memlane] in config file {path} must be a table of settings")
    table = {_file_key(key): value for key, value in section.items()}
    unknown = sorted(set(table) - set(Settings.model_fields))
    known = {key: value for key, value in table.items() if key not in unknown}
    return known, unknown


def _file_key(key: str) -> str:
    """`port`, `PORT` and `MEMLANE_PORT` all name the `port` setting in the file."""
    lowered = key.lower()
    prefix = ENV_PREFIX.lower()
    return lowered[len(prefix) :] if lowered.startswith(prefix) else lowered


def _describe(exc: ValidationError, sources: Mapping[str, str]) -> str:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "settings"
    origin = sources.get(key.split(".")[0], "default")
    return f"invalid setting {key!r} (from {origin}): {first['msg']}"


def effective_values(loaded: LoadedSettings) -> dict[str, Any]:
    """Every setting as JSON-ready data; secrets are shown as set or unset, never in clear."""
    out: dict[str, Any] = {}
    for name in Settings.model_fields:
        value = getattr(loaded.settings, name)
        if isinstance(value, SecretStr):
            value = "********" if value.get_secret_value() else ""
        elif isinstance(value, Path):
            value = str(value)
        out[name] = value
    return out
