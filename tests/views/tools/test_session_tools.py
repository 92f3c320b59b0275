"""The session tools on a real store: search by index metadata, pages, questions, the todo."""

from __future__ import annotations

from memlane.engine import scaffold
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.query import QUERY_EVENT
from memlane.store.sqlite import SQLiteStore
from memlane.views.tools import Binding
from tests.support.text import ScriptedLLM
from tests.views.tools.conftest import call, chat

SHOP = Binding(namespace="shop")


async def test_sessions_search_ranks_by_name_tags_and_description_in_the_namespace(
    rt: Runtime, sqlite_store: SQLiteStore
) -> None:
    chat(
        sqlite_store,
        "k1",
        ["fix the login page"],
        namespace="shop",
        name="login-refactor",
        description="Moving the login form to the new auth library",
        tags=["auth", "login"],
    )
    chat(sqlite_store, "k2", ["totally unrelated"], namespace="shop", name="invoice-pdf")
    chat(sqlite_store, "k3", ["x"], namespace="other", name="login-secret-plans", tags=["login"])
    result = await call(rt, SHOP, "sessions_search", query="login auth")
    assert "login-refactor" in result.text
    assert "invoice-pdf" not in result.text
    assert "login-secret-plans" not in result.text
    refused = await call(rt, SHOP, "sessions_search", query="login", namespace="other")
    assert refused.error
    assert "--all-namespaces" in refused.text
    operator = Binding(namespace="shop", all_namespaces=True)
    everywhere = await call(rt, operator, "sessions_search", query="login", namespace="*")
    assert "login-secret-plans" in everywhere.text


async def test_session_get_pages_through_the_timeline(
    rt: Runtime, sqlite_store: SQLiteStore
) -> None:
    texts = [f"message number {i}" for i in range(50)]
    session = chat(sqlite_store, "long", texts, namespace="shop", name="long-one")
    last = await call(rt, SHOP, "session_get", ref="long-one", limit=10)
    assert "message number 49" in last.text
    assert "message number 39" not in last.text
    assert "Earlier: session_get with around=" in last.text
    middle = await call(rt, SHOP, "session_get", session_id=session.id[:8], around=20, k=4)
    numbers = [line.split()[0] for line in middle.text.splitlines() if line.startswith("#")]
    assert numbers == ["#18", "#19", "#20", "#21"]
    hidden = chat(sqlite_store, "elsewhere", ["secret"], namespace="other", name="hidden-one")
    refused = await call(rt, SHOP, "session_get", ref=hidden.id)
    assert refused.error
    assert "secret" not in refused.text


async def test_session_ask_answers_from_the_session_and_records_the_query(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    session = chat(
        sqlite_store,
        "db",
        ["Which database?", "We chose PostgreSQL for the orders service."],
        namespace="shop",
        name="db-choice",
    )
    scripted_llm.push("PostgreSQL.")
    answer = await call(rt, SHOP, "session_ask", ref="db-choice", question="Which database?")
    assert answer.text == "PostgreSQL."
    assert "We chose PostgreSQL" in scripted_llm.prompts[-1]
    events = sqlite_store.list_events(session.id, kind=QUERY_EVENT)
    assert [e.payload["question"] for e in events] == ["Which database?"]


async def test_the_todo_belongs_to_the_callers_session(
    rt: Runtime, sqlite_store: SQLiteStore
) -> None:
    nobody = await call(rt, SHOP, "todo_get")
    assert nobody.error
    assert "--session" in nobody.text
    me = Binding(namespace="shop", session_key="agent-1")
    assert (await call(rt, me, "todo_get")).text == "No TODO yet for this session."
    setting = await call(rt, me, "todo_set", todo="- [ ] write the test\\n- [ ] ship")
    assert not setting.error, setting.text
    session = sqlite_store.find_session("agent-1")
    assert session is not None
    assert session.namespace == "shop"
    assert scaffold.read_texts(rt, session)["todo"] == "- [ ] write the test\n- [ ] ship"
    assert (await call(rt, me, "todo_get")).text == "- [ ] write the test\n- [ ] ship"


async def test_todo_set_says_when_the_todo_was_cut_and_to_what(rt: Runtime) -> None:
    me = Binding(namespace="shop", session_key="agent-2")
    escaped = await call(rt, me, "todo_set", text="- [ ] write the test\\n- [ ] ship")
    assert "cut" not in escaped.text  # shorter once its escapes are read, but whole
    limit = rt.settings.todo_max_chars
    long = await call(rt, me, "todo_set", text="x" * (limit + 1))
    assert not long.error, long.text
    assert f"set (cut to {limit} characters, the most a TODO keeps (todo_max_chars))" in long.text
