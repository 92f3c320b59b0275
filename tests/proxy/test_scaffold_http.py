"""The state block through the proxy: append-only across turns, toggles, Spec Mode, ephemeral."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import httpx

from memlane.engine.scaffold import SPEC_PROMPT
from memlane.files.paths import session_dir
from tests.proxy.conftest import QUIET, sdk, stored
from tests.support.upstream import Fail, RunningProxy, ScriptedUpstream

CODEX = {"user-agent": "codex_cli_rs/0.169.0"}


def chat(proxy: RunningProxy, key: str, messages: list[dict[str, Any]], **headers: str) -> str:
    response = httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": "m", "messages": messages},
        headers={"x-memlane-session": key, **CODEX, **headers},
    )
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def blocks(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "system"]


def test_prefix_stays_byte_identical_while_the_todo_changes(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    todos = ["step 1", "step 1", "step 1\\nstep 2", None, "done", "done", ""]
    history: list[dict[str, Any]] = []
    for turn, todo in enumerate(todos):
        history.append({"role": "user", "content": f"turn {turn}"})
        headers = {} if todo is None else {"x-memlane-todo": todo}
        history.append({"role": "assistant", "content": chat(mproxy, "prefix", history, **headers)})
    sent = [r.json["messages"] for r in upstream.model_requests]
    raw = [r.body for r in upstream.model_requests]
    for earlier, later in itertools.pairwise(sent):
        assert later[: len(earlier)] == earlier  # every request extends the one before
    for earlier, later in itertools.pairwise(raw):
        cut = earlier.rindex(b"]")  # the bytes of the message list, up to its end
        assert later.startswith(earlier[:cut])
    # a new block only when the state changed; the todo cleared ("") sends an empty block once
    assert [b.split("<todo>\n")[-1].split("\n</todo>")[0] for b in blocks(sent[-1])] == [
        "step 1",
        "step 1\nstep 2",
        "done",
        "<memlane_state>\n</memlane_state>",
    ]
    assert [len(blocks(s)) for s in sent] == [1, 1, 2, 2, 3, 3, 4]
    rows = stored(mproxy, "prefix")
    assert [r[2] for r in rows].count("state") == 4
    assert [r[3] for r in rows if r[2] == "client"] == [m["content"] for m in history]


def test_a_failed_turn_leaves_no_block_behind(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(Fail(500))
    first = [{"role": "user", "content": "hello"}]
    response = httpx.post(
        f"{mproxy.url}/chat/completions",
        json={"messages": first},
        headers={"x-memlane-session": "f", "x-memlane-todo": "a", **CODEX},
    )
    assert response.status_code == 500
    chat(mproxy, "f", first, **{"x-memlane-todo": "a"})
    retried = upstream.model_requests[-1].json["messages"]
    assert len(blocks(retried)) == 1
    assert retried[0] == first[0]


def test_files_edited_by_a_person_are_read_each_turn(
    proxy_factory: Any, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    harness = tmp_path / "repo"
    harness.mkdir()
    (harness / "AGENTS.md").write_text("Run `make test` before committing.")
    proxy = proxy_factory(harness_root=harness, **QUIET)
    history = [{"role": "user", "content": "start"}]
    chat(proxy, "files", history)
    folder = session_dir(proxy.settings.sessions_path, "files")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pinned.md").write_text("Never touch prod.\\nUse UTC.")
    (folder / "summary.md").write_text("We are fixing the login bug.")
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    chat(proxy, "files", history)
    block = blocks(upstream.last.json["messages"])[-1]
    assert block == (
        "<memlane_state>\n"
        "<pinned>\nNever touch prod.\nUse UTC.\n\nRun `make test` before committing.\n</pinned>\n"
        "<anchor>\nWe are fixing the login bug.\n</anchor>\n"
        "</memlane_state>"
    )


def test_parts_can_be_switched_off(proxy_factory: Any, upstream: ScriptedUpstream) -> None:
    proxy = proxy_factory(todo_enabled=False, **QUIET)
    chat(proxy, "off", [{"role": "user", "content": "x"}], **{"x-memlane-todo": "secret plan"})
    assert blocks(upstream.last.json["messages"]) == []
    assert not session_dir(proxy.settings.sessions_path, "off").joinpath("todo.md").exists()


def test_non_agentic_clients_get_no_scaffold_unless_configured(
    proxy_factory: Any, upstream: ScriptedUpstream
) -> None:
    body = {"messages": [{"role": "user", "content": "x"}]}
    headers = {"x-memlane-session": "webui", "x-memlane-todo": "t", "user-agent": "open-webui"}
    agentic_only = proxy_factory(**QUIET)
    httpx.post(f"{agentic_only.url}/chat/completions", json=body, headers=headers)
    assert upstream.last.json == body
    everyone = proxy_factory(scaffold_clients="all", **QUIET)
    httpx.post(f"{everyone.url}/chat/completions", json=body, headers=headers)
    assert len(blocks(upstream.last.json["messages"])) == 1


def test_spec_mode_until_approved(mproxy: RunningProxy, upstream: ScriptedUpstream) -> None:
    history = [{"role": "user", "content": "add a cache"}]
    chat(mproxy, "spec", history, **{"x-memlane-spec-mode": "true"})
    assert SPEC_PROMPT in blocks(upstream.last.json["messages"])[-1]
    session = mproxy.store.find_session("spec")
    approved = httpx.post(
        f"{mproxy.url}/memlane/sessions/{session.id}/approve-spec", headers=mproxy.admin
    )
    assert approved.json()["spec_approved"] is True
    history += [{"role": "assistant", "content": "spec: ..."}, {"role": "user", "content": "go"}]
    chat(mproxy, "spec", history, **{"x-memlane-spec-mode": "true"})
    last = blocks(upstream.last.json["messages"])
    assert len(last) == 2
    assert SPEC_PROMPT not in last[-1]


def test_spec_mode_from_settings(proxy_factory: Any, upstream: ScriptedUpstream) -> None:
    proxy = proxy_factory(spec_mode=True, **QUIET)
    chat(proxy, "spec-env", [{"role": "user", "content": "x"}])
    assert SPEC_PROMPT in blocks(upstream.last.json["messages"])[-1]


def test_ephemeral_requests_are_governed_and_forwarded_but_not_stored(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    client = sdk(mproxy, "eph", **{"X-Memlane-Ephemeral": "true", "X-Memlane-Todo": "temp"})
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert "temp" in blocks(upstream.last.json["messages"])[-1]
    assert mproxy.store.list_sessions() == []
    assert not mproxy.settings.sessions_path.exists() or not any(
        mproxy.settings.sessions_path.iterdir()
    )


def test_with_every_default_on_forwarded_requests_only_append(
    proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    """All stages together (references, scaffold, governance, recall) keep earlier bytes."""
    history: list[dict[str, Any]] = []
    for turn in range(6):
        history.append({"role": "user", "content": f"my dog Rex and I live in Lisbon ({turn})"})
        todo = {"x-memlane-todo": f"step {turn // 2}"}
        history.append({"role": "assistant", "content": chat(proxy, "all-on", history, **todo)})
        proxy.drain()  # background work (facts, index) done before the next turn
    forwarded = [
        r for r in upstream.model_requests if r.headers["user-agent"] == CODEX["user-agent"]
    ]
    sent = [r.json["messages"] for r in forwarded]
    assert len(sent) == 6
    for earlier, later in itertools.pairwise(sent):
        assert later[: len(earlier)] == earlier
