"""An import trusts nothing in its file: paths, roles, keys, namespaces and sizes are
checked as the proxy checks a request, and a bad file changes nothing stored."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.governance.ledger import OutputNotFound, offloaded_output, outputs_folder
from memlane.engine.sessions import importing
from memlane.store.sqlite import SQLiteStore

HEAD = {
    "type": "session",
    "format": "memlane-session",
    "version": 1,
    "id": "old-id",
    "key": "exported",
    "namespace": "repo-a",
}


def message(position: int, role: str = "user", text: str = "hello") -> dict[str, Any]:
    return {"type": "message", "position": position, "message": {"role": role, "text": text}}


def lines(*entries: dict[str, Any], head: dict[str, Any] | None = None) -> list[str]:
    return [json.dumps(entry) for entry in (head or HEAD, *entries)]


def test_an_offloaded_outputs_path_is_never_taken_from_the_file(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    planted = {
        "type": "event",
        "kind": "governance.tool_output",
        "payload": {"index": 0, "chars": 10, "path": "/etc/passwd"},
    }
    session = importing.import_lines(sqlite_store, lines(message(0), planted))
    (event,) = sqlite_store.list_events(session.id, kind="governance.tool_output")
    assert event.payload["path"] == "passwd"  # a name only: the reader adds the folder
    with pytest.raises(OutputNotFound, match="not in this session's folder"):
        offloaded_output(
            sqlite_store, session.id, event.id, folder=outputs_folder(settings, session)
        )


@pytest.mark.parametrize(
    "recorded", ["/etc/passwd", "../../../../etc/passwd.txt", "..", "", None, 7]
)
def test_the_reader_refuses_a_stored_path_outside_the_sessions_folder(
    sqlite_store: SQLiteStore, settings: Settings, recorded: object
) -> None:
    session = sqlite_store.ensure_session("held")
    folder = outputs_folder(settings, session)
    folder.mkdir(parents=True)
    (folder.parent.parent / "passwd.txt").write_text("secret of another folder")
    event = sqlite_store.add_event(session.id, "governance.tool_output", {"path": recorded})
    with pytest.raises(OutputNotFound):
        offloaded_output(sqlite_store, session.id, event.id, folder=folder)


def test_the_reader_finds_an_output_by_name_in_the_sessions_folder(
    sqlite_store: SQLiteStore, settings: Settings
) -> None:
    session = sqlite_store.ensure_session("moved")
    folder = outputs_folder(settings, session)
    folder.mkdir(parents=True)
    (folder / "abc.txt").write_text("the full output")
    # recorded under a home that has moved since: the name is what counts
    payload = {"path": "/old/home/sessions/moved/tool-outputs/abc.txt"}
    event = sqlite_store.add_event(session.id, "governance.tool_output", payload)
    assert offloaded_output(sqlite_store, session.id, event.id, folder=folder) == "the full output"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (message(1, role="hacker"), "line 3 is not an entry.*role"),
        (message(1, role="system") | {"message": {"role": "user", "kind": "x"}}, "kind"),
        ({"type": "message", "position": 1, "message": {"role": "user", "origin": "me"}}, "origin"),
        ({"type": "event", "kind": "a\nb"}, "line 3 is not an entry.*kind"),
        ({"type": "state", "name": "to\x1bdo", "value": "x"}, "name"),
        (message(0), "positions are not increasing"),
    ],
)
def test_a_bad_entry_anywhere_stores_nothing(
    sqlite_store: SQLiteStore, entry: dict[str, Any], problem: str
) -> None:
    with pytest.raises(importing.ImportProblem, match=problem):
        importing.import_lines(sqlite_store, lines(message(0), entry))
    assert sqlite_store.find_session("exported") is None
    assert sqlite_store.list_sessions() == []


@pytest.mark.parametrize("key", ["evil\x1b[31mkey", "two\nlines", "x" * 201, "   "])
def test_a_key_the_proxy_would_not_store_as_sent_is_refused(
    sqlite_store: SQLiteStore, key: str
) -> None:
    with pytest.raises(importing.ImportProblem, match="the session key"):
        importing.import_lines(sqlite_store, lines(message(0), head=HEAD | {"key": key}))
    with pytest.raises(importing.ImportProblem, match="the session key"):
        importing.import_lines(sqlite_store, lines(message(0)), key=key)
    assert sqlite_store.list_sessions() == []


def test_another_sessions_own_namespace_is_refused(sqlite_store: SQLiteStore) -> None:
    other = HEAD | {"namespace": "session:victim"}
    with pytest.raises(importing.ImportProblem, match="another session's own"):
        importing.import_lines(sqlite_store, lines(message(0), head=other))
    escaped = HEAD | {"namespace": "repo\x1b]0;x"}
    with pytest.raises(importing.ImportProblem, match="control characters"):
        importing.import_lines(sqlite_store, lines(message(0), head=escaped))
    assert sqlite_store.list_sessions() == []


def test_a_sessions_own_namespace_follows_it_to_its_new_key(sqlite_store: SQLiteStore) -> None:
    own = HEAD | {"namespace": "session:exported"}
    session = importing.import_lines(sqlite_store, lines(message(0), head=own), key="copy")
    assert session.namespace == "session:copy"


class Counting(io.BytesIO):
    """A stream that remembers how many bytes were read from it."""

    read_bytes = 0

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.read_bytes += len(line)
        return line


def test_a_line_over_the_limit_is_refused_without_reading_it_whole(
    sqlite_store: SQLiteStore,
) -> None:
    limit = 1024 * 1024
    huge = json.dumps(message(0, text="x" * (40 * limit)))
    stream = Counting(("\n".join([json.dumps(HEAD), huge]) + "\n").encode())
    with pytest.raises(importing.ImportProblem, match=r"line 2 is longer than 1,048,576 bytes"):
        importing.import_lines(sqlite_store, importing.stream_lines(stream, max_line=limit))
    assert stream.read_bytes <= 2 * limit  # the header and one line's limit, not 40 MB
    assert sqlite_store.list_sessions() == []


def test_a_file_over_the_limit_is_refused(sqlite_store: SQLiteStore) -> None:
    body = "\n".join(lines(*(message(i, text="y" * 500) for i in range(50)))).encode()
    stream = io.BytesIO(body)
    with pytest.raises(importing.ImportProblem, match="the file is larger than 10,000 bytes"):
        importing.import_lines(sqlite_store, importing.stream_lines(stream, max_file=10_000))
    assert sqlite_store.list_sessions() == []


def test_a_line_that_is_not_utf8_is_named(sqlite_store: SQLiteStore) -> None:
    stream = io.BytesIO(json.dumps(HEAD).encode() + b'\n{"type": "\xff"}\n')
    with pytest.raises(importing.ImportProblem, match="line 2 is not UTF-8"):
        importing.import_lines(sqlite_store, importing.stream_lines(stream))


def test_a_deeply_nested_line_is_a_clean_problem(sqlite_store: SQLiteStore) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(importing.ImportProblem, match="line 2"):
        importing.import_lines(sqlite_store, [json.dumps(HEAD), deep])


def test_a_good_file_still_imports_whole(sqlite_store: SQLiteStore, tmp_path: Path) -> None:
    entries = [message(0), message(1, role="assistant", text="hi"), message(2, role="tool")]
    session = importing.import_lines(sqlite_store, lines(*entries), key="fine")
    assert session.message_count == 3
    assert session.namespace == "repo-a"


def test_an_imported_title_summary_and_metadata_carry_no_credential(
    sqlite_store: SQLiteStore,
) -> None:
    key = "sk-proj-" + "Ab3xZ9" * 8
    head = HEAD | {
        "title": f"my key is {key}",
        "summary": f"The user pasted OPENAI_API_KEY={key} to test.",
        "metadata": {"name": "keys", "tags": [f"token {key}"]},
    }
    said = f"my key is {key}"
    session = importing.import_lines(sqlite_store, lines(message(0, text=said), head=head))
    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    held = json.dumps([stored.title, stored.summary, stored.metadata])
    assert key not in held
    assert "my key is" in (stored.title or "")
    assert sqlite_store.list_messages(session.id)[0].message.text == said  # the transcript


def test_an_imported_name_another_session_has_gets_a_free_one(sqlite_store: SQLiteStore) -> None:
    """`@@name` must keep finding one session: a copy whose name is taken in its namespace
    is named `<name>-2`, `-3`…, and keeps the exported name to say so; in another
    namespace, or once the name is free, it keeps the exported one."""
    head = HEAD | {"metadata": {"name": "queue-design", "imported_name": "stale"}}
    first = importing.import_lines(sqlite_store, lines(message(0), head=head), key="one")
    assert first.metadata["name"] == "queue-design"
    assert importing.IMPORTED_NAME not in first.metadata  # an earlier import's is dropped
    second = importing.import_lines(sqlite_store, lines(message(0), head=head), key="two")
    third = importing.import_lines(sqlite_store, lines(message(0), head=head), key="three")
    assert [s.metadata["name"] for s in (second, third)] == ["queue-design-2", "queue-design-3"]
    assert second.metadata[importing.IMPORTED_NAME] == "queue-design"
    elsewhere = HEAD | {"namespace": "repo-b", "metadata": {"name": "queue-design"}}
    apart = importing.import_lines(sqlite_store, lines(message(0), head=elsewhere), key="four")
    assert apart.metadata["name"] == "queue-design"
