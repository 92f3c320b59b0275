"""Sessions through the proxy: @@ references, direct answers, ephemeral turns, indexing, admin."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from memlane.store import NewMessage
from memlane.types import Message, Session
from tests.proxy.conftest import QUIET, sdk, stored
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
)

INDEX_ANSWER = json.dumps(
    {
        "name": "queue-design",
        "description": "Designing the job queue.",
        "summary": "The queue uses Postgres with SKIP LOCKED.",
        "tags": ["queue", "postgres"],
    }
)


def own_calls(request: RecordedRequest) -> Reply | None:
    """Answer memlane's background calls; the client's requests fall through to the echo."""
    first = request.messages[0].get("content", "") if request.messages else ""
    if isinstance(first, str) and first.startswith("You index conversations"):
        return Reply(text=INDEX_ANSWER)
    if isinstance(first, str) and first.startswith("You answer questions about a past"):
        return Reply(text="They chose SKIP LOCKED.")
    return None


REPO = "shop"
"""The namespace of the seeded sessions and of the clients that reference them."""


def seed(proxy: RunningProxy, key: str, name: str, summary: str) -> Session:
    store = proxy.store
    session = store.ensure_session(key, namespace=REPO)
    store.append_messages(
        session.id,
        [
            NewMessage(Message(role="user", text=f"let us work on {name}"), 5),
            NewMessage(Message(role="assistant", text="sure"), 1),
        ],
    )
    return store.update_session(session.id, metadata={"name": name, "summary": summary})


def contents(request: RecordedRequest) -> list[str]:
    return [str(m.get("content")) for m in request.messages]


def test_reference_is_forwarded_before_the_prompt_and_replayed_in_place(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    seed(mproxy, "old", "queue-design", "The queue uses SKIP LOCKED.")
    client = sdk(mproxy, "new", **{"X-Memlane-Repo": REPO})
    history: list[dict[str, Any]] = [{"role": "user", "content": "same as @@queue-design?"}]
    first = client.chat.completions.create(model="m", messages=history)
    sent = contents(upstream.last)
    assert "The queue uses SKIP LOCKED." in sent[0]
    assert sent[1] == "same as @@queue-design?"

    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "and retries?"},
    ]
    client.chat.completions.create(model="m", messages=history)
    again = contents(upstream.last)
    assert again[:2] == sent  # the prefix is the same bytes: provider caches keep hitting
    assert again[-1] == "and retries?"
    origins = [row[2] for row in stored(mproxy, "new")]
    assert origins.count("reference") == 1


@pytest.mark.parametrize("stream", [False, True])
def test_ambiguous_reference_is_answered_not_a_500(
    mproxy: RunningProxy, upstream: ScriptedUpstream, stream: bool
) -> None:
    one = seed(mproxy, "a", "billing-export", "A")
    two = seed(mproxy, "b", "billing-import", "B")
    client = sdk(mproxy, f"asker-{stream}", **{"X-Memlane-Repo": REPO})
    messages = [{"role": "user", "content": "like @@billing please"}]
    if stream:
        chunks = client.chat.completions.create(model="m", messages=messages, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        answer = client.chat.completions.create(model="m", messages=messages)
        text = answer.choices[0].message.content or ""
    assert text.startswith("memlane could not resolve @@billing")
    assert one.id in text
    assert two.id in text
    assert upstream.model_requests == []
    assert [(r[0], r[3]) for r in stored(mproxy, f"asker-{stream}")] == [
        ("user", "like @@billing please"),
        ("assistant", text),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_missing_reference_on_the_responses_api(
    mproxy: RunningProxy, upstream: ScriptedUpstream, stream: bool
) -> None:
    client = sdk(mproxy, f"resp-{stream}")
    if stream:
        events = list(client.responses.create(model="m", input="see @@nothing-here", stream=True))
        assert events[-1].type == "response.completed"
        text = events[-1].response.output_text
    else:
        text = client.responses.create(model="m", input="see @@nothing-here").output_text
    assert "no session matches 'nothing-here'" in text
    assert upstream.model_requests == []


def test_ephemeral_sessions_are_forwarded_but_not_stored(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory()
    client = sdk(proxy, "eph", **{"X-Memlane-Ephemeral": "true"})
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "do not keep this"}]
    )
    assert answer.choices[0].message.content == "echo: do not keep this"
    proxy.drain()
    assert proxy.store.find_session("eph") is None
    assert proxy.store.list_sessions() == []
    assert len(upstream.model_requests) == 1  # no background indexing or extraction


def test_sessions_are_indexed_in_the_background_after_five_prompts(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(memory_enabled=False)
    upstream.respond_with(own_calls)
    client = sdk(proxy, "work")
    history: list[dict[str, Any]] = []
    for number in range(5):
        history.append({"role": "user", "content": f"queue question {number}"})
        reply = client.chat.completions.create(model="m", messages=history)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
        proxy.drain()
        session = proxy.store.find_session("work")
        assert ("name" in session.metadata) == (number == 4)
    assert session.metadata["name"] == "queue-design"
    index_calls = [r for r in upstream.model_requests if r.json.get("response_format")]
    assert len(index_calls) == 1
    assert index_calls[0].json["model"] == "m"
    meta = proxy.settings.sessions_path
    assert any(p.name == "meta.json" for p in meta.rglob("meta.json"))


def test_admin_meta_fork_ask_index_export(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, llm_model="cheap")
    upstream.respond_with(own_calls)
    source = seed(proxy, "src", "queue-design", "SKIP LOCKED")
    base = f"{proxy.base}/v1/memlane/sessions"

    meta = httpx.get(f"{base}/queue-design/meta", headers=proxy.admin).json()
    assert (meta["id"], meta["title"], meta["name"], meta["metadata"]["summary"]) == (
        source.id,
        "queue-design",
        "queue-design",
        "SKIP LOCKED",
    )
    listed = httpx.get(base, headers=proxy.admin).json()["data"]
    assert listed == [meta]  # one JSON for a session, whichever route shows it

    forked = httpx.post(
        f"{base}/{source.id}/fork", json={"key": "copy"}, headers=proxy.admin
    ).json()
    assert forked["parent_id"] == source.id
    assert forked["message_count"] == 2
    clash = httpx.post(f"{base}/{source.id}/fork", json={"key": "copy"}, headers=proxy.admin)
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "session_exists"

    asked = httpx.post(
        f"{base}/queue-design/ask", json={"question": "which lock?"}, headers=proxy.admin
    ).json()
    assert asked["answer"] == "They chose SKIP LOCKED."
    assert upstream.last.json["model"] == "cheap"

    indexed = httpx.post(f"{base}/copy/index", json={}, headers=proxy.admin)
    assert indexed.status_code == 200, indexed.text
    # the model named the copy as its source is named: it gets the next free name, and
    # each name still designates one session
    assert indexed.json()["name"] == "queue-design-2"
    for name, session_id in (("queue-design", source.id), ("queue-design-2", forked["id"])):
        found = httpx.get(f"{base}/{name}/meta", headers=proxy.admin)
        assert found.status_code == 200, found.text
        assert found.json()["id"] == session_id

    exported = httpx.get(f"{base}/{source.id}/export", headers=proxy.admin)
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert lines[0]["type"] == "session"
    assert [line["type"] for line in lines[1:]] == ["message", "message", "event"]  # the ask

    missing = httpx.post(f"{base}/nope/ask", json={"question": "x"}, headers=proxy.admin)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"
    empty = httpx.post(f"{base}/{source.id}/ask", json={"question": ""}, headers=proxy.admin)
    assert empty.status_code == 422


def test_admin_delete_removes_the_session_folder(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    from memlane.files.paths import session_dir

    session = seed(mproxy, "gone", "old", "x")
    folder = session_dir(mproxy.settings.sessions_path, "gone")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text("{}", encoding="utf-8")
    response = httpx.delete(f"{mproxy.base}/v1/memlane/sessions/{session.id}", headers=mproxy.admin)
    assert response.json()["deleted"] is True
    assert not folder.exists()


def test_every_admin_route_finds_sessions_by_the_one_lookup_rule(mproxy: RunningProxy) -> None:
    base = f"{mproxy.base}/v1/memlane/sessions"
    first = seed(mproxy, "k-one", "billing-report", "x")
    second = seed(mproxy, "k-two", "billing-export", "y")
    prefix = first.id[:8] if first.id[:8] != second.id[:8] else first.id
    for ref in (first.id, "k-one", prefix, "Billing-Report", "billing-repor"):
        shown = httpx.get(f"{base}/{ref}", headers=mproxy.admin)
        assert shown.status_code == 200, ref
        assert shown.json()["id"] == first.id
    for ref in (first.id, "k-one", prefix, "Billing-Report"):
        todo = httpx.put(f"{base}/{ref}/todo", json={"text": ref}, headers=mproxy.admin)
        assert todo.json()["todo"] == ref
    # a write takes no fuzzy match, however close
    fuzzy = httpx.put(f"{base}/billing-repor/todo", json={"text": "x"}, headers=mproxy.admin)
    assert fuzzy.status_code == 404
    # "billing" is as close to both names: a read does not guess, a delete does not look
    ambiguous = httpx.get(f"{base}/billing", headers=mproxy.admin)
    assert ambiguous.status_code == 409
    assert "billing-report" in ambiguous.json()["error"]["message"]
    assert httpx.delete(f"{base}/billing", headers=mproxy.admin).status_code == 404
    assert {s.id for s in mproxy.store.list_sessions()} == {first.id, second.id}
    outputs = httpx.get(f"{base}/k-two/tool-outputs", headers=mproxy.admin)
    assert outputs.json() == {"object": "list", "data": []}
    deleted = httpx.delete(f"{base}/billing-export", headers=mproxy.admin).json()
    assert deleted == {
        "id": second.id,
        "object": "memlane.session.deleted",
        "deleted": True,
        "purged": True,
    }


def test_the_admin_api_reads_a_tool_output_from_the_sessions_folder_only(
    mproxy: RunningProxy,
) -> None:
    session = seed(mproxy, "k-out", "out", "x")
    planted = mproxy.store.add_event(
        session.id, "governance.tool_output", {"index": 0, "path": "/etc/passwd"}
    )
    url = f"{mproxy.base}/v1/memlane/sessions/{session.id}/tool-outputs/{planted.id}"
    refused = httpx.get(url, headers=mproxy.admin)
    assert refused.status_code == 404
    assert "root:" not in refused.text
    assert "not in this session's folder" in refused.json()["error"]["message"]


def test_a_fork_without_a_key_gets_a_readable_unique_one(mproxy: RunningProxy) -> None:
    base = f"{mproxy.base}/v1/memlane/sessions"
    source = seed(mproxy, "plan", "the-plan", "x")
    keys = [
        httpx.post(f"{base}/{source.id}/fork", json={}, headers=mproxy.admin).json()["key"]
        for _ in range(2)
    ]
    assert keys[0] != keys[1]
    for key in keys:
        assert re.fullmatch(r"plan~fork-\d{8}-\d{6}-[0-9a-f]{6}", key), key


def test_a_fork_point_past_the_sessions_messages_is_a_400(mproxy: RunningProxy) -> None:
    base = f"{mproxy.base}/v1/memlane/sessions"
    source = seed(mproxy, "short", "short-one", "x")  # two messages: positions 0 and 1
    refused = httpx.post(
        f"{base}/{source.id}/fork", json={"at": 999, "key": "far"}, headers=mproxy.admin
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "invalid_fork_point",
        "at",
        "invalid_request_error",
    )
    expected = f"session {source.id} has messages at positions 0..1; at must be 0..2"
    assert expected in error["message"]
    assert mproxy.store.find_session("far") is None
    whole = httpx.post(f"{base}/{source.id}/fork", json={"at": 2}, headers=mproxy.admin)
    assert whole.status_code == 200
    assert whole.json()["message_count"] == 2


def test_the_cli_and_the_admin_api_show_a_session_the_same_way(
    mproxy: RunningProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from memlane.cli.app import app

    session = seed(mproxy, "same", "one-shape", "z")
    monkeypatch.setenv("MEMLANE_HOME", str(mproxy.settings.home_path))
    result = CliRunner().invoke(app, ["sessions", "show", "one-shape", "--json"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert [m["text"] for m in shown.pop("messages")] == ["let us work on one-shape", "sure"]
    del shown["events"], shown["meta_file"]
    api = httpx.get(f"{mproxy.base}/v1/memlane/sessions/{session.id}", headers=mproxy.admin)
    assert shown == api.json()
