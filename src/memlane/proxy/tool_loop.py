"""memlane's own tools through the proxy: offered to the upstream model, answered by memlane.

Opt-in (`MEMLANE_PROXY_TOOLS=true`, or per request `X-Memlane-Tools: memory,sessions`):
memlane adds `memlane_memory_search` and `memlane_session_ask` to the forwarded
request's tools, in the request's wire format (Chat Completions, Responses, Anthropic
Messages: `proxy.tool_wire`). When the model's answer calls only memlane's tools, memlane runs
them, appends the call and its result, and asks the upstream again, at most
`MEMLANE_PROXY_TOOLS_MAX_ROUNDS` times, before anything reaches the client; the
client sees one ordinary answer. Streamed, a round is read until it shows what it
is: one that starts with text is relayed as it arrives (the final round; a call to
memlane's tools later in it is taken out of the stream and answered aside, as
below); one that starts with a tool call is read whole first, so an intermediate
round never reaches the client.

A round that calls the client's tools and memlane's together is relayed without
memlane's calls; memlane answers its own and hands the results to the model on
the session's next request (kept in the session state until then).

Every intermediate round is an event of the session (`proxy_tools.round`, with its
calls and usage) and its tokens count in the session's usage; the final round is
stored as the turn's answer, as any answer is. A tool that fails answers the model
with an error text; the request goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response

from memlane.engine import pipeline, threads
from memlane.engine.fence import DATA_NOTE, fenced
from memlane.engine.turn import Answer, Turn
from memlane.engine.turnlog import turn_cost
from memlane.proxy.answers import (
    _fail,
    _finish,
    _response_headers,
    send_upstream,
    transport_error,
)
from memlane.proxy.direct import direct_response
from memlane.proxy.errors import ProxyError
from memlane.proxy.forward import Upstream, UpstreamError, UpstreamResponse
from memlane.proxy.relay import Outcome, RelayResponse
from memlane.proxy.state import ProxyState
from memlane.proxy.tool_rounds import StreamedRound, WholeRound
from memlane.proxy.tool_wire import TOOL_WIRES, ToolWire, with_tools
from memlane.proxy.wire.base import ParsedRequest, StreamAssembler, WireAdapter, dumps
from memlane.store import StoreError
from memlane.text.sse import encode
from memlane.types import Message, ToolCall
from memlane.views.tools import BY_NAME, PROXY_PREFIX, PROXY_TOOLS, Binding, ToolSpec, call_tool

log = logging.getLogger("memlane.proxy")

ROUND_EVENT = "proxy_tools.round"
PENDING_STATE = "proxy_tools_pending"
GROUPS = ("memory", "sessions")
OFF = frozenset({"0", "false", "no", "off", "none"})
ON = frozenset({"1", "true", "yes", "on", "all"})

LIMIT_ANSWER = (
    "[memlane] The model kept calling memlane's tools ({rounds} rounds, the limit set by "
    "MEMLANE_PROXY_TOOLS_MAX_ROUNDS) without answering. Ask again, more specifically, or "
    "raise the limit."
)
PENDING_NOTE = "Results of memlane's tools you called in your previous answer. " + DATA_NOTE
RESULT_NOTE = "Result of memlane's {name}. " + DATA_NOTE


def offered(default_on: bool, header: str | None) -> tuple[ToolSpec, ...]:
    """The tools this request gets: `X-Memlane-Tools` (groups, `all` or `off`), else the
    setting. An unknown group is the client's mistake: a 400 that lists the right ones."""
    if header is None:
        groups = set(GROUPS) if default_on else set()
    else:
        words = {w.strip().lower() for w in header.split(",") if w.strip()}
        if words & OFF:
            groups = set()
        elif words & ON:
            groups = set(GROUPS)
        else:
            unknown = sorted(words - set(GROUPS))
            if unknown:
                raise ProxyError(
                    400,
                    f"X-Memlane-Tools: unknown tool group {unknown[0]!r}; use memory, sessions, "
                    "all or off (comma-separated)",
                    code="invalid_memlane_tools",
                )
            groups = words
    return tuple(BY_NAME[name] for name in PROXY_TOOLS if BY_NAME[name].group in groups)


@dataclass
class ToolLoop:
    state: ProxyState
    turn: Turn
    adapter: WireAdapter
    parsed: ParsedRequest
    specs: tuple[ToolSpec, ...]
    upstream: Upstream
    url: str
    headers: dict[str, str]
    rounds: int = 0
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = frozenset(proxy_name(spec) for spec in self.specs)

    @property
    def wire(self) -> ToolWire:
        return TOOL_WIRES[self.adapter.wire]

    @property
    def max_rounds(self) -> int:
        return self.state.settings.proxy_tools_max_rounds

    def binding(self) -> Binding:
        turn = self.turn
        session_id = turn.session.id if turn.session is not None else None
        return Binding(
            namespace=turn.namespace,
            session_key=turn.key,
            session_id=session_id,
            via="proxy",
            tenant=turn.tenant,
        )

    def payload(self, messages: Sequence[Message]) -> bytes:
        tools = [
            self.wire.definition(proxy_name(spec), spec.description, spec.args.model_json_schema())
            for spec in self.specs
        ]
        return dumps(with_tools(self.wire, self.adapter.render(self.parsed, messages), tools))

    def split(self, answer: Answer) -> tuple[list[ToolCall], list[ToolCall]]:
        """(memlane's calls, the client's calls) in the answer."""
        calls = [c for m in answer.messages for c in m.tool_calls]
        ours = [c for c in calls if c.name in self.names]
        return ours, [c for c in calls if c.name not in self.names]

    # --- running memlane's calls ---------------------------------------------------------
    async def run_calls(self, calls: Sequence[ToolCall], answer: Answer) -> list[Message]:
        """Answer memlane's calls; record the round (calls, usage) on the session."""
        rt = self.state.runtime
        if self.turn.made_ahead is not None:  # calls may write to the session: its row first
            await pipeline.stored(rt, self.turn)
        binding = self.binding()
        results: list[Message] = []
        record: list[dict[str, Any]] = []
        for index, call in enumerate(calls):
            name = call.name.removeprefix(PROXY_PREFIX)
            result = await call_tool(rt, binding, name, call.arguments)
            text = (
                result.text if result.error else fenced(RESULT_NOTE.format(name=name), result.text)
            )
            # one wire message holds every result (Anthropic wants them in one user turn)
            results.append(
                Message(
                    "tool",
                    text,
                    "tool_result",
                    call_id=call.id,
                    name=call.name,
                    continues=index > 0,
                )
            )
            record.append(
                {
                    "name": call.name,
                    "arguments": call.arguments[:2000],
                    "error": result.error,
                    "result": result.text[:2000],
                }
            )
        self.rounds += 1
        await self.record(record, answer)
        return results

    async def record(self, calls: list[dict[str, Any]], answer: Answer) -> None:
        session = self.turn.session
        if session is None:
            return
        cost = turn_cost(self.state.settings, answer.prompt_tokens, answer.completion_tokens)
        payload: dict[str, Any] = {
            "round": self.rounds,
            "wire": self.adapter.wire,
            "model": self.turn.model,
            "calls": calls,
            "usage": {
                "prompt_tokens": answer.prompt_tokens,
                "completion_tokens": answer.completion_tokens,
            },
            "cost_usd": cost,
        }
        store = self.state.runtime.store

        def write() -> None:
            store.add_event(session.id, ROUND_EVENT, payload)
            store.add_usage(
                session.id,
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                cost_usd=cost,
            )

        try:
            await threads.to_thread(write)
        except StoreError as exc:
            log.warning("could not record a memlane tool round: %s", exc)

    async def answer_aside(self, calls: Sequence[ToolCall], answer: Answer) -> None:
        """Memlane's calls in a round the client's calls go back to the client with: run
        them now, and keep the results for the model's next request in this session."""
        results = await self.run_calls(calls, answer)
        session = self.turn.session
        if session is None:
            return
        lines = [
            f"{call.name}({call.arguments}):\n{result.text}"
            for call, result in zip(calls, results, strict=True)
        ]
        store = self.state.runtime.store
        try:
            await threads.to_thread(store.set_state, session.id, PENDING_STATE, "\n\n".join(lines))
        except StoreError as exc:
            log.warning("could not keep memlane's tool results for the next turn: %s", exc)

    async def with_pending(self, messages: list[Message]) -> list[Message]:
        """The request's messages, plus results memlane owes the model from its last turn."""
        session = self.turn.session
        if session is None:
            return messages
        store = self.state.runtime.store
        try:
            pending = (await threads.to_thread(store.get_state, session.id)).get(PENDING_STATE)
            if not pending:
                return messages
            await threads.to_thread(store.set_state, session.id, PENDING_STATE, None)
        except StoreError as exc:
            log.warning("could not read memlane's pending tool results: %s", exc)
            return messages
        note = Message("user", fenced(PENDING_NOTE, pending), origin="note")
        return [*messages, note]

    def limit_answer(self) -> str:
        return LIMIT_ANSWER.format(rounds=self.rounds)

    async def send(self, messages: list[Message], *, stream: bool) -> UpstreamResponse | Response:
        """One round's request upstream, or the client's error when it failed
        (`turns.send_upstream`)."""

        content = self.payload(messages)
        return await send_upstream(
            self.state,
            self.turn,
            self.adapter,
            self.upstream,
            self.url,
            content,
            self.headers,
            stream=stream,
        )

    # --- the rounds ------------------------------------------------------------------------
    async def complete(self, messages: list[Message]) -> Response:
        return await self.respond(messages, stream=False)

    async def stream(self, messages: list[Message]) -> Response:
        return await self.respond(messages, stream=True)

    async def respond(self, messages: list[Message], *, stream: bool) -> Response:
        """Ask the upstream until a round is for the client: one that answers, or calls the
        client's tools; memlane answers a round that calls only its own and asks again."""

        while True:
            upstream = await self.send(messages, stream=stream)
            if isinstance(upstream, Response):
                return upstream
            read = await self.read_stream(upstream) if stream else await self.read_whole(upstream)
            if isinstance(read, Response):  # the final round: relayed as it arrives
                return read
            answer = read.answer
            ours, theirs = self.split(answer)
            if not ours or not read.readable:
                await _finish(self.state, self.turn, answer)
                return read.as_sent()
            if theirs:
                await self.answer_aside(ours, answer)
                shown, response = read.without(self.names)
                await _finish(self.state, self.turn, shown)
                return response
            if self.rounds >= self.max_rounds:
                return await self.stop(answer, stream=stream)
            results = await self.run_calls(ours, answer)
            messages = [*messages, *answer.messages, *results]

    async def read_whole(self, upstream: UpstreamResponse) -> WholeRound:

        headers = await _response_headers(self.state, self.turn, upstream.headers)
        return WholeRound(self.adapter, self.wire, upstream.content, upstream.status_code, headers)

    async def read_stream(self, upstream: UpstreamResponse) -> StreamedRound | Response:
        """The round read to its end, or, when it starts with text, relayed from there on."""

        headers = await _response_headers(self.state, self.turn, upstream.headers)
        read = StreamedRound(
            self.adapter, self.wire, upstream.aiter_bytes(), upstream.status_code, headers
        )
        try:
            with threads.TRAFFIC.waiting():
                kind = await read.until_known()
        except UpstreamError as exc:
            await upstream.aclose()
            await _fail(self.state, self.turn)
            raise transport_error(self.state, self.upstream, exc) from None
        if kind == "text":
            return self.relay_final(upstream, read, headers)
        try:
            await read.to_end()
        except UpstreamError as exc:
            await _fail(self.state, self.turn)
            raise transport_error(self.state, self.upstream, exc) from None
        finally:
            await upstream.aclose()
        return read

    async def stop(self, answer: Answer, *, stream: bool) -> Response:
        """The round limit: one more call to memlane's tools is not answered; the client
        gets a clear final answer instead (stored as the turn's answer)."""

        await self.record(
            [
                {"name": c.name, "arguments": c.arguments[:2000], "unanswered": True}
                for c in self.split(answer)[0]
            ],
            answer,
        )
        text = self.limit_answer()
        await _finish(self.state, self.turn, Answer([Message("assistant", text)]))
        return direct_response(self.adapter.wire, self.parsed.model, text, stream=stream)

    def relay_final(
        self, upstream: UpstreamResponse, read: StreamedRound, headers: Mapping[str, str]
    ) -> Response:
        """A round that started with text, relayed as it arrives. A call to memlane's tools
        later in it is taken out of what the client sees (it cannot answer it); memlane
        answers it in the background and hands the result to the model's next request."""

        stripper = self.wire.stripper(self.names)
        whole = read.assembler  # every event, memlane's calls included
        shown = self.adapter.assembler()  # what the client gets: the turn's answer
        head = stripper.feed(read.events)
        for event, data in head:
            shown.feed(event, data)

        def rewrite(events: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
            for event, data in events:
                whole.feed(event, data)
            return stripper.feed(events)

        async def settle(outcome: Outcome, assembler: StreamAssembler) -> None:
            await self._settle(outcome, assembler)
            if outcome is not Outcome.DONE:
                return
            try:
                answer = whole.answer()
            except Exception:
                return
            ours = self.split(answer)[0]
            if ours:
                self.state.runtime.background.spawn(
                    self.answer_aside(ours, answer), name="proxy-tools-aside"
                )

        return RelayResponse(
            upstream,
            shown,
            settle=settle,
            error_frame=self.adapter.stream_error,
            headers=headers,
            head=[encode(head)],
            rest=read.chunks,
            decoder=read.decoder,
            rewrite=rewrite,
        )

    async def _settle(self, outcome: Outcome, assembler: StreamAssembler) -> None:

        answer = Answer([], failed=True)
        if outcome is Outcome.DONE:
            try:
                answer = assembler.answer()
            except Exception:
                log.warning("could not assemble the streamed answer to store it", exc_info=True)
        await _finish(self.state, self.turn, answer)


def proxy_name(spec: ToolSpec) -> str:
    """The name memlane's tool goes by upstream (`memlane_memory_search`)."""
    return PROXY_PREFIX + spec.name
