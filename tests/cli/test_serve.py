"""`memlane serve` refuses what it must refuse, with a one-line error and no traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from memlane.cli.app import app


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    args = ["--home", str(tmp_path), "serve", "--host", "0.0.0.0"]
    result = CliRunner().invoke(app, args, env={"MEMLANE_ADMIN_TOKEN": ""})
    assert result.exit_code == 1
    assert "MEMLANE_ADMIN_TOKEN" in result.output
    assert "Traceback" not in result.output


def test_serve_rejects_an_unknown_client_scope(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "serve", "--client-scope", "robots"])
    assert result.exit_code == 1
    assert "client_scope" in result.output
