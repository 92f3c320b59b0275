"""The errors governance raises for the faces to translate into their own format."""

from __future__ import annotations


class ContextOverflow(Exception):
    """A request that cannot fit the model's window even after governance.

    The proxy answers it with HTTP 400 and the OpenAI error code
    `context_length_exceeded`, in the client's wire format, instead of letting
    the upstream fail (or silently truncate) later.
    """

    code = "context_length_exceeded"

    def __init__(self, *, model: str, tokens: int, limit: int, window: int) -> None:
        self.model = model
        self.tokens = tokens
        self.limit = limit
        self.window = window
        super().__init__(
            f"This request needs {tokens} tokens but {model or 'the model'} accepts at most "
            f"{limit} (a {window}-token context window minus the room kept for the answer), "
            "even after memlane's context governance. Shorten the latest message or tool "
            "output, or set governance_context_windows if the window is larger."
        )
