"""`memlane sessions …` against a real SQLite store in a temporary home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.files.paths import session_dir
from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message, Session
from tests.support.upstream import Reply, ScriptedUpstream


def add_session(
    store: SQLiteStore,
    key: str,
    prompts: list[str],
    *,
    namespace: str | None = None,
    metadata: dict[str, object] | None = None,
) -> Session:
    session = store.ensure_session(key, namespace=namespace)
    for prompt in prompts:
        store.append_messages(
            session.id,
            [
                NewMessage(Message(role="user", text=prompt), 5),
                NewMessage(Message(role="assistant", text=f"answer to {prompt}"), 7),
            ],
        )
    store.add_usage(session.id, prompt_tokens=100, completion_tokens=20, cost_usd=0.25)
    if metadata is not None:
        store.update_session(session.id, metadata=metadata)
    found = store.get_session(session.id)
    assert found is not None
    return found


def invoke(runner: CliRunner, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def test_list_is_empty_at_first(runner: CliRunner) -> None:
    code, out, _ = invoke(runner, "sessions", "list", "--json")
    assert code == 0
    assert json.loads(out) == []
    code, out, _ = invoke(runner, "sessions", "list")
    assert "no sessions yet" in out


def test_a_filter_that_matches_nothing_says_so_not_that_there_are_none(
    runner: CliRunner, store: SQLiteStore
) -> None:
    add_session(store, "one", ["plan the release"], namespace="/work/web")
    code, out, _ = invoke(runner, "sessions", "list", "--namespace", "/work/typo")
    assert code == 0
    assert "no sessions yet" not in out
    assert "no session matches --namespace / --tag (1 in all" in " ".join(out.split())


def test_list_newest_first_with_title_messages_tokens_cost(
    runner: CliRunner, store: SQLiteStore
) -> None:
    long_prompt = "why " * 60
    old = add_session(store, "old", [long_prompt])
    new = add_session(store, "new", ["plan the release"], metadata={"name": "release-plan"})
    code, out, _ = invoke(runner, "sessions", "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == [new.id, old.id]
    assert rows[0]["title"] == "release-plan"
    assert len(rows[1]["title"]) == 100
    assert rows[1]["title"].startswith("why why")
    assert rows[1]["message_count"] == 2
    assert rows[1]["prompt_tokens"] + rows[1]["completion_tokens"] == 120
    assert rows[1]["cost_usd"] == pytest.approx(0.25)
    code, out, _ = invoke(runner, "sessions", "list")
    assert code == 0
    assert "release-plan" in out
    assert "$0.2500" in out


def test_list_prints_ids_that_can_be_pasted_at_80_columns(
    runner: CliRunner, store: SQLiteStore
) -> None:
    sessions = [
        add_session(store, f"k{i}", ["a long first prompt " * 8], namespace="some-long-namespace")
        for i in range(3)
    ]
    code, out, _ = invoke(runner, "sessions", "list")
    assert code == 0
    for session in sessions:
        row = next(line for line in out.splitlines() if session.id[:10] in line)
        printed = next(
            word for word in row.replace("│", " ").split() if word[:10] == session.id[:10]
        )
        assert "…" not in printed
        code, shown, err = invoke(runner, "sessions", "show", printed, "--json")
        assert code == 0, err
        assert json.loads(shown)["id"] == session.id


def test_list_filters_by_namespace_and_tag(runner: CliRunner, store: SQLiteStore) -> None:
    a = add_session(store, "a", ["x"], namespace="repo-a", metadata={"tags": ["auth", "db"]})
    b = add_session(store, "b", ["y"], namespace="repo-b", metadata={"tags": ["ui"]})
    _, out, _ = invoke(runner, "sessions", "list", "--namespace", "repo-b", "--json")
    assert [r["id"] for r in json.loads(out)] == [b.id]
    _, out, _ = invoke(runner, "sessions", "list", "--tag", "AUTH", "--json")
    assert [r["id"] for r in json.loads(out)] == [a.id]


def test_list_shows_each_sessions_project(runner: CliRunner, store: SQLiteStore) -> None:
    """Its name in the table; its namespace (the repository root's path) in `--json`."""
    add_session(store, "w", ["work on the api"], namespace="/home/ann/work/api")
    add_session(store, "d", ["a plain chat"], namespace="default")
    code, out, _ = invoke(runner, "sessions", "list")
    assert code == 0
    assert "project" in out
    row = next(line for line in out.splitlines() if "work on the api" in line)
    assert row.rstrip(" │").endswith("api")
    assert "/home/ann" not in out
    _, out, _ = invoke(runner, "sessions", "list", "--json")
    found = {r["key"]: (r["namespace"], r["project"]) for r in json.loads(out)}
    assert found == {"w": ("/home/ann/work/api", "api"), "d": ("default", "default")}


def test_show_by_name_prefix_and_key(runner: CliRunner, store: SQLiteStore) -> None:
    session = add_session(store, "chat-1", ["hello", "more"], metadata={"name": "greeting"})
    for ref in ("greeting", "GREETING", session.id[:8], "chat-1", session.id):
        code, out, err = invoke(runner, "sessions", "show", ref, "--json")
        assert code == 0, err
        data = json.loads(out)
        assert data["id"] == session.id
    assert [m["text"] for m in data["messages"]] == [
        "hello",
        "answer to hello",
        "more",
        "answer to more",
    ]
    code, out, _ = invoke(runner, "sessions", "show", "greeting")
    assert code == 0
    assert "answer to more" in out


def test_show_by_the_title_the_list_shows(runner: CliRunner, store: SQLiteStore) -> None:
    session = add_session(store, "chat-2", ["Hello"])
    store.update_session(session.id, title="Hello")
    code, listed, _ = invoke(runner, "sessions", "list")
    assert code == 0
    assert "Hello" in listed
    code, out, err = invoke(runner, "sessions", "show", "hello", "--json")
    assert code == 0, err
    assert json.loads(out)["id"] == session.id


def test_a_short_id_prefix_says_how_long_one_must_be(runner: CliRunner, store: SQLiteStore) -> None:
    add_session(store, "k", ["x"])
    code, _, err = invoke(runner, "sessions", "show", "f4")
    assert code == 1
    assert "an id prefix needs at least 6 characters" in err


def test_show_unknown_session_is_one_clear_line(runner: CliRunner, store: SQLiteStore) -> None:
    add_session(store, "k", ["x"])
    code, _, err = invoke(runner, "sessions", "show", "nope")
    assert code == 1
    assert "no session matches 'nope'" in err
    assert "memlane sessions list" in err
    assert "Traceback" not in err


def test_show_warns_about_a_corrupt_meta_file(
    runner: CliRunner, store: SQLiteStore, tmp_path: Path
) -> None:
    session = add_session(store, "k", ["x"])
    folder = session_dir(tmp_path / "sessions", "k")
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text("{not json", encoding="utf-8")
    code, out, err = invoke(runner, "sessions", "show", session.id, "--json")
    assert code == 0
    assert "meta.json is not valid JSON" in err
    assert json.loads(out)["id"] == session.id


def test_delete_asks_and_refuses_without_a_terminal(runner: CliRunner, store: SQLiteStore) -> None:
    session = add_session(store, "k", ["x"])
    code, _, err = invoke(runner, "sessions", "delete", session.id)
    assert code == 1
    assert "--yes" in err
    assert store.get_session(session.id) is not None


def test_delete_yes_removes_rows_and_folder(
    runner: CliRunner, store: SQLiteStore, tmp_path: Path
) -> None:
    session = add_session(store, "k", ["x"])
    store.add_event(session.id, "note", {"a": 1})
    folder = session_dir(tmp_path / "sessions", "k")
    folder.mkdir(parents=True)
    (folder / "todo.md").write_text("- [ ] x\n", encoding="utf-8")
    code, out, _ = invoke(runner, "sessions", "delete", session.id, "--yes", "--json")
    assert code == 0
    assert json.loads(out) == {"deleted": session.id, "purged": False}
    assert store.get_session(session.id) is None
    assert store.list_messages(session.id) == []
    assert not folder.exists()


def test_delete_by_part_of_a_title_refuses_and_deletes_nothing(
    runner: CliRunner, store: SQLiteStore
) -> None:
    session = add_session(store, "important-work", ["plan the zulu launch"])
    store.update_session(session.id, title="plan the zulu launch")
    code, out, _ = invoke(runner, "sessions", "show", "zulu", "--json")
    assert code == 0  # reading may guess from the title
    assert json.loads(out)["id"] == session.id
    code, _, err = invoke(runner, "sessions", "delete", "zulu", "--yes")
    assert code == 1
    assert "no session matches 'zulu' exactly" in err
    assert "memlane sessions list" in err
    assert "Traceback" not in err
    assert store.get_session(session.id) is not None
    assert len(store.list_messages(session.id)) == 2


def test_commands_that_change_a_session_need_an_exact_reference(
    runner: CliRunner, store: SQLiteStore
) -> None:
    session = add_session(store, "k", ["x"], metadata={"name": "billing-report"})
    for command in ("approve-spec", "compact", "index"):
        code, _, err = invoke(runner, "sessions", command, "billing-repor")
        assert code == 1, command
        assert "exactly" in err, command
    code, out, err = invoke(runner, "sessions", "approve-spec", "Billing-Report", "--json")
    assert code == 0, err
    assert json.loads(out)["id"] == session.id


def test_export_import_round_trip(runner: CliRunner, store: SQLiteStore, tmp_path: Path) -> None:
    session = add_session(store, "trip", ["first", "second"], metadata={"name": "trip"})
    store.append_messages(
        session.id, [NewMessage(Message(role="user", text="ctx", origin="reference"), 3)]
    )
    stale = store.append_messages(session.id, [NewMessage(Message(role="user", text="old"), 1)])
    store.set_message_status(stale[0].id, "superseded")
    store.add_event(session.id, "session.index", {"success": True, "attempt": 1})
    store.set_state(session.id, "todo", "- [ ] ship it")
    store.update_session(session.id, summary="they said hi", summarized_count=2)
    export = tmp_path / "trip.jsonl"
    code, _, err = invoke(runner, "sessions", "export", "trip", "-o", str(export))
    assert code == 0, err
    first = export.read_text(encoding="utf-8")

    code, _, _ = invoke(runner, "sessions", "delete", "trip", "--yes")
    assert code == 0
    code, out, err = invoke(runner, "sessions", "import", str(export), "--json")
    assert code == 0, err
    imported = json.loads(out)
    assert imported["key"] == "trip"
    assert imported["id"] != session.id

    code, second, _ = invoke(runner, "sessions", "export", "trip")
    assert code == 0
    assert _comparable(second) == _comparable(first)


def _comparable(text: str) -> list[dict[str, object]]:
    """Export lines without what an import legitimately renews (ids, times, import marks)."""
    out = []
    for line in text.splitlines():
        data = json.loads(line)
        for volatile in ("id", "created_at", "updated_at"):
            data.pop(volatile, None)
        if data["type"] == "session":
            data["metadata"] = {k: v for k, v in data["metadata"].items() if k != "imported_from"}
        out.append(data)
    return out


def test_import_rejects_bad_files_and_stores_nothing(
    runner: CliRunner, store: SQLiteStore, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "session"}\n', encoding="utf-8")
    code, _, err = invoke(runner, "sessions", "import", str(bad))
    assert code == 1
    assert "line 1 is not the session header" in err
    good_head = add_session(store, "src", ["x"])
    _, exported, _ = invoke(runner, "sessions", "export", good_head.id)
    broken = exported.splitlines()
    broken[1] = '{"type": "message", "position": "x"}'
    bad.write_text("\n".join(broken), encoding="utf-8")
    code, _, err = invoke(runner, "sessions", "import", str(bad), "--key", "other")
    assert code == 1
    assert "line 2" in err
    assert store.find_session("other") is None
    code, _, err = invoke(runner, "sessions", "import", str(tmp_path / "missing.jsonl"))
    assert code == 1
    assert "cannot read" in err


def test_import_refuses_an_existing_key_and_accepts_another(
    runner: CliRunner, store: SQLiteStore
) -> None:
    session = add_session(store, "dup", ["x"])
    _, exported, _ = invoke(runner, "sessions", "export", session.id)
    code, _, err = invoke(runner, "sessions", "import", "-", input=exported)
    assert code == 1
    assert "already exists" in err
    assert "--key" in err
    code, out, err = invoke(runner, "sessions", "import", "-", "--key", "dup2", input=exported)
    assert code == 0, err
    assert "dup2" in out
    copy = store.find_session("dup2")
    assert copy is not None
    assert copy.message_count == 2


def test_fork_copies_history_with_a_parent_link(runner: CliRunner, store: SQLiteStore) -> None:
    source = add_session(store, "src", ["one", "two"], metadata={"name": "src", "summary": "s"})
    code, out, err = invoke(runner, "sessions", "fork", "src", "--at", "2", "--json")
    assert code == 0, err
    forked = json.loads(out)
    assert forked["parent_id"] == source.id
    assert forked["message_count"] == 2
    assert "name" not in forked["metadata"]
    assert forked["metadata"]["summary"] == "s"
    assert forked["title"] == "fork of src"
    # the name still designates only the source
    code, out, _ = invoke(runner, "sessions", "show", "src", "--json")
    assert json.loads(out)["id"] == source.id


def test_fork_refuses_a_point_past_the_sessions_messages(
    runner: CliRunner, store: SQLiteStore
) -> None:
    """`--at` is a position as `show` numbers them (0-based): past one after the last it
    is refused with the range, not taken as "everything"."""
    source = add_session(store, "src", ["one", "two"])  # four messages: positions 0..3
    code, _, err = invoke(runner, "sessions", "fork", "src", "--at", "999", "--key", "far")
    assert code == 1
    assert f"session {source.id} has messages at positions 0..3; --at must be 0..4" in " ".join(
        err.split()
    )
    assert "Traceback" not in err
    assert store.find_session("far") is None
    code, out, err = invoke(runner, "sessions", "fork", "src", "--at", "4", "--json")
    assert code == 0, err
    assert json.loads(out)["message_count"] == 4
    code, _, err = invoke(runner, "sessions", "fork", "src", "--key", "src")
    assert code == 1
    assert "already exists" in err
    assert "Traceback" not in err


def test_index_and_ask_use_the_configured_llm(
    runner: CliRunner,
    store: SQLiteStore,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMLANE_LLM_BASE_URL", upstream.url)
    monkeypatch.setenv("MEMLANE_LLM_MODEL", "scripted-small")
    session = add_session(store, "k", ["we chose postgres for the queue"])
    answer = {
        "name": "Queue Backend Choice",
        "description": "Choosing the queue backend.",
        "summary": "Postgres was chosen for the queue.",
        "tags": ["queue", "postgres"],
    }
    upstream.script(Reply(text=json.dumps(answer)), Reply(text="Postgres."))
    code, out, err = invoke(runner, "sessions", "index", session.id, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["name"] == "queue-backend-choice"
    assert data["attempts"] == 1
    assert upstream.model_requests[0].json["response_format"] == {"type": "json_object"}
    code, out, err = invoke(
        runner, "sessions", "ask", "queue-backend-choice", "which database?", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["answer"] == "Postgres."
    asked = upstream.model_requests[1].messages[-1]["content"]
    assert "Question: which database?" in asked
    assert "Postgres was chosen for the queue." in asked


def test_ask_reports_an_unreachable_llm(
    runner: CliRunner, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MEMLANE_LLM_MODEL", "m")
    session = add_session(store, "k", ["x"])
    code, _, err = invoke(runner, "sessions", "ask", session.id, "what?")
    assert code == 1
    assert "could not ask the model" in err
    assert "Traceback" not in err


def test_approve_spec_marks_the_session(runner: CliRunner, store: SQLiteStore) -> None:
    from memlane.config import Settings
    from memlane.engine import scaffold
    from memlane.engine.runtime import Runtime

    session = add_session(store, "k", ["write the spec"])
    code, out, err = invoke(runner, "sessions", "approve-spec", "k", "--json")
    assert code == 0, err
    assert json.loads(out) == {"id": session.id, "spec_approved": True}
    rt = Runtime(Settings(home=store.path.parent), store)
    assert scaffold.read_texts(rt, session).get("spec_approved")


def test_ask_uses_the_model_that_last_indexed_the_session(
    runner: CliRunner,
    store: SQLiteStore,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMLANE_UPSTREAM_URL", upstream.url)
    session = add_session(store, "k", ["x"], metadata={"indexed_model": "cheap-7", "summary": "s"})
    upstream.script(Reply(text="an answer"))
    code, out, err = invoke(runner, "sessions", "ask", session.id, "what?")
    assert code == 0, err
    assert out.strip() == "an answer"
    assert upstream.last.json["model"] == "cheap-7"


def test_list_cost_includes_indexing(runner: CliRunner, store: SQLiteStore) -> None:
    add_session(store, "k", ["x"], metadata={"index_cost_usd": 0.5})
    _, out, _ = invoke(runner, "sessions", "list", "--json")
    row = json.loads(out)[0]
    assert (row["cost_usd"], row["index_cost_usd"]) == (0.25, 0.5)
    _, out, _ = invoke(runner, "sessions", "list")
    assert "$0.7500" in out


def test_ask_uses_the_model_the_sessions_requests_used(
    runner: CliRunner,
    store: SQLiteStore,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memlane.config import Settings
    from memlane.engine.runtime import Runtime
    from memlane.engine.turn import Turn
    from memlane.engine.turn_store import store_incoming

    monkeypatch.setenv("MEMLANE_UPSTREAM_URL", upstream.url)
    rt = Runtime(Settings(home=store.path.parent), store)
    turn = Turn(
        key="chat-9",
        namespace="chat-9",
        model="qwen-local",
        wire="chat",
        messages=[Message(role="user", text="we picked sqlite")],
    )
    store_incoming(rt, turn)
    upstream.script(Reply(text="SQLite."), Reply(text="{}"))
    code, out, err = invoke(runner, "sessions", "ask", "chat-9", "which database?")
    assert code == 0, err
    assert out.strip() == "SQLite."
    assert upstream.last.json["model"] == "qwen-local"


def test_delete_leaves_the_memory_repository_clean_and_the_text_gone(
    runner: CliRunner, tmp_path: Path
) -> None:
    import asyncio
    import subprocess

    from memlane.config import Settings
    from memlane.engine.memory.ingest import TurnInput, ingest_turn
    from memlane.engine.runtime import Runtime

    secret = "the-vault-combination-is-31-47-05"
    settings = Settings(home=tmp_path, embedding_backend="hashing", memory_extract_facts=False)
    store = SQLiteStore(tmp_path / "memlane.db")
    rt = Runtime(settings, store)
    session = store.ensure_session("vault")
    store.append_messages(session.id, [NewMessage(Message(role="user", text=secret), 5)])

    async def remember() -> None:
        await ingest_turn(rt, TurnInput(session.id, "vault", "m", user_text=secret))
        await rt.memory_book.flush()
        await rt.background.drain()

    asyncio.run(remember())
    store.close()
    memory = tmp_path / "memory"
    assert any(secret in p.read_text() for p in memory.rglob("*.md"))
    (own,) = (memory / "entries").glob(f"conv_{session.id}-*")  # the turns' own folder
    assert (own / ".scope").read_text(encoding="utf-8") == f"conv:{session.id}\n"

    code, _, err = invoke(runner, "sessions", "delete", session.id, "--yes")
    assert code == 0, err
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=memory, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""  # the deletion is committed, not left for the next commit
    assert not own.exists()  # deleted means gone: no empty folder, no .scope file left
    assert not any(secret in p.read_text() for p in memory.rglob("*.md"))
    database = (tmp_path / "memlane.db").read_bytes()
    assert secret.encode() not in database  # secure_delete: no copy in free pages


def test_context_of_a_session_without_a_model_assumes_the_default_window(
    runner: CliRunner, store: SQLiteStore
) -> None:
    add_session(store, "quiet", ["first question", "second question"])
    code, out, _ = invoke(runner, "sessions", "context", "quiet", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["model"], data["window_source"], data["window"]) == ("", "default", 131_072)
    assert data["notes"] == ["the session has not named a model yet: the default window is assumed"]
    assert data["parts"]["head"]["items"] + data["parts"]["tail"]["items"] == 4
    assert data["parts"]["snapshot"] == {"tokens": 0, "items": 0}
    assert data["compacts_next"] is False
    assert data["events"] == []
    code, out, _ = invoke(runner, "sessions", "context", "quiet")
    assert code == 0
    assert "model (none yet)" in out
    assert "assumed: unknown model" in out


def test_an_imported_output_path_never_reads_a_file_outside_the_session(
    runner: CliRunner, store: SQLiteStore, tmp_path: Path
) -> None:
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("root:$6$hash-of-another-file")
    head = {"type": "session", "format": "memlane-session", "version": 1, "id": "x"}
    planted = tmp_path / "planted.jsonl"
    planted.write_text(
        "\n".join(
            json.dumps(entry)
            for entry in (
                head | {"key": "planted", "namespace": "repo"},
                {"type": "message", "position": 0, "message": {"role": "user", "text": "hi"}},
                {
                    "type": "event",
                    "kind": "governance.tool_output",
                    "payload": {"index": 0, "path": str(secret)},
                },
            )
        )
    )
    code, _, err = invoke(runner, "sessions", "import", str(planted))
    assert code == 0, err
    code, listed, _ = invoke(runner, "sessions", "output", "planted", "--json")
    (output,) = json.loads(listed)
    code, out, err = invoke(runner, "sessions", "output", "planted", str(output["id"]))
    assert code == 1
    assert "root:" not in out
    assert "/tool-outputs/elsewhere.txt" in err  # looked for in the session's folder only


def test_import_refuses_a_role_the_proxy_would_not_accept(
    runner: CliRunner, store: SQLiteStore, tmp_path: Path
) -> None:
    head = {"type": "session", "format": "memlane-session", "version": 1, "id": "x"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(head | {"key": "k", "namespace": "repo"})
        + "\n"
        + json.dumps({"type": "message", "position": 0, "message": {"role": "hacker"}})
    )
    code, _, err = invoke(runner, "sessions", "import", str(bad))
    assert code == 1
    assert "line 2" in err
    assert "role" in err
    assert store.find_session("k") is None
