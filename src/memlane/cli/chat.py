"""`memlane chat`: a terminal conversation through memlane's engine, saved as it happens.

Each turn goes through the same pipeline as a proxied request (stored first,
`@@` references, scaffold, governance, recall), is streamed from the upstream
as it is written, and is stored with its usage when it ends; indexing and
fact extraction run in the background and are waited for on exit. The
conversation sent upstream is the session's stored history plus the new
prompt, so `--resume` continues exactly where the last run stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from memlane.cli.context import fail, opened_store, state
from memlane.config import Settings
from memlane.engine import pipeline
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.indexing import startup_warnings
from memlane.engine.sessions.lookup import SessionLookupError, find_session
from memlane.engine.sessions.references import ReferenceFailed
from memlane.engine.turn import Answer, Turn
from memlane.proxy.wire.base import token_count
from memlane.proxy.wire.chat import to_wire
from memlane.store import Store
from memlane.types import Message, Session

PROMPT = "you> "
HELP = (
    "commands: /sessions (recent sessions), /todo [text] (show or set the todo), "
    "/compact (compact the history now), /summary (the running summary), /exit"
)
LOG_FILE = "chat.log"
SHOWN_ON_RESUME = 20
"""Earlier transcript messages printed when a session is resumed."""


class ChatError(Exception):
    """The upstream could not answer this turn; the session is kept and the chat goes on."""


@dataclass
class ChatSession:
    """The conversation in this terminal: its stored session (None while nothing was said)."""

    rt: Runtime
    key: str
    namespace: str
    model: str
    ephemeral: bool = False
    session: Session | None = None
    history: list[Message] = field(default_factory=list)
    out: Callable[[str], None] = print

    def load(self) -> None:
        """The stored conversation (client messages that did not fail), to resend upstream."""
        if self.session is None:
            return
        stored = self.rt.store.list_messages(self.session.id)
        self.history = [
            item.message
            for item in stored
            if item.message.origin == "client" and item.status == "ok"
        ]

    async def turn(self, text: str, write: Callable[[str], None]) -> None:
        """One exchange: store the prompt, stream the answer, store it."""
        prompt = Message(role="user", text=text)
        # With the running summary on, memlane supplies the history (the summary plus
        # what it does not cover) from the store; otherwise the whole transcript goes.
        server = self.rt.settings.summary_enabled and not self.ephemeral
        turn = Turn(
            key=self.key,
            namespace=self.namespace,
            model=self.model,
            wire="chat",
            messages=[prompt] if server else [*self.history, prompt],
            session=self.session,
            ephemeral=self.ephemeral,
            flags={"history": "server"} if server else {},
        )
        try:
            messages = await pipeline.prepare(self.rt, turn)
        except ReferenceFailed as exc:
            write(exc.answer)
            answer = Answer([Message(role="assistant", text=exc.answer)])
        else:
            answer = await self._ask_upstream(messages, write)
        await pipeline.finish(self.rt, turn, answer)
        self.session = turn.session
        if answer.failed:
            return
        self.history = [*turn.messages, *answer.messages]

    async def _ask_upstream(self, messages: list[Message], write: Callable[[str], None]) -> Answer:
        parts: list[str] = []
        usage: dict[str, Any] = {}
        try:
            async for delta, reported in stream_completion(self.rt.settings, self.model, messages):
                if delta:
                    parts.append(delta)
                    write(delta)
                usage = reported or usage
        except ChatError as exc:
            self.out(f"\nerror: {exc}")
            return Answer([], failed=True)
        return Answer(
            [Message(role="assistant", text="".join(parts), wire="chat")],
            prompt_tokens=token_count(usage.get("prompt_tokens")),
            completion_tokens=token_count(usage.get("completion_tokens")),
        )


async def stream_completion(
    settings: Settings, model: str, messages: list[Message]
) -> AsyncIterator[tuple[str, dict[str, Any] | None]]:
    """(text delta, usage) pairs of a streamed chat completion from the upstream."""
    body = {
        "model": model,
        "messages": [to_wire(m) for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    key = settings.upstream_api_key
    token = key.get_secret_value() if key else os.environ.get("OPENAI_API_KEY")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    url = settings.upstream_url.rstrip("/") + "/chat/completions"
    try:
        async with (
            httpx.AsyncClient(timeout=settings.upstream_timeout) as client,
            client.stream("POST", url, json=body, headers=headers) as response,
        ):
            if not response.is_success:
                await response.aread()
                raise ChatError(
                    f"upstream answered HTTP {response.status_code}: {_reason(response)}"
                )
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                yield _delta(data)
    except httpx.HTTPError as exc:
        reason = f"upstream unreachable at {settings.upstream_url} ({type(exc).__name__})"
        raise ChatError(reason) from None


def _delta(data: str) -> tuple[str, dict[str, Any] | None]:
    """The text and usage in one chunk; an error event (whatever its shape) is a ChatError."""
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ChatError("upstream sent a stream event that is not JSON") from exc
    if not isinstance(chunk, dict):
        return "", None
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise ChatError(f"upstream error: {message}"[:300])
    choices = chunk.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    delta = first.get("delta") if isinstance(first, dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    usage = chunk.get("usage")
    return content if isinstance(content, str) else "", usage if isinstance(usage, dict) else None


def _reason(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        return str(error.get("message") if isinstance(error, dict) else error)[:200]
    except (ValueError, AttributeError):
        return response.text[:200] or "no details"


# --- the command ---------------------------------------------------------------------


def chat(
    ctx: typer.Context,
    session_ref: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="With --resume: the session to continue."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue a session: ID, or the most recent one."),
    ] = False,
    fork: Annotated[
        str | None, typer.Option("--fork", help="Start a new session from a copy of ID.")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model to talk to (default: llm_model).")
    ] = None,
    ephemeral: Annotated[
        bool, typer.Option("--ephemeral", help="Keep nothing: the chat is not stored.")
    ] = False,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", help="Memory namespace (default: the current folder)."),
    ] = None,
) -> None:
    """Talk to the upstream model through memlane, in the terminal."""
    settings = state(ctx).settings
    chosen = model or settings.llm_model
    if not chosen:
        fail("no model: pass --model NAME or set MEMLANE_LLM_MODEL")
    if session_ref is not None and not resume:
        fail(f"to continue {session_ref}, use: memlane chat --resume {session_ref}")
    if ephemeral and (resume or fork):
        fail("--ephemeral starts a new unsaved chat: drop --resume / --fork")
    _log_to_file(settings)
    for warning in startup_warnings(settings):
        typer.echo(f"warning: {warning}", err=True)
    with opened_store(settings) as store:
        rt = Runtime(settings, store)
        session = _starting_session(store, resume=resume, ref=session_ref, fork=fork)
        key = (
            session.key
            if session
            else f"chat-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        )
        space = session.namespace if session else (namespace or str(Path.cwd()))
        chat_session = ChatSession(rt, key, space, chosen, ephemeral=ephemeral, session=session)
        chat_session.load()
        _loop(chat_session)


def _log_to_file(settings: Settings) -> None:
    """Background warnings go to `chat.log` in the home, not between the prompt and the answer."""
    try:
        settings.home_path.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(settings.home_path / LOG_FILE)
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())


def _starting_session(
    store: Store, *, resume: bool, ref: str | None, fork: str | None
) -> Session | None:
    if resume and fork:
        fail("use either --resume or --fork")
    try:
        if fork is not None:
            source = find_session(store, fork)
            key = f"{source.key}~fork-{uuid.uuid4().hex[:8]}"
            return lifecycle.fork(store, source, new_key=key)
        if not resume:
            return None
        if ref is not None:
            return find_session(store, ref)
    except SessionLookupError as exc:
        fail(str(exc))
    recent = store.list_sessions(limit=1)
    if not recent:
        fail("no session to resume yet: start one with `memlane chat`")
    return recent[0]


def _loop(chat_session: ChatSession) -> None:
    """Read lines in the main thread, run each turn on one event loop.

    `input()` stays in the main thread so Ctrl-C reaches it at once: at the prompt it
    leaves the chat (showing any unsent text, which readline still holds), during an
    answer it stops that answer and returns to the prompt.
    """
    out = chat_session.out
    _line_buffer()  # loading readline gives input() line editing and a buffer to read back
    _greet(chat_session)
    with asyncio.Runner() as runner:
        try:
            while True:
                try:
                    line = input(PROMPT)
                except EOFError:
                    out("")
                    break
                except KeyboardInterrupt:
                    unsent = _line_buffer()
                    out(f"\nnot sent: {unsent}" if unsent else "")
                    break
                text = line.strip()
                if not text:
                    continue
                try:
                    if text.startswith("/"):
                        if runner.run(_command(chat_session, text)):
                            break
                        continue
                    sys.stdout.write("assistant> ")
                    runner.run(chat_session.turn(text, _write))
                except KeyboardInterrupt:
                    out("\n(interrupted)")
                    continue
                sys.stdout.write("\n")
                sys.stdout.flush()
        finally:
            runner.run(chat_session.rt.background.drain())
    if chat_session.session is not None:
        out(f"saved as {chat_session.session.id}: memlane chat --resume {chat_session.session.id}")


def _line_buffer() -> str:
    """What the user had typed when Ctrl-C came (readline keeps it; without it, nothing)."""
    try:
        import readline
    except ImportError:
        return ""
    return readline.get_line_buffer().strip()


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _greet(chat_session: ChatSession) -> None:
    out = chat_session.out
    session = chat_session.session
    if session is None:
        mode = " (ephemeral: nothing is saved)" if chat_session.ephemeral else ""
        out(f"new chat with {chat_session.model}{mode}. {HELP}")
        return
    title = lifecycle.session_title(chat_session.rt.store, session)
    out(f"resuming {session.id} ({title}), {len(chat_session.history)} messages. {HELP}")
    shown = [m for m in chat_session.history if m.is_transcript][-SHOWN_ON_RESUME:]
    for message in shown:
        out(f"  {'you' if message.role == 'user' else 'assistant'}: {message.text}")


async def _command(chat_session: ChatSession, text: str) -> bool:
    """Run a slash command; True means leave the chat."""
    name, _, argument = text.partition(" ")
    out = chat_session.out
    rt = chat_session.rt
    if name in ("/exit", "/quit"):
        return True
    if name == "/sessions":
        for session in rt.store.list_sessions(limit=10):
            title = lifecycle.session_title(rt.store, session)
            out(f"{session.id[:12]}  {session.message_count:>4} msgs  {title}")
    elif name == "/todo":
        out(_todo(chat_session, argument.strip() or None))
    elif name == "/compact":
        out(await _compact(chat_session))
    elif name == "/summary":
        out(_summary(chat_session))
    else:
        out(f"unknown command {name}. {HELP}")
    return False


def _summary(chat_session: ChatSession) -> str:
    from memlane.engine.sessions.working import current_context

    session = chat_session.session
    if not chat_session.rt.settings.summary_enabled:
        return "the running summary is off (MEMLANE_SUMMARY_ENABLED=true turns it on)"
    if session is None:
        return "no summary yet: the session starts with your first message"
    context = current_context(chat_session.rt, session.id)
    if not context.summary:
        threshold = chat_session.rt.settings.summary_threshold
        return f"no summary yet: it starts past {threshold} messages"
    return f"summary of the first {context.summarized_count} messages:\n{context.summary}"


def _todo(chat_session: ChatSession, text: str | None) -> str:
    from memlane.engine import scaffold

    session = chat_session.session
    if session is None:
        return "no todo yet: the session starts with your first message"
    if text is not None:
        scaffold.set_text(chat_session.rt, session, "todo", text)
    return scaffold.read_texts(chat_session.rt, session).get("todo") or "(no todo)"


async def _compact(chat_session: ChatSession) -> str:
    session = chat_session.session
    if session is None:
        return "nothing to compact yet"
    from memlane.engine.governance.compact import CompactionError, compact_session
    from memlane.text.llm import LLMError

    try:
        result = await compact_session(chat_session.rt, session.id, model=chat_session.model)
    except (CompactionError, LLMError) as exc:
        return f"not compacted: {exc}"
    return str(result)
