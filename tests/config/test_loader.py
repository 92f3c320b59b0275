from __future__ import annotations

from pathlib import Path

import pytest

from memlane.config import ConfigError, effective_values, load_settings


def test_defaults_need_no_config(tmp_path: Path) -> None:
    loaded = load_settings(environ={"XDG_DATA_HOME": str(tmp_path)})
    assert loaded.settings.home == tmp_path / "memlane"
    assert loaded.settings.port == 8100
    assert loaded.settings.upstream_url == "http://127.0.0.1:11434/v1"
    assert loaded.sources["port"] == "default"
    assert loaded.config_file is None


def test_openai_base_url_is_the_upstream_default(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path), "OPENAI_BASE_URL": "http://10.0.0.1:9/v1"}
    loaded = load_settings(environ=env)
    assert loaded.settings.upstream_url == "http://10.0.0.1:9/v1"
    assert loaded.sources["upstream_url"] == "env OPENAI_BASE_URL"


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('port = 9001\nhost = "127.0.0.2"\nlog_level = "debug"\n')
    env = {"MEMLANE_HOME": str(home), "MEMLANE_PORT": "9002", "MEMLANE_HOST": "127.0.0.3"}
    loaded = load_settings(environ=env, overrides={"port": 9003})
    assert loaded.settings.log_level == "debug"
    assert loaded.sources["log_level"] == f"file {home / 'config.toml'}"
    assert loaded.settings.host == "127.0.0.3"
    assert loaded.sources["host"] == "env MEMLANE_HOST"
    assert loaded.settings.port == 9003
    assert loaded.sources["port"] == "flag"
    assert loaded.config_file == home / "config.toml"


def test_explicit_config_file_and_memlane_table(tmp_path: Path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text("[memlane]\nport = 7000\n")
    loaded = load_settings(config_file=path, environ={"XDG_DATA_HOME": str(tmp_path)})
    assert loaded.settings.port == 7000


def test_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(config_file=tmp_path / "nope.toml", environ={})


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"MEMLANE_PORT": "eighty"}, "'port' (from env MEMLANE_PORT)"),
        ({"MEMLANE_PORT": "70000"}, "'port'"),
        ({"MEMLANE_LOG_LEVEL": "loud"}, "'log_level'"),
    ],
)
def test_invalid_values_name_the_key(tmp_path: Path, env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(environ={"XDG_DATA_HOME": str(tmp_path), **env})
    assert fragment in str(info.value)


def test_bad_toml_and_unknown_file_keys(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("port = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(environ={"MEMLANE_HOME": str(home)})
    (home / "config.toml").write_text("prot = 1")
    with pytest.raises(ConfigError, match="unknown setting 'prot'"):
        load_settings(environ={"MEMLANE_HOME": str(home)})


def test_secrets_are_masked_in_effective_values(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path), "MEMLANE_UPSTREAM_API_KEY": "sk-secret-value"}
    loaded = load_settings(environ=env)
    values = effective_values(loaded)
    assert values["upstream_api_key"] == "********"
    assert "sk-secret-value" not in repr(values)
    assert "sk-secret-value" not in repr(loaded.settings)


def test_unknown_env_variable_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path), "MEMLANE_TEST_PG_URL": "x", "MEMLANE_PORT": "9100"}
    loaded = load_settings(environ=env)
    assert loaded.settings.port == 9100
    assert len(loaded.warnings) == 1
    assert "MEMLANE_TEST_PG_URL" in loaded.warnings[0]


def test_file_keys_may_carry_the_prefix(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("MEMLANE_PORT = 9101\nmemlane_log_level = 'debug'\n")
    loaded = load_settings(environ={"MEMLANE_HOME": str(home)})
    assert loaded.settings.port == 9101
    assert loaded.settings.log_level == "debug"


def test_home_under_a_regular_file_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"afile is a file; set MEMLANE_HOME"):
        load_settings(environ={"MEMLANE_HOME": str(blocker / "home")})


def test_a_config_file_that_is_not_utf8_is_a_clean_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(b'port = 9000\nname = "\xff\xfe"\n')
    with pytest.raises(ConfigError, match=f"config file {config} is not UTF-8 text"):
        load_settings(config_file=config, environ={"MEMLANE_HOME": str(tmp_path)})


def test_a_deeply_nested_config_file_is_a_clean_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("allowed_hosts = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=f"config file {config} nests"):
        load_settings(config_file=config, environ={"MEMLANE_HOME": str(tmp_path)})


def test_a_memlane_key_that_is_not_a_table_is_a_clean_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("memlane = 3\n")
    with pytest.raises(ConfigError, match=r"\[memlane\] in config file"):
        load_settings(config_file=config, environ={"MEMLANE_HOME": str(tmp_path)})
