"""What PostgreSQL refuses that SQLite takes: NUL characters and non-finite numbers.

A client may send `"\\u0000"` in a message, or `NaN` in a field memlane keeps as
JSON; SQLite stores both, PostgreSQL refuses the whole statement (a text value
cannot hold NUL, `jsonb` neither NUL nor `NaN` / `Infinity`), which would turn
a request into a store error. Every connection of the pool is configured here
so that such values are stored as U+FFFD (a NUL) and null (a non-finite number):
the one place, for every statement.
"""

from __future__ import annotations

import json
import math
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.types.json import set_json_dumps
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

NUL = "\x00"
REPLACEMENT = "\ufffd"


class _TextDumper(StrDumperUnknown):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace(NUL, REPLACEMENT) if NUL in obj else obj)


class _BinaryTextDumper(StrBinaryDumper):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace(NUL, REPLACEMENT) if NUL in obj else obj)


def storable(value: Any) -> Any:
    """`value` (decoded JSON) with NUL in its strings replaced and non-finite floats as None.

    Iterative, not recursive: a value as deep as JSON decoding allows must not
    exhaust the stack of the thread that stores it.
    """
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, str):
            if NUL in item:
                parent[key] = item.replace(NUL, REPLACEMENT)
        elif isinstance(item, float):
            if not math.isfinite(item):
                parent[key] = None
        elif isinstance(item, dict):
            copy = {
                (k.replace(NUL, REPLACEMENT) if isinstance(k, str) else k): v
                for k, v in item.items()
            }
            parent[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(item, (list, tuple)):
            copy_list = list(item)
            parent[key] = copy_list
            stack.extend((copy_list, i) for i in range(len(copy_list)))
    return root[0]


def dumps(value: Any) -> str:
    """JSON text `jsonb` accepts; the common case is one `json.dumps`."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except ValueError:  # NaN or Infinity somewhere
        return json.dumps(storable(value), allow_nan=False, ensure_ascii=False)
    if "\\u0000" in text:
        return json.dumps(storable(value), allow_nan=False, ensure_ascii=False)
    return text


def configure(conn: psycopg.Connection[Any]) -> None:
    """Make every text and JSON value this connection sends one PostgreSQL stores."""
    conn.adapters.register_dumper(str, _TextDumper)
    conn.adapters.register_dumper(str, _BinaryTextDumper)
    set_json_dumps(dumps, conn)
