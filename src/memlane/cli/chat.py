"""`memlane chat`: a terminal conversation through memlane's engine, saved as it happens.

Each turn goes through the same pipeline as a proxied request (stored first,
`@@` references, scaffold, governance, recall), is streamed from the upstream
as it is written (memlane's LLM client, `text.llm`, and the Chat Completions
wire's assembler, `proxy.wire.chat`, as in the proxy's tee), and is stored with
its usage when it ends; indexing and
fact extraction run in the background and are waited for on exit. The
conversation sent upstream is the session's stored history plus the new
prompt, so `--resume` continues exactly where the last run stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.context import fail, opened_store, state
from memlane.cli.running import listed_model
from memlane.config import Settings
from memlane.engine import pipeline
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.indexing import startup_warnings
from memlane.engine.signals import threads_started_here_leave_signals
from memlane.engine.tenancy import OPERATOR
from memlane.engine.threads import worker_pool
from memlane.engine.turn import Answer, DirectAnswer, Turn
from memlane.files.projects import project_of
from memlane.proxy.wire.chat import ChatAssembler, wire_messages
from memlane.store import Store
from memlane.text.factory import upstream_llm
from memlane.text.llm import LLMError, OpenAICompatibleLLM
from memlane.types import Message, Session
from memlane.views.sessions import SessionLookupError, find_session

PROMPT = "you> "
SUMMARY_WAIT_SECONDS = 10.0
"""How long `/summary` waits for the background work of the last turn (its summary)."""
HELP = (
    "commands: /sessions (recent sessions), /todo [text] (show or set the todo), "
    "/compact (compact the history now), /summary (the running summary), /help, /exit"
)
LOG_FILE = "chat.log"
SHOWN_ON_RESUME = 20
"""Earlier transcript messages printed when a session is resumed."""


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
    upstream: OpenAICompatibleLLM = field(init=False)
    """The upstream the conversation is streamed from (`upstream_url`, its key)."""

    def __post_init__(self) -> None:
        self.upstream = upstream_llm(self.rt.settings)

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
            tenant=self.session.tenant if self.session is not None else "",
            ephemeral=self.ephemeral,
            flags={"history": "server"} if server else {},
        )
        prepared = await pipeline.prepare(self.rt, turn)
        if isinstance(prepared, DirectAnswer):  # memlane answers itself (an unknown @@name)
            write(prepared.text)
            answer = prepared.answer()
        else:
            answer = await self._ask_upstream(prepared.messages, write)
        await pipeline.finish(self.rt, turn, answer)
        self.session = turn.session
        if answer.failed:
            return
        self.history = [*turn.messages, *answer.messages]

    async def _ask_upstream(self, messages: list[Message], write: Callable[[str], None]) -> Answer:
        """Stream the answer from the upstream, writing its text as it comes; the chat
        wire's assembler rebuilds the whole answer (text, reasoning, usage) to store."""
        assembler = ChatAssembler()
        try:
            async for event, data in self.upstream.stream(
                wire_messages(messages), model=self.model
            ):
                shown = len(assembler.text)
                assembler.feed(event, data)
                for piece in assembler.text[shown:]:
                    write(piece)
        except LLMError as exc:
            self.out(f"\nerror: {exc}")
            return Answer([], failed=True)
        if assembler.error is not None:
            self.out(f"\nerror: the upstream broke off: {assembler.error}")
        return assembler.answer()


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
        typer.Option(
            "--namespace",
            help="Memory namespace (default: the git repository root's path, as the proxy "
            "gives the agents working there and `memlane mcp` uses, else the current folder).",
        ),
    ] = None,
) -> None:
    """Talk to the upstream model through memlane, in the terminal."""
    settings = state(ctx).settings
    chosen = model or settings.llm_model or listed_model(settings)
    if not chosen:
        fail(
            f"no model: the upstream {settings.upstream_url} lists none; pass --model NAME or "
            "`memlane config set llm_model NAME`"
        )
    if session_ref is not None and not resume:
        fail(f"to continue {session_ref}, use: memlane chat --resume {session_ref}")
    if ephemeral and (resume or fork):
        fail("--ephemeral starts a new unsaved chat: drop --resume / --fork")
    _log_to_file(settings)
    for warning in startup_warnings(settings):
        typer.echo(f"warning: {warning}", err=True)
    with contextlib.ExitStack() as stack:
        # Ctrl-C must reach the main thread's prompt: threads started while opening (a
        # native library's too) never take it
        with threads_started_here_leave_signals():
            store = stack.enter_context(opened_store(settings))
            rt = Runtime(settings, store)
            session = _starting_session(store, resume=resume, ref=session_ref, fork=fork)
            key = (
                session.key
                if session
                else f"chat-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
            )
            space = session.namespace if session else (namespace or _folder_namespace(Path.cwd()))
            chat_session = ChatSession(rt, key, space, chosen, ephemeral=ephemeral, session=session)
            chat_session.load()
        _loop(chat_session)


def _folder_namespace(cwd: Path) -> str:
    """A new chat's namespace: its project's (the repository's root path), so it shares
    memories with the agents working there; outside any repository, the folder itself."""
    project = project_of(cwd.absolute())
    return project.namespace if project is not None else str(cwd)


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
            return lifecycle.fork(store, find_session(store, fork, tenant=OPERATOR))
        if not resume:
            return None
        if ref is not None:
            return find_session(store, ref, tenant=OPERATOR)
    except SessionLookupError as exc:
        fail(str(exc))
    recent = store.list_sessions(limit=1, tenant=OPERATOR)
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
        runner.get_loop().set_default_executor(worker_pool(None, "memlane-chat"))
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
            runner.run(chat_session.rt.settle())
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
    if name in ("/help", "/?"):
        out(HELP)
    elif name == "/sessions":
        for session in rt.store.list_sessions(limit=10, tenant=OPERATOR):
            title = lifecycle.session_title(rt.store, session)
            out(f"{session.id[:12]}  {session.message_count:>4} msgs  {title}")
    elif name == "/todo":
        out(_todo(chat_session, argument.strip() or None))
    elif name == "/compact":
        out(await _compact(chat_session))
    elif name == "/summary":
        out(await _summary(chat_session))
    else:
        out(f"unknown command {name}. {HELP}")
    return False


async def _summary(chat_session: ChatSession) -> str:
    from memlane.engine.sessions.working import current_context

    session = chat_session.session
    if not chat_session.rt.settings.summary_enabled:
        return "the running summary is off (MEMLANE_SUMMARY_ENABLED=true turns it on)"
    if session is None:
        return "no summary yet: the session starts with your first message"
    # the last turn's summary is written in the background: show it, not the one before
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SUMMARY_WAIT_SECONDS):
            await chat_session.rt.settle()
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

    try:
        result = await compact_session(chat_session.rt, session.id, model=chat_session.model)
    except (CompactionError, LLMError) as exc:
        return f"not compacted: {exc}"
    return str(result)
