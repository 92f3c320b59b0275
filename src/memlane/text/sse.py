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
        self._buffer += chunk
        out: list[tuple[str | None, str]] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return out
            end, after = cut
            line = self._buffer[:end].decode("utf-8", errors="replace")
            self._buffer = self._buffer[after:]
            if not line:
                if self._data:
                    out.append((self._event, "\n".join(self._data)))
                self._event, self._data = None, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":
                    self._data.append(value)
                elif name == "event":
                    self._event = value

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


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """(end of line, start of next) for the first line break (LF, CRLF or CR)."""
    lf = buffer.find(b"\n")
    cr = buffer.find(b"\r")
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, lf + 1
    if cr + 1 == len(buffer):
        return None  # a CR at the very end may be the first half of CRLF
    return (cr, cr + 2) if buffer[cr + 1 : cr + 2] == b"\n" else (cr, cr + 1)
