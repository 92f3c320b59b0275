"""`memlane memory …` and `memlane eval retrieval` against a real store and real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    monkeypatch.setenv("MEMLANE_EMBEDDING_BACKEND", "hashing")
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "EDITOR", "VISUAL"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def run(runner: CliRunner, *args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    if "--json" in args and code == 0:
        return json.loads(result.stdout)
    return result


def test_add_search_list_show(runner: CliRunner, tmp_path: Path) -> None:
    added = run(runner, "memory", "add", "The user prefers tabs", "--scope", "ns:web", "--json")
    run(runner, "memory", "add", "Deploys go through staging-7", "--scope", "ns:ops")
    found = run(runner, "memory", "search", "tabs", "--scope", "ns:web", "--json")
    assert [f["id"] for f in found] == [added["id"]]
    other = run(runner, "memory", "search", "staging-7", "--scope", "ns:web", "--json")
    assert {f["scope"] for f in other} <= {"ns:web"}  # never the other namespace's memory
    listed = run(runner, "memory", "list", "--scope", "ns:ops", "--json")
    assert [f["text"] for f in listed] == ["Deploys go through staging-7"]
    shown = run(runner, "memory", "show", added["id"], "--json")
    assert Path(shown["file"]).read_text().endswith("The user prefers tabs\n")
    assert Path(shown["file"]).is_relative_to(tmp_path / "memory" / "entries")
    table = run(runner, "memory", "list")
    assert "staging-7" in table.stdout


def test_edit_forget_and_log(runner: CliRunner) -> None:
    added = run(runner, "memory", "add", "The user drinks tea", "--json")
    run(runner, "memory", "edit", added["id"], "--text", "The user drinks coffee")
    shown = run(runner, "memory", "show", added["id"], "--json")
    assert shown["text"] == "The user drinks coffee"
    forgotten = run(runner, "memory", "forget", added["id"], "--json")
    assert forgotten["deleted"] is True
    assert "/deleted/facts/" in run(runner, "memory", "show", added["id"], "--json")["file"]
    assert run(runner, "memory", "search", "coffee", "--json") == []
    assert len(run(runner, "memory", "list", "--deleted", "--json")) == 1
    log = run(runner, "memory", "log", "--json")
    assert [e["message"].split("\n")[0] for e in log] == [
        f"memory: forgot {added['id']}",
        f"memory: edited {added['id']}",
        "memory: added to global",
    ]


def test_reindex_after_a_hand_edit(runner: CliRunner) -> None:
    added = run(runner, "memory", "add", "The user lives in Lyon", "--json")
    path = Path(run(runner, "memory", "show", added["id"], "--json")["file"])
    path.write_text(path.read_text().replace("Lyon", "Oslo"))
    report = run(runner, "memory", "reindex", "--json")
    assert (report["indexed"], report["scanned"]) == (1, 1)
    assert run(runner, "memory", "show", added["id"], "--json")["text"] == "The user lives in Oslo"


def test_export_writes_the_tree_with_git(runner: CliRunner, tmp_path: Path) -> None:
    run(runner, "memory", "add", "The user likes jazz")
    out = tmp_path / "exported"
    assert run(runner, "memory", "export", str(out), "--git", "--json")["exported"] == 1
    files = list((out / "entries" / "global" / "facts").glob("*.md"))
    assert len(files) == 1
    assert (out / ".git").is_dir()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("memory", "show", "nope"), "no memory with id 'nope'"),
        (("memory", "add", "x", "--scope", "elsewhere"), "invalid scope"),
        (("memory", "add", "   "), "needs some text"),
        (("memory", "list", "--role", "wizard"), "invalid role"),
        (("memory", "edit", "nope", "--text", "x"), "no memory with id 'nope'"),
        (("eval", "retrieval", "/does/not/exist.jsonl"), "cannot read"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    runner: CliRunner, args: tuple[str, ...], message: str
) -> None:
    result = run(runner, *args, code=1)
    assert message in result.output
    assert "Traceback" not in result.output
    assert run(runner, "memory", "list", "--json") == []


def write_conversations(path: Path) -> None:
    turns = [
        ("D1:1", "Ann", "I adopted a greyhound called Biscuit last week"),
        ("D1:2", "Bob", "Lovely! I spent the weekend repairing my sailing boat"),
        ("D1:3", "Ann", "My sister Clara is moving to Lisbon in June"),
        ("D1:4", "Bob", "I finally finished the marathon in Berlin"),
    ]
    record = {
        "id": "conv-x",
        "turns": [
            {"id": i, "session": 1, "speaker": s, "text": t, "time": "2024-03-01T10:00:00"}
            for i, s, t in turns
        ],
        "questions": [
            {
                "id": "q0",
                "question": "What is the name of Ann's greyhound?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
                "scored": True,
            },
            {
                "id": "q1",
                "question": "Where is Clara moving?",
                "answer": "Lisbon",
                "evidence": ["D1:3"],
                "category": 4,
                "scored": True,
            },
            {
                "id": "q2",
                "question": "Which city's marathon did Bob finish?",
                "answer": "Berlin",
                "evidence": ["D1:4"],
                "category": 1,
                "scored": True,
            },
            {
                "id": "q3",
                "question": "Unanswerable?",
                "answer": "",
                "evidence": [],
                "category": 5,
                "scored": False,
            },
        ],
    }
    path.write_text(json.dumps(record) + "\n")


def test_eval_retrieval_compares_every_configuration(runner: CliRunner, tmp_path: Path) -> None:
    data = tmp_path / "tiny.jsonl"
    write_conversations(data)
    report = run(runner, "eval", "retrieval", str(data), "--k", "1", "--k", "3", "--json")
    configs = {c["config"]: c for c in report["configs"]}
    assert list(configs) == ["default", "hybrid", "bm25", "dense", "plain"]
    for name, config in configs.items():
        assert (config["turns"], config["questions"]) == (4, 3)
        assert set(config["overall"]) == {"recall@1", "recall@3", "ndcg@10"}
        assert set(config["categories"]) == {"multi-hop", "single-hop"}
        assert config["conversations"]["conv-x"]["questions"] == 3
        assert config["latency_ms"]["p95"] >= config["latency_ms"]["p50"] > 0
        if name != "dense":  # every question shares a rare word with its gold turn
            assert config["overall"]["recall@1"] == 1.0, name
    assert not (tmp_path / "memory").exists()  # the data home is never touched
    table = run(runner, "eval", "retrieval", str(data), "--config", "bm25").stdout
    assert "query p50" in table
    assert "side by side" not in table  # one configuration: no comparison table
    bad = run(runner, "eval", "retrieval", str(data), "--config", "magic", code=1)
    assert "unknown configuration 'magic'" in bad.output


def test_eval_plain_baseline_reads_each_turn_alone(runner: CliRunner, tmp_path: Path) -> None:
    """The answer's words are in the turn before it: only context-expanded documents find it."""
    turns = [
        ("D1:1", "Bob", "Did you ever see the aurora over Tromso?"),
        ("D1:2", "Ann", "Yes, last Tuesday!"),
        ("D1:3", "Bob", "I adopted a greyhound called Biscuit from the shelter in Leeds"),
        ("D1:4", "Ann", "My sister is moving to Lisbon"),
    ]
    # more turns, so that words in four documents are rare enough to count (BM25's idf)
    topics = ["chess", "pottery", "violin", "sourdough", "kayaking", "origami", "tango"]
    turns += [
        (f"D1:{6 + i}", "Bob", f"I took up {topic} this spring") for i, topic in enumerate(topics)
    ]
    record = {
        "id": "conv-y",
        "turns": [
            {"id": i, "speaker": s, "text": t, "time": "2024-03-01T10:00:00"} for i, s, t in turns
        ],
        "questions": [
            {
                "id": "q0",
                "question": "When was the aurora over Tromso seen?",
                "evidence": ["D1:2"],
                "category": 2,
            },
        ],
    }
    data = tmp_path / "context.jsonl"
    data.write_text(json.dumps(record) + "\n")
    args = ("eval", "retrieval", str(data), "--k", "3", "--json")
    report = run(runner, *args, "--config", "plain", "--config", "default")
    recall = {c["config"]: c["overall"]["recall@3"] for c in report["configs"]}
    assert recall == {"plain": 0.0, "default": 1.0}


def test_eval_rejects_a_malformed_file(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "c", "turns": [{"text": "no id"}]}\n')
    result = run(runner, "eval", "retrieval", str(bad), code=1)
    assert "bad.jsonl:1" in result.output


def test_list_prints_pasteable_ids_and_commands_take_a_prefix(runner: CliRunner) -> None:
    added = run(
        runner, "memory", "add", "The build server is called " + "x" * 120 + " in ops", "--json"
    )
    table = run(runner, "memory", "list").stdout
    printed = next(word for word in table.split() if added["id"].startswith(word))
    assert len(printed) >= 10  # a prefix, whole: never cut with an ellipsis
    assert "…" not in table.splitlines()[3]
    assert run(runner, "memory", "show", printed, "--json")["id"] == added["id"]
    run(runner, "memory", "edit", printed, "--text", "The build server is ci-3")
    assert (
        run(runner, "memory", "show", added["id"], "--json")["text"] == "The build server is ci-3"
    )
    run(runner, "memory", "forget", printed)
    assert run(runner, "memory", "show", printed, "--json")["deleted"] is True


def test_a_too_short_or_unknown_prefix_is_one_clear_line(runner: CliRunner) -> None:
    run(runner, "memory", "add", "The user likes rust", "--json")
    short = run(runner, "memory", "show", "ab", code=1)
    assert "at least 6 characters" in short.output
    unknown = run(runner, "memory", "show", "ffffffffff", code=1)
    assert "memlane memory list" in unknown.output


def test_adding_the_same_text_twice_keeps_one_memory(runner: CliRunner) -> None:
    first = run(runner, "memory", "add", "The user prefers tabs", "--json")
    again = run(runner, "memory", "add", "  The user prefers tabs ", "--json")
    elsewhere = run(runner, "memory", "add", "The user prefers tabs", "--scope", "ns:a", "--json")
    assert again["id"] == first["id"]
    assert elsewhere["id"] != first["id"]
    assert len(run(runner, "memory", "list", "--json")) == 2


def test_eval_retrieval_runs_on_the_shipped_sample_without_a_file(runner: CliRunner) -> None:
    report = run(runner, "eval", "retrieval", "--config", "default", "--config", "plain", "--json")
    configs = {c["config"]: c for c in report["configs"]}
    assert list(configs) == ["default", "plain"]
    for config in configs.values():
        assert (config["turns"], config["questions"]) == (150, 27)
        assert set(config["conversations"]) == {"sample-1", "sample-2", "sample-3"}
        # a fact asked about in the words it was said in is found first
        assert config["categories"]["single-hop"]["recall@5"] == 1.0
    table = run(runner, "eval", "retrieval", "--config", "bm25")
    assert "sample conversations shipped with memlane" in table.stderr


def test_list_and_search_say_whether_a_memory_is_about_the_user_or_a_project(
    runner: CliRunner,
) -> None:
    """The same text in the user's global scope and in a project is shown twice, each
    with where it lives; `--json` carries `about` and the project's namespace."""
    text = "The user prefers tabs"
    run(runner, "memory", "add", text, "--scope", "global")
    run(runner, "memory", "add", text, "--scope", "ns:api")
    run(runner, "memory", "add", "Deploys go to fly.io", "--scope", "ns:api")
    found = run(runner, "memory", "search", "tabs", "--json")
    assert sorted((f["about"], f["namespace"]) for f in found if f["text"] == text) == [
        ("project", "api"),
        ("user", None),
    ]
    listed = run(runner, "memory", "list", "--json")
    assert {(f["text"], f["about"], f["namespace"]) for f in listed} == {
        (text, "user", None),
        (text, "project", "api"),
        ("Deploys go to fly.io", "project", "api"),
    }
    table = run(runner, "memory", "search", "tabs").stdout
    rows = [line for line in table.splitlines() if "prefers tabs" in line]
    assert len(rows) == 2
    assert any("user" in row and "project" not in row for row in rows)
    assert any("project api" in row for row in rows)


def test_a_memory_folder_that_cannot_be_written_is_a_clear_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    run(runner, "memory", "add", "The user drinks tea")
    folder = tmp_path / "memory"
    folder.rename(tmp_path / "memory.kept")
    folder.write_text("")  # not a folder: every write under it fails, whoever runs the test
    failed = run(runner, "memory", "add", "The user drinks coffee", code=1)
    assert "could not write the memory's files" in failed.output
    assert str(folder) in " ".join(failed.output.split())
    assert failed.exc_info is None or failed.exc_info[0] is SystemExit  # no traceback


def test_an_editor_that_cannot_start_changes_nothing_and_says_so(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = run(runner, "memory", "add", "The user drinks tea", "--json")
    monkeypatch.setenv("EDITOR", "/nonexistent/editor")
    failed = run(runner, "memory", "edit", added["id"], code=1)
    assert "could not start" in failed.output
    assert failed.exc_info is None or failed.exc_info[0] is SystemExit
    assert run(runner, "memory", "show", added["id"], "--json")["text"] == "The user drinks tea"


def test_text_that_reads_as_markup_or_emoji_is_printed_as_written(runner: CliRunner) -> None:
    """`[/red]` in one memory raised rich's `MarkupError` and took `memory list` and
    `memory search` down for the whole store; `:x:` printed as an emoji."""
    text = "a [/red] b :x: c"
    added = run(runner, "memory", "add", text, "--json")

    for args in (("memory", "list"), ("memory", "search", "red"), ("memory", "show", added["id"])):
        shown = run(runner, *args).stdout
        assert text in shown
        assert "❌" not in shown
