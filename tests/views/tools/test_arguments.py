"""Tool arguments as models send them: guessed names work, bad ones get a text to act on."""

from __future__ import annotations

import pytest

from memlane.views.tools.args import ArgumentError, read_arguments
from memlane.views.tools.memory_tools import MemoryGetArgs, MemorySearchArgs
from memlane.views.tools.session_tools import SessionAskArgs


def test_guessed_names_map_onto_the_declared_ones() -> None:
    args = read_arguments("memory_search", MemorySearchArgs, {"q": "deploy", "k": "3"}, "{}")
    assert args == MemorySearchArgs(query="deploy", limit=3)
    ask = read_arguments("session_ask", SessionAskArgs, {"session_id": "s1", "q": "why?"}, "{}")
    assert ask == SessionAskArgs(ref="s1", question="why?")


def test_a_declared_name_wins_over_a_guessed_one() -> None:
    args = read_arguments("memory_search", MemorySearchArgs, {"query": "a", "q": "b"}, "{}")
    assert isinstance(args, MemorySearchArgs)
    assert args.query == "a"


def test_arguments_may_come_as_json_text_and_lists_as_one_string() -> None:
    args = read_arguments("memory_get", MemoryGetArgs, '{"id": "abc123, def456"}', "{}")
    assert args == MemoryGetArgs(ids=["abc123", "def456"])
    listed = read_arguments("memory_get", MemoryGetArgs, {"ids": '["abc123"]'}, "{}")
    assert listed == MemoryGetArgs(ids=["abc123"])


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({}, "`query` is required"),
        ({"query": ""}, "`query` is empty: give it a value"),
        ({"query": "   "}, "`query` is empty: give it a value"),
        ({"query": "x", "limit": "many"}, "`limit` input should be a valid integer"),
        ({"query": "x", "limit": 500}, "`limit` input should be less than or equal to 50"),
        ("not json", "the arguments are not a JSON object"),
        ([1, 2], "must be an object of named values"),
    ],
)
def test_a_bad_call_is_told_what_to_send(raw: object, said: str) -> None:
    with pytest.raises(ArgumentError) as caught:
        read_arguments("memory_search", MemorySearchArgs, raw, '{"query": "deploy"}')
    message = str(caught.value)
    assert said in message
    assert (
        "It takes query (string, required), scope (string), limit (integer 1-50), "
        "as_of (date YYYY-MM-DD or ISO time)." in message
    )
    assert 'Example: {"query": "deploy"}' in message
    assert "Traceback" not in message
    assert "errors.pydantic.dev" not in message
