"""An incremental server-sent-events reader: the proxy's tee and `memlane chat`'s stream.

It sits with the LLM client (`text`) so every face that reads a stream uses the same
decoder; the wire formats' assemblers (`proxy.wire`) turn its events into an answer.
"""

from __future__ import annotations

from collections.abc import Iterable


class SSEDecoder:
    """Splits a byte stream into (event, data) pairs, whatever the chunk boundaries.

    In the proxy it reads a copy of the stream: the bytes themselves are relayed
    to the client untouched, as they arrive.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        buffer = self._buffer + chunk if self._buffer else chunk
        held = b""
        if b"\r" in buffer:  # CRLF and a lone CR break lines as LF does
            if buffer.endswith(b"\r"):  # may be the first half of a CRLF
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # One split per chunk: the lines in order, the last one unfinished. (Cutting one
        # line at a time rescanned and copied what followed it, for every line.)
        lines = buffer.split(b"\n")
        self._buffer = lines.pop() + held if held else lines.pop()
        out: list[tuple[str | None, str]] = []
        data = self._data
        for raw in lines:
            if raw.startswith(b"data:"):  # most lines: the prefix is ASCII, so cut before decoding
                value = raw[6:] if raw.startswith(b" ", 5) else raw[5:]
                data.append(value.decode("utf-8", errors="replace"))
            elif not raw:
                if data:
                    out.append((self._event, "\n".join(data)))
                    self._data = data = []
                self._event = None
            elif not raw.startswith(b":"):
                name, _, text = raw.decode("utf-8", errors="replace").partition(":")
                if name == "event":
                    self._event = text.removeprefix(" ")
                elif name == "data":  # a bare `data` line: an empty one
                    data.append(text.removeprefix(" "))
        return out

    def close(self) -> list[tuple[str | None, str]]:
        """Events left when the stream ends without a final blank line."""
        pending = self.feed(b"\n\n") if self._buffer or self._data else []
        return pending


def encode(events: Iterable[tuple[str | None, str]]) -> bytes:
    """Events as SSE bytes again (after memlane changed some of them)."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        lines = "".join(f"data: {line}\n" for line in data.split("\n"))
        out.append(f"{head}{lines}\n".encode())
    return b"".join(out)
