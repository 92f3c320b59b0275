"""`memlane doctor` explains recorded failures with their fix."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.engine.failopen import EVENT
from memlane.store.sqlite import SQLiteStore


def test_doctor_groups_failures_and_says_what_to_do(tmp_path: Path) -> None:
    runner = CliRunner()
    assert "nothing has failed" in runner.invoke(app, ["--home", str(tmp_path), "doctor"]).stdout
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s")
    for _ in range(2):
        store.add_event(
            session.id, EVENT, {"stage": "recall", "type": "TimeoutError", "error": "took 80 ms"}
        )
    store.add_event(session.id, EVENT, {"stage": "scaffold", "type": "OSError", "error": "denied"})
    store.close()
    result = runner.invoke(app, ["--home", str(tmp_path), "doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["proxy_running"] is False
    first, second = report["problems"]
    assert (first["stage"], first["type"], first["count"]) == ("recall", "TimeoutError", 2)
    assert "MEMLANE_RECALL_DEADLINE_MS" in first["advice"]
    assert (second["stage"], second["count"], second["last_error"]) == ("scaffold", 1, "denied")
    table = runner.invoke(app, ["--home", str(tmp_path), "doctor"]).stdout
    assert "recall failed 2×" in table
    assert "fix:" in table


def test_a_request_that_went_on_without_memlanes_work_is_explained(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s")
    store.add_event(
        session.id,
        EVENT,
        {"stage": "wait", "type": "TimeoutError", "error": "storing the answer took too long"},
    )
    store.close()
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "doctor", "--json"])
    (problem,) = json.loads(result.stdout)["problems"]
    assert "MEMLANE_REQUEST_WAIT_SECONDS" in problem["advice"]
