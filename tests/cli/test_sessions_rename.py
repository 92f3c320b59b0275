"""`memlane sessions rename` and the names an import takes: `@@name` finds one session."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memlane.store.sqlite import SQLiteStore
from tests.cli.test_sessions_cli import add_session, invoke


def test_rename_names_a_session_by_an_exact_reference(
    runner: CliRunner, store: SQLiteStore
) -> None:
    session = add_session(store, "k", ["x"], namespace="repo", metadata={"name": "billing-report"})
    add_session(store, "other", ["y"], namespace="repo", metadata={"name": "taken-name"})
    code, _, err = invoke(runner, "sessions", "rename", "billing-repor", "new-name")
    assert code == 1
    assert "exactly" in err
    code, _, err = invoke(runner, "sessions", "rename", "k", "Taken-Name")
    assert code == 1
    assert "'Taken-Name' already names session" in " ".join(err.split())
    code, _, err = invoke(runner, "sessions", "rename", "k", "two words")
    assert code == 1
    assert "cannot be referenced" in err

    code, out, err = invoke(runner, "sessions", "rename", "billing-report", "invoices", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["id"], data["name"], data["title"]) == (session.id, "invoices", "invoices")
    code, out, _ = invoke(runner, "sessions", "rename", session.id[:8], "invoices-2026")
    assert code == 0
    assert out.strip() == f"renamed {session.id} to invoices-2026 (was invoices)"
    code, out, _ = invoke(runner, "sessions", "show", "invoices-2026", "--json")
    assert json.loads(out)["id"] == session.id


def test_an_import_whose_name_is_taken_is_named_apart_and_says_so(
    runner: CliRunner, store: SQLiteStore
) -> None:
    session = add_session(store, "dup", ["x"], metadata={"name": "trip"})
    _, exported, _ = invoke(runner, "sessions", "export", session.id)
    code, out, err = invoke(runner, "sessions", "import", "-", "--key", "dup2", input=exported)
    assert code == 0, err
    assert "named trip-2: trip is another session's" in " ".join(out.split())
    code, out, err = invoke(
        runner, "sessions", "import", "-", "--key", "dup3", "--json", input=exported
    )
    assert code == 0, err
    data = json.loads(out)
    assert (data["name"], data["metadata"]["imported_name"]) == ("trip-3", "trip")
    code, out, _ = invoke(runner, "sessions", "show", "trip", "--json")
    assert json.loads(out)["id"] == session.id  # the name still finds one session
