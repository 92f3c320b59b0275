"""Server-side history: clients that send only their new message get the working context."""

from __future__ import annotations

import openai

from memlane.engine.sessions.working import SUMMARY_PROMPT
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import Fail, ProxyFactory, RecordedRequest, Reply, ScriptedUpstream

SUMMARY = dict(summary_enabled=True, summary_threshold=6, summary_keep_last=2)


def summariser(fails: bool) -> object:
    def answer(request: RecordedRequest) -> Reply | Fail | None:
        if request.messages and request.messages[0].get("content") == SUMMARY_PROMPT:
            if fails:
                return Fail(500, "summariser down")
            folded = request.messages[1]["content"].count("\n") + 1
            return Reply(text=f"SUMMARY covering {folded} lines")
        return None  # the conversation itself: the echo

    return answer


def conversation(upstream: ScriptedUpstream) -> list[RecordedRequest]:
    return [
        r
        for r in upstream.model_requests
        if not (r.messages and r.messages[0].get("content") == SUMMARY_PROMPT)
    ]


def eight_turns(client: openai.OpenAI, proxy: object) -> None:
    for i in range(8):
        client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"turn {i}"},
            ],
        )
        proxy.drain()  # type: ignore[attr-defined]


def test_the_upstream_gets_the_summary_and_what_it_does_not_cover(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, **SUMMARY)
    upstream.respond_with(summariser(fails=False))  # type: ignore[arg-type]
    eight_turns(sdk(proxy, "bot", **{"X-Memlane-History": "server"}), proxy)

    sent = conversation(upstream)
    first = sent[0].messages
    assert first == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "turn 0"},
    ]
    third = [m["content"] for m in sent[2].messages]
    assert third == ["Be brief.", "turn 0", "echo: turn 0", "turn 1", "echo: turn 1", "turn 2"]

    session = proxy.store.find_session("bot")
    assert session.summarized_count == 16 - 2  # folded after the last answer, keep-last 2
    last = sent[-1].messages
    assert last[0] == {"role": "system", "content": "Be brief."}
    assert last[1]["role"] == "system"
    assert last[1]["content"].startswith("Summary of the earlier conversation")
    assert "SUMMARY covering" in last[1]["content"]
    # when turn 7 came, 14 messages were stored and the first 12 were in the summary
    assert [m["content"] for m in last[2:]] == ["turn 6", "echo: turn 6", "turn 7"]
    stored = [m.message.text for m in proxy.store.list_messages(session.id)]
    assert stored.count("turn 3") == 1  # each new message stored once
    assert "Be brief." not in stored


def test_a_failing_summariser_leaves_the_full_transcript_forwarded(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, **SUMMARY)
    upstream.respond_with(summariser(fails=True))  # type: ignore[arg-type]
    eight_turns(sdk(proxy, "bot", **{"X-Memlane-History": "server"}), proxy)

    last = [m["content"] for m in conversation(upstream)[-1].messages]
    assert last[0] == "Be brief."
    assert last[1:3] == ["turn 0", "echo: turn 0"]
    assert last[-1] == "turn 7"
    assert len(last) == 1 + 15
    assert proxy.store.find_session("bot").summarized_count == 0


def test_without_the_header_the_request_is_forwarded_untouched(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, **SUMMARY)
    upstream.respond_with(summariser(fails=False))  # type: ignore[arg-type]
    eight_turns(sdk(proxy, "plain"), proxy)
    for request in conversation(upstream):
        assert [m["content"] for m in request.messages] == [
            "Be brief.",
            request.messages[1]["content"],
        ]


def test_a_client_that_resends_its_history_is_not_fed_twice(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, history="server")
    client = sdk(proxy, "full")
    history = [{"role": "user", "content": "hello"}]
    client.chat.completions.create(model="m", messages=history)
    history += [
        {"role": "assistant", "content": "echo: hello"},
        {"role": "user", "content": "again"},
    ]
    client.chat.completions.create(model="m", messages=history)
    assert conversation(upstream)[-1].messages == history
    session = proxy.store.find_session("full")
    texts = [m.message.text for m in proxy.store.list_messages(session.id)]
    assert texts == ["hello", "echo: hello", "again", "echo: again"]


def test_server_history_for_responses_and_streaming(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    client = sdk(proxy, "r1", **{"X-Memlane-History": "server"})
    client.responses.create(model="m", input="first question")
    stream = client.responses.create(model="m", input="second question", stream=True)
    for _ in stream:
        pass
    sent = upstream.model_requests[-1].json["input"]
    texts = [
        item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
        for item in sent
    ]
    assert texts == ["first question", "echo: first question", "second question"]


def _texts(items: list[dict[str, object]]) -> list[str]:
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            out.append(str(content[0]["text"]))  # type: ignore[index]
        else:
            out.append(str(content))
    return out


def test_previous_response_id_continues_after_a_restart(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, tmp_path: object
) -> None:
    first = proxy_factory(**QUIET)
    home = first.settings.home_path
    answer = sdk(first).responses.create(model="m", input="my name is Ada", store=False)
    first.stop()

    again = proxy_factory(**QUIET, home=home)  # a new process on the same home
    sdk(again).responses.create(model="m", input="what is my name?", previous_response_id=answer.id)
    sent = upstream.model_requests[-1].json
    assert "previous_response_id" not in sent
    assert _texts(sent["input"]) == ["my name is Ada", "echo: my name is Ada", "what is my name?"]
    sessions = again.store.list_sessions()
    assert len(sessions) == 1  # the chain continued the same session
    texts = [m.message.text for m in again.store.list_messages(sessions[0].id)]
    assert texts == [
        "my name is Ada",
        "echo: my name is Ada",
        "what is my name?",
        "echo: what is my name?",
    ]


def test_an_unknown_previous_response_id_is_forwarded_for_the_upstream(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    sdk(proxy).responses.create(model="m", input="hi", previous_response_id="resp_elsewhere")
    sent = upstream.model_requests[-1].json
    assert sent["previous_response_id"] == "resp_elsewhere"
    assert sent["input"] == "hi"  # forwarded as the client sent it
