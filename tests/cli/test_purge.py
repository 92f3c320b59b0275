"""`--purge`: a deleted session or memory leaves no copy anywhere under the home.

The session is made through the real proxy (memory on, a fact extracted by the
scripted upstream, a pinned text, git commits), its objects packed, and the proxy
keeps the database open (so its WAL stays) while `memlane sessions delete --purge`
runs. Then every file under `$MEMLANE_HOME` is searched as bytes, and every git
object, loose or packed, reachable or not, is searched decompressed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from tests.proxy.conftest import sdk
from tests.support.gitrepo import every_object, failing_purge_git
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
)

SECRET = "zebra-quartz-7731"
KEPT = "otter-basalt-2244"


def remember_secrets(request: RecordedRequest) -> Reply | None:
    system = request.messages[0].get("content") if request.messages else None
    user = str(request.messages[-1].get("content", "")) if request.messages else ""
    if system == FACT_PROMPT:
        word = SECRET if SECRET in user else KEPT if KEPT in user else None
        return Reply(text=json.dumps([f"The locker code is {word}"] if word else []))
    if system == RECONCILE_PROMPT:
        return Reply(text="[]")
    if system == SUMMARY_PROMPT:
        return Reply(text="The user keeps a locker code.")
    return None


def found_under(home: Path, needle: str) -> list[str]:
    """Where `needle` is: any file under `home` as bytes, and every git object decompressed."""
    hits = [
        str(path.relative_to(home))
        for path in home.rglob("*")
        if path.is_file() and needle.encode() in path.read_bytes()
    ]
    repo = home / "memory"
    if (repo / ".git").exists() and needle.encode() in every_object(repo):
        hits.append("git objects")
    return hits


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def home_proxy(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> RunningProxy:
    proxy = proxy_factory(index_enabled=False, embedding_backend="hashing")
    monkeypatch.setenv("MEMLANE_HOME", str(proxy.settings.home_path))
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    upstream.respond_with(remember_secrets)
    return proxy


def talk(proxy: RunningProxy, session: str, text: str) -> None:
    client = sdk(proxy, session, **{"X-Memlane-Repo": "lockers"})
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


def test_a_purged_session_is_found_nowhere_under_the_home(
    home_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    proxy, home = home_proxy, home_proxy.settings.home_path
    upstream.script(Reply(text="Noted."), Reply(text="Noted too."))
    talk(proxy, "doomed", f"remember that my locker code is {SECRET}")
    talk(proxy, "kept", f"and the other locker code is {KEPT}")
    proxy.drain()
    pinned = httpx.put(
        f"{proxy.url}/memlane/sessions/doomed/pinned",
        json={"text": f"never share {SECRET}"},
        headers=proxy.admin,
    )
    assert pinned.status_code == 200
    proxy.call(proxy.runtime.memory_book.flush)  # the facts and turns are in git history
    repo = home / "memory"
    git(repo, "gc", "--quiet")  # ...and packed
    assert list((repo / ".git" / "objects" / "pack").glob("*.pack"))
    assert "git objects" in found_under(home, SECRET)  # what a plain delete leaves behind
    assert (home / "memlane.db-wal").exists()  # the proxy holds the database open

    doomed = proxy.store.find_session("doomed")
    result = CliRunner().invoke(
        app, ["sessions", "delete", doomed.id, "--yes", "--purge", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"deleted": doomed.id, "purged": True}

    assert found_under(home, SECRET) == []
    # everything else is kept: the other session, its memory, a clean working tree
    assert found_under(home, KEPT)
    assert KEPT in git(repo, "log", "-p", "--all")
    assert git(repo, "status", "--porcelain") == ""
    assert proxy.store.find_session("kept") is not None
    # the proxy goes on working on the purged database
    upstream.script(Reply(text="still here"))
    talk(proxy, "after", "hello again")
    assert proxy.store.find_session("after") is not None


def test_a_purged_memory_leaves_the_history(
    home_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    home = home_proxy.settings.home_path  # a proxy holds the database open meanwhile
    added = CliRunner().invoke(app, ["memory", "add", f"the gate code is {SECRET}", "--json"])
    assert added.exit_code == 0, added.output
    memory_id = json.loads(added.stdout)["id"]
    CliRunner().invoke(app, ["memory", "add", f"the shed code is {KEPT}"])
    forgot = CliRunner().invoke(app, ["memory", "forget", memory_id])  # soft: history keeps it
    assert forgot.exit_code == 0, forgot.output
    assert "git objects" in found_under(home, SECRET)

    purged = CliRunner().invoke(app, ["memory", "forget", memory_id, "--purge", "--json"])
    assert purged.exit_code == 0, purged.output
    assert json.loads(purged.stdout)["purged"] is True
    assert found_under(home, SECRET) == []
    repo = home / "memory"
    assert KEPT in git(repo, "log", "-p", "--all")
    assert "memory: purged" in git(repo, "log", "--format=%s")
    shown = CliRunner().invoke(app, ["memory", "show", memory_id])
    assert shown.exit_code != 0  # the entry itself is gone, not a tombstone


def test_purging_a_memory_purges_the_versions_it_replaced(
    home_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    """An earlier version says the same thing at another time: deleted means all of it."""
    home = home_proxy.settings.home_path
    added = CliRunner().invoke(app, ["memory", "add", f"the gate code is {SECRET}", "--json"])
    assert added.exit_code == 0, added.output
    old_id = json.loads(added.stdout)["id"]
    newer = f"the gate code is {SECRET}-2"
    replaced = CliRunner().invoke(app, ["memory", "supersede", old_id, newer, "--json"])
    assert replaced.exit_code == 0, replaced.output
    new_id = json.loads(replaced.stdout)["new"]["id"]
    CliRunner().invoke(app, ["memory", "add", f"the shed code is {KEPT}"])
    assert found_under(home, SECRET)

    purged = CliRunner().invoke(app, ["memory", "forget", new_id, "--purge", "--json"])
    assert purged.exit_code == 0, purged.output
    assert found_under(home, SECRET) == []
    assert KEPT in git(home / "memory", "log", "-p", "--all")
    for gone in (old_id, new_id):
        assert CliRunner().invoke(app, ["memory", "show", gone]).exit_code != 0


def test_purging_an_old_version_says_the_current_one_goes_too(home_proxy: RunningProxy) -> None:
    """The versions a purge takes are the whole chain: the user is told so."""
    added = CliRunner().invoke(app, ["memory", "add", f"the gate code is {SECRET}", "--json"])
    old_id = json.loads(added.stdout)["id"]
    newer = CliRunner().invoke(app, ["memory", "supersede", old_id, "the gate code is 4451"])
    assert newer.exit_code == 0, newer.output
    purged = CliRunner().invoke(app, ["memory", "forget", old_id, "--purge"])
    assert purged.exit_code == 0, purged.output
    assert f"purged {old_id} and every version of it" in " ".join(purged.stdout.split())
    listed = CliRunner().invoke(app, ["memory", "list", "--json"])
    assert "4451" not in listed.stdout


def _doomed_with_history(proxy: RunningProxy, upstream: ScriptedUpstream) -> str:
    """A session whose secret is in a fact, a turn file, the pinned text, packed git
    objects and the WAL, beside another session that must keep its own."""
    upstream.script(Reply(text="Noted."), Reply(text="Noted too."))
    talk(proxy, "doomed", f"remember that my locker code is {SECRET}")
    talk(proxy, "kept", f"and the other locker code is {KEPT}")
    proxy.drain()
    httpx.put(
        f"{proxy.url}/memlane/sessions/doomed/pinned",
        json={"text": f"never share {SECRET}"},
        headers=proxy.admin,
    ).raise_for_status()
    proxy.call(proxy.runtime.memory_book.flush)
    home = proxy.settings.home_path
    git(home / "memory", "gc", "--quiet")
    assert "git objects" in found_under(home, SECRET)
    return str(proxy.store.find_session("doomed").id)


def test_the_admin_apis_delete_leaves_no_copy(
    home_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    proxy, home = home_proxy, home_proxy.settings.home_path
    doomed = _doomed_with_history(proxy, upstream)
    deleted = httpx.delete(
        f"{proxy.url}/memlane/sessions/{doomed}", headers=proxy.admin, timeout=60
    )
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["purged"] is True
    assert found_under(home, SECRET) == []
    assert found_under(home, KEPT)
    assert KEPT in git(home / "memory", "log", "-p", "--all")


def test_the_inspectors_delete_leaves_no_copy(
    home_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    proxy, home = home_proxy, home_proxy.settings.home_path
    doomed = _doomed_with_history(proxy, upstream)
    deleted = httpx.post(
        f"{proxy.base}/ui/sessions/{doomed}/delete",
        data={"go": "1"},
        headers=proxy.admin,
        timeout=60,
    )
    assert deleted.status_code == 303, deleted.text
    assert found_under(home, SECRET) == []
    assert found_under(home, KEPT)


def added(text: str) -> str:
    done = CliRunner().invoke(app, ["memory", "add", text, "--json"])
    assert done.exit_code == 0, done.output
    return str(json.loads(done.stdout)["id"])


def left_in_git(home: Path, needle: str) -> list[str]:
    """Where `needle` is in the memory's git: patches, commit messages, any object."""
    repo = home / "memory"
    places = {
        "a patch": git(repo, "log", "--all", "-p", "--format="),
        "a message": git(repo, "log", "--all", "--format=%B"),
    }
    found = [where for where, text in places.items() if needle in text]
    return [*found, "git objects"] if "git objects" in found_under(home, needle) else found


def test_an_edited_memory_leaves_neither_its_old_nor_its_new_text(
    home_proxy: RunningProxy,
) -> None:
    """`memory edit` keeps the id and rewrites the text: the earlier text was quoted by
    the "added" and "edited" commits, and only the history still knows it."""
    home, old, new = home_proxy.settings.home_path, f"alarm {SECRET}", f"alarm {SECRET}-NEW"
    memory_id = added(f"The user's alarm code is {old}")
    edited = CliRunner().invoke(
        app, ["memory", "edit", memory_id, "--text", f"The user's alarm code is {new}"]
    )
    assert edited.exit_code == 0, edited.output
    added(f"the shed code is {KEPT}")
    assert left_in_git(home, old) == ["a patch", "a message", "git objects"]

    purged = CliRunner().invoke(app, ["memory", "forget", memory_id, "--purge"])
    assert purged.exit_code == 0, purged.output
    assert left_in_git(home, old) == []
    assert left_in_git(home, new) == []
    assert found_under(home, SECRET) == []
    assert KEPT in git(home / "memory", "log", "-p", "--all")


def test_a_hand_edited_memory_leaves_its_earlier_text_too(home_proxy: RunningProxy) -> None:
    home = home_proxy.settings.home_path
    memory_id = added(f"the gate code is {SECRET}")
    (path,) = (home / "memory").rglob(f"*__{memory_id}.md")
    path.write_text(path.read_text().replace(SECRET, "otter-walnut-5150"))
    added(f"the shed code is {KEPT}")  # its commit takes the hand edit in too
    shown = CliRunner().invoke(app, ["memory", "show", memory_id])
    assert "otter-walnut-5150" in shown.output  # the store holds only the text as edited
    assert "git objects" in found_under(home, SECRET)

    purged = CliRunner().invoke(app, ["memory", "forget", memory_id, "--purge"])
    assert purged.exit_code == 0, purged.output
    assert found_under(home, SECRET) == []
    assert found_under(home, "otter-walnut-5150") == []
    assert KEPT in git(home / "memory", "log", "-p", "--all")


def test_a_memory_purge_that_fails_in_git_removes_nothing_and_runs_again(
    home_proxy: RunningProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_proxy.settings.home_path
    memory_id = added(f"the gate code is {SECRET}")
    with monkeypatch.context() as patched:
        failing_purge_git(tmp_path / "bin", patched)
        failed = CliRunner().invoke(app, ["memory", "forget", memory_id, "--purge"])
    assert failed.exit_code == 1
    assert "nothing is removed" in failed.output
    assert "the same command can run again" in failed.output
    shown = CliRunner().invoke(app, ["memory", "show", memory_id])
    assert shown.exit_code == 0, shown.output  # still there: the advice can be followed
    assert list((home / "memory").rglob(f"*__{memory_id}.md"))

    again = CliRunner().invoke(app, ["memory", "forget", memory_id, "--purge"])
    assert again.exit_code == 0, again.output
    assert found_under(home, SECRET) == []
    assert CliRunner().invoke(app, ["memory", "show", memory_id]).exit_code != 0


def test_a_purge_with_git_turned_off_still_rewrites_the_history_it_left(
    home_proxy: RunningProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memory_git` off keeps nothing new in the repository; what it holds from before
    is still a copy, and a purge takes it out too."""
    home = home_proxy.settings.home_path
    memory_id = added(f"the gate code is {SECRET}")
    assert "git objects" in found_under(home, SECRET)  # committed with git on
    monkeypatch.setenv("MEMLANE_MEMORY_GIT", "false")
    purged = CliRunner().invoke(app, ["memory", "forget", memory_id, "--purge"])
    assert purged.exit_code == 0, purged.output
    assert found_under(home, SECRET) == []


def test_a_session_purge_that_fails_in_git_deletes_nothing_and_runs_again(
    home_proxy: RunningProxy,
    upstream: ScriptedUpstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy, home = home_proxy, home_proxy.settings.home_path
    doomed = _doomed_with_history(proxy, upstream)
    command = ["sessions", "delete", doomed, "--yes", "--purge"]
    with monkeypatch.context() as patched:
        failing_purge_git(tmp_path / "bin", patched)
        failed = CliRunner().invoke(app, command)
    assert failed.exit_code == 1
    assert "nothing is deleted" in failed.output
    assert "the same delete can run again" in failed.output
    assert proxy.store.find_session("doomed") is not None
    assert proxy.store.list_facts(conversation_id=doomed)
    assert "git objects" in found_under(home, SECRET)

    again = CliRunner().invoke(app, command)  # the same command, once git works
    assert again.exit_code == 0, again.output
    assert found_under(home, SECRET) == []
    assert proxy.store.find_session("doomed") is None
    assert found_under(home, KEPT)


def test_the_admin_apis_failed_purge_can_be_sent_again(
    home_proxy: RunningProxy,
    upstream: ScriptedUpstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy, home = home_proxy, home_proxy.settings.home_path
    doomed = _doomed_with_history(proxy, upstream)
    url = f"{proxy.url}/memlane/sessions/{doomed}"
    with monkeypatch.context() as patched:
        failing_purge_git(tmp_path / "bin", patched)
        failed = httpx.delete(url, headers=proxy.admin, timeout=60)
    assert failed.status_code == 500
    assert "nothing is deleted" in failed.text
    assert "memlane sessions delete" not in failed.text  # no advice that cannot work
    assert proxy.store.find_session("doomed") is not None

    again = httpx.delete(url, headers=proxy.admin, timeout=60)
    assert again.status_code == 200, again.text
    assert found_under(home, SECRET) == []
