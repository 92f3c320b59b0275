"""Reading JSON a model wrote: strict, apart from the code fence models like to add."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(?P<body>.*)\n```$", re.S)


class ModelOutputError(ValueError):
    """The model's answer is not what the prompt asked for; the caller retries or falls back."""


def load_json(text: str) -> Any:
    """Parse the whole answer as JSON (a surrounding ``` fence is tolerated, prose is not)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    try:
        return json.loads(body)
    except ValueError:
        raise ModelOutputError(f"not JSON: {text[:120]!r}") from None


def load_json_list(text: str, *keys: str, what: str) -> list[Any]:
    """A JSON list the model wrote, bare or under the first of `keys` present in an object.

    Raises `ModelOutputError` ("expected a JSON list of `what`") for anything else.
    """
    data = load_json(text)
    if isinstance(data, dict):
        data = next((data[key] for key in keys if key in data), None)
    if not isinstance(data, list):
        raise ModelOutputError(f"expected a JSON list of {what}")
    return data
