"""One huge message costs memory a bounded amount of work: the extraction call, its turn
file and git see at most `memory_message_chars` of it, with a marker and an event."""

from __future__ import annotations

from pathlib import Path

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.ingest import EVENT_TRUNCATED
from tests.engine.memory.test_through_proxy import client, memlane_calls
from tests.support.upstream import ProxyFactory, Reply, ScriptedUpstream

CEILING = 4_000


def size_of(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_huge_message_reaches_memory_cut_to_the_ceiling(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False, memory_message_chars=CEILING)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"))
    huge = "I just married Anne! " + "and here is my whole log file. " * 100_000  # 3.1 MB
    client(proxy.url, "big", "home").chat.completions.create(
        model="m", messages=[{"role": "user", "content": huge}]
    )
    proxy.drain()
    proxy.call(proxy.runtime.memory_book.flush)

    (extraction,) = [r for r in upstream.requests if r.messages[0].get("content") == FACT_PROMPT]
    asked = str(extraction.messages[-1]["content"])
    assert len(asked) < CEILING + 1_000
    assert "more characters of this message are left out of memory" in asked
    facts = proxy.store.list_facts(scope="ns:home", roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]  # still learned

    session = proxy.store.find_session("big")
    (event,) = proxy.store.list_events(session.id, kind=EVENT_TRUNCATED)
    assert event.payload == {"role": "user", "chars": len(huge), "kept": CEILING}
    memory = proxy.settings.memory_path
    turn_files = [p for p in memory.rglob("*.md") if "left out of memory" in p.read_text()]
    assert turn_files  # the marker is in the file a person reads
    assert size_of(memory) < 200_000  # files and git objects: not the 3 MB message
