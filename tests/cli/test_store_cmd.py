"""`memlane store info|migrate` against real SQLite files and a real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.store import NewMessage
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "MEMLANE_STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def seed(path: Path) -> str:
    store = SQLiteStore(path)
    try:
        session = store.ensure_session("cli-session")
        store.append_messages(
            session.id,
            [NewMessage(Message("user", "hello walrus")), NewMessage(Message("assistant", "hi"))],
        )
        store.add_event(session.id, "note", {"x": 1}, text="an event")
        return session.id
    finally:
        store.close()


def test_migrate_copies_the_configured_store_into_postgres_and_back(
    runner: CliRunner, tmp_path: Path, pg_url: str
) -> None:
    session_id = seed(tmp_path / "memlane.db")  # the default store in MEMLANE_HOME
    result = runner.invoke(app, ["store", "migrate", "--to", pg_url, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["verified"] is True
    assert report["tables"]["messages"] == {"source": 2, "target": 2}
    assert report["tables"]["events"] == {"source": 1, "target": 1}
    assert report["to"].startswith("postgresql://")

    pg = PostgresStore(pg_url)
    try:
        assert [m.message.text for m in pg.list_messages(session_id)] == ["hello walrus", "hi"]
    finally:
        pg.close()

    back = tmp_path / "back.db"
    result = runner.invoke(app, ["store", "migrate", "--from", pg_url, "--to", f"sqlite:///{back}"])
    assert result.exit_code == 0, result.output
    assert "every count matches" in result.stdout
    copy = SQLiteStore(back)
    try:
        assert [m.message.text for m in copy.list_messages(session_id)] == ["hello walrus", "hi"]
    finally:
        copy.close()


def test_migrate_into_a_store_that_holds_data_fails_cleanly(
    runner: CliRunner, tmp_path: Path
) -> None:
    seed(tmp_path / "a.db")
    seed(tmp_path / "b.db")
    before = (tmp_path / "b.db").stat().st_size
    result = runner.invoke(
        app,
        [
            "store",
            "migrate",
            "--from",
            f"sqlite:///{tmp_path / 'a.db'}",
            "--to",
            f"sqlite:///{tmp_path / 'b.db'}",
        ],
    )
    assert result.exit_code == 1
    assert "not empty" in result.stderr
    assert "Traceback" not in result.output
    assert (tmp_path / "b.db").stat().st_size == before


def test_migrate_refuses_an_unknown_url_and_the_same_store(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["store", "migrate", "--to", "mysql://u:pw@h/db"])
    assert result.exit_code == 1
    assert "unsupported store URL" in result.stderr
    assert "pw" not in result.stderr
    seed(tmp_path / "memlane.db")
    db = f"sqlite:///{tmp_path / 'memlane.db'}"
    result = runner.invoke(app, ["store", "migrate", "--from", db, "--to", db])
    assert result.exit_code == 1
    assert "same store" in result.stderr


def test_migrate_from_a_store_that_is_not_there_creates_neither(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A mistyped --from would have been created empty and copied: nothing, "verified"."""
    typo, target = tmp_path / "memlane.bd", tmp_path / "copy.db"
    result = runner.invoke(
        app, ["store", "migrate", "--from", f"sqlite:///{typo}", "--to", f"sqlite:///{target}"]
    )
    assert result.exit_code == 1, result.output
    assert f"no SQLite store at {typo} (from --from)" in result.stderr
    assert not typo.exists()
    assert not target.exists()


def test_migrate_to_an_unreachable_server_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    seed(tmp_path / "memlane.db")
    url = "postgresql://u:topsecret@127.0.0.1:1/x?connect_timeout=2"
    result = runner.invoke(app, ["store", "migrate", "--to", url])
    assert result.exit_code == 1
    assert "cannot open the PostgreSQL store" in result.stderr
    assert "topsecret" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_info_counts_rows(runner: CliRunner, tmp_path: Path) -> None:
    seed(tmp_path / "memlane.db")
    result = runner.invoke(app, ["store", "info", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["url"] == f"sqlite:///{tmp_path / 'memlane.db'}"
    assert data["tables"]["sessions"] == 1
    assert data["tables"]["messages"] == 2


def test_purge_leaves_no_copy_of_deleted_rows_in_the_files(
    runner: CliRunner, tmp_path: Path
) -> None:
    """What a purge does last, run on its own: a purge that stopped there said so."""
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)  # held open: its WAL keeps the pages' older versions
    try:
        doomed = store.ensure_session("doomed")
        store.append_messages(doomed.id, [NewMessage(Message("user", "locker code quagga-7731"))])
        store.delete_session(doomed.id)

        def held() -> bytes:
            return b"".join(f.read_bytes() for f in tmp_path.glob("memlane.db*") if f.is_file())

        assert b"quagga-7731" in held()
        result = runner.invoke(app, ["store", "purge", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["purged"] is True
        assert b"quagga-7731" not in held()
    finally:
        store.close()


def test_a_store_opened_from_a_home_without_its_files_keeps_its_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite the files are the truth, and the first catch-up purged every memory that
    had none: a store moved with `store migrate` (its files are not copied), or another
    home's store opened from this one, lost all of them to a read-only `memory list`."""
    monkeypatch.setenv("MEMLANE_EMBEDDING_BACKEND", "hashing")
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "MEMLANE_STORE_URL", "MEMLANE_HOME"):
        monkeypatch.delenv(name, raising=False)
    first, second = tmp_path / "first", tmp_path / "second"
    runner = CliRunner()
    for text in ("The user deploys on Fridays", "The staging host is heron"):
        added = runner.invoke(app, ["--home", str(first), "memory", "add", text])
        assert added.exit_code == 0, added.output
    url = f"sqlite:///{first / 'memlane.db'}"

    listed = runner.invoke(
        app, ["--home", str(second), "--store-url", url, "memory", "list", "--json"]
    )
    assert listed.exit_code == 0, listed.output
    texts = sorted(m["text"] for m in json.loads(listed.stdout))
    assert texts == ["The staging host is heron", "The user deploys on Fridays"]
    assert len(list((second / "memory" / "entries").rglob("*.md"))) == 2  # written there
    again = runner.invoke(app, ["--home", str(first), "memory", "list", "--json"])
    assert len(json.loads(again.stdout)) == 2
