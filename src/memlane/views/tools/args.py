"""Tool arguments as models send them: names they guess, values in odd shapes, clear errors.

Models call tools with the names they expect (`q` for `query`, `k` for `limit`,
`session_id` for `ref`), numbers as strings, lists as JSON text or one string.
`read_arguments` maps the guessed names onto the declared ones, validates with
the tool's pydantic model, and on failure returns a text the model can act on
(what is wrong, what the tool takes, an example) — never a stack trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

COMMON_ALIASES: Mapping[str, tuple[str, ...]] = {
    "query": ("q", "search", "search_query", "keywords", "terms"),
    "limit": ("k", "top_k", "n", "max_results", "num_results", "count", "size"),
    "ids": ("id", "memory_id", "memory_ids", "fact_id", "fact_ids"),
    "id": ("memory_id", "fact_id", "ids"),
    "ref": ("session", "session_id", "session_ref", "name", "id", "key"),
    "question": ("q", "query", "prompt", "ask"),
    "text": ("content", "memory", "fact", "value", "note", "todo", "body"),
    "around": ("position", "at", "message", "center"),
    "scope": ("in", "where"),
    "as_of": ("date", "when", "asof", "as_of_date", "at_date"),
}
"""Names models commonly use, by the argument they mean (first one present wins)."""


class ArgumentError(ValueError):
    """The arguments do not fit the tool; the message is meant for the model."""


def read_arguments(tool: str, model: type[BaseModel], raw: Any, example: str) -> BaseModel:
    """`raw` (a mapping, or JSON text of one) as a validated `model`, or ArgumentError."""
    arguments = _as_mapping(tool, raw, model, example)
    fields = model.model_fields
    mapped: dict[str, Any] = {k: v for k, v in arguments.items() if k in fields}
    for name in fields:
        if name in mapped:
            continue
        for alias in COMMON_ALIASES.get(name, ()):
            if alias in arguments and alias not in fields:
                mapped[name] = arguments[alias]
                break
    mapped = {k: _unwrap(v) for k, v in mapped.items()}
    try:
        return model.model_validate(mapped)
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        raise ArgumentError(f"{tool}: {problems}. {usage(model)} Example: {example}") from None


def usage(model: type[BaseModel]) -> str:
    """`takes query (string, required), limit (integer)` from the model's schema."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        kind = _kind(prop)
        parts.append(f"{name} ({kind}{', required' if name in required else ''})")
    return f"It takes {', '.join(parts)}." if parts else "It takes no arguments."


def _as_mapping(tool: str, raw: Any, model: type[BaseModel], example: str) -> Mapping[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ArgumentError(
                f"{tool}: the arguments are not a JSON object. {usage(model)} Example: {example}"
            ) from None
    if not isinstance(raw, Mapping):
        raise ArgumentError(
            f"{tool}: the arguments must be an object of named values. {usage(model)} "
            f"Example: {example}"
        )
    return raw


def _unwrap(value: Any) -> Any:
    """`"[\\"a\\"]"` (a list sent as JSON text) as the list; an empty string as absent."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{"):
            try:
                return json.loads(stripped)
            except ValueError:
                return value
        if not stripped:
            return None
    return value


def _problem(error: Mapping[str, Any]) -> str:
    where = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
    kind = error.get("type", "")
    if kind == "missing":
        return f"`{where}` is required"
    given = error.get("input")
    if given is None:  # sent empty, or blank (`_unwrap`), or null: "got null" said nothing
        return f"`{where}` is empty: give it a value"
    message = str(error.get("msg", "is not valid")).rstrip(".")
    shown = json.dumps(given, ensure_ascii=False, default=str)[:80]
    return (
        f"`{where}` {message[0].lower() + message[1:] if message else 'is not valid'} (got {shown})"
    )


def _kind(prop: Mapping[str, Any]) -> str:
    if "anyOf" in prop:
        kinds = [_kind(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(kinds) or "any"
    kind = str(prop.get("type", "any"))
    if prop.get("format") == "date-time":
        return "date YYYY-MM-DD or ISO time"
    if kind == "array":
        return f"list of {_kind(prop.get('items', {}))}s"
    low, high = prop.get("minimum"), prop.get("maximum")
    if kind == "integer" and low is not None and high is not None:
        return f"integer {low}-{high}"
    return kind
