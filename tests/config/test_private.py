"""A home or config another account could write is refused at start with the `chmod` that
fixes it; a home merely readable by others is tightened; the admin token's minimum holds
for every source."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import ConfigError, Settings, load_settings
from memlane.files import admin_token
from memlane.store import StoreError, open_store

ENV = {"OPENAI_BASE_URL": "", "MEMLANE_CONFIG": "", "MEMLANE_EMBEDDING_BACKEND": "hashing"}


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_home_is_made_0700(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    open_store(Settings(home=home)).close()
    assert mode(home) == 0o700
    assert mode(home / "memlane.db") == 0o600


def test_a_home_readable_by_others_is_tightened_to_0700(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    open_store(Settings(home=home)).close()
    assert mode(home) == 0o700


@pytest.mark.parametrize("bits", [0o770, 0o777, 0o730], ids=oct)
def test_a_home_writable_by_others_is_refused_with_the_fix(tmp_path: Path, bits: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(bits)
    with pytest.raises(StoreError, match=f"writable by other users.*`chmod 700 {home}`"):
        open_store(Settings(home=home))
    assert not (home / "memlane.db").exists()  # nothing created in it


def test_the_cli_refuses_a_shared_home_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    result = CliRunner().invoke(app, ["--home", str(home), "sessions", "list"], env=ENV)
    assert result.exit_code == 1
    assert f"chmod 700 {home}" in result.output
    assert "Traceback" not in result.output


def test_serve_refuses_a_shared_home_before_listening(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o775)
    result = CliRunner().invoke(app, ["--home", str(home), "serve", "--port", "0"], env=ENV)
    assert result.exit_code == 1
    assert f"chmod 700 {home}" in result.output
    assert "listening" not in result.output


def test_a_home_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # as if someone else ran it
    with pytest.raises(StoreError, match=r"belongs to another user.*chmod 700"):
        open_store(Settings(home=home))


def test_a_config_file_writable_by_others_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text('allowed_hosts = ["*"]\n')
    config.chmod(0o666)
    with pytest.raises(ConfigError, match=f"writable by other users.*`chmod 600 {config}`"):
        load_settings(environ={"MEMLANE_HOME": str(home)})
    elsewhere = tmp_path / "shared.toml"
    elsewhere.write_text("port = 9000\n")
    elsewhere.chmod(0o664)
    with pytest.raises(ConfigError, match=f"chmod 600 {elsewhere}"):
        load_settings(config_file=elsewhere, environ={"MEMLANE_HOME": str(home)})


def test_a_planted_admin_token_writable_by_others_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "admin_token").write_text("a-planted-token-that-is-long-enough\n")
    (home / "admin_token").chmod(0o666)
    with pytest.raises(StoreError, match="chmod 600"):
        open_store(Settings(home=home))


def test_a_short_admin_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "admin_token").write_text("x\n")
    (tmp_path / "admin_token").chmod(0o600)
    with pytest.raises(admin_token.AdminTokenError, match="at least 16 characters"):
        admin_token.ensure(tmp_path, None)


def test_serve_refuses_a_hand_written_one_character_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "admin_token").write_text("x\n")
    (home / "admin_token").chmod(0o600)
    result = CliRunner().invoke(app, ["--home", str(home), "serve", "--port", "0"], env=ENV)
    assert result.exit_code == 1
    assert f"{home / 'admin_token'} must be at least 16 characters" in result.output
    assert f"delete {home / 'admin_token'}" in result.output
    assert "listening" not in result.output
