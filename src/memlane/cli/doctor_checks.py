"""`memlane doctor`'s look outside memlane: the upstreams, their keys, and the windows.

- each upstream (OpenAI-compatible, Anthropic) is probed now (`GET …/models`), and
  whether a key is configured for it is said, never the key;
- the upstream errors recent turns met are read from the store (every process's,
  not only a running proxy's), grouped by upstream and kind, each with its fix;
- the window each recent model was governed with, and where it came from.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memlane.config import LoadedSettings, Settings
from memlane.engine.turnlog import TURN_EVENT
from memlane.proxy.startup import Probe, probe_anthropic, probe_upstream
from memlane.store import Store

WINDOW_SOURCES = {
    "config": "configured (governance_context_windows)",
    "learned": "learned from an upstream overflow error",
    "upstream": "stated by the upstream's model list",
    "table": "memlane's built-in table",
    "default": "assumed (governance_default_window): the model is unknown",
}


@dataclass
class Findings:
    upstreams: list[dict[str, Any]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)


def check_outside(loaded: LoadedSettings, store: Store | None, sessions: int) -> Findings:
    """What is wrong around memlane; `store` None when there is none yet (no recent turns)."""
    found = Findings()
    settings = loaded.settings
    turns = recent_turns(store, sessions) if store is not None else []
    anthropic_used = any(t.get("wire") == "anthropic" for t in turns)
    for name, probe, url, key, variable in (
        (
            "upstream",
            probe_upstream(settings),
            settings.upstream_url,
            "upstream_api_key",
            "UPSTREAM",
        ),
        (
            "anthropic",
            probe_anthropic(settings),
            settings.anthropic_upstream_url,
            "anthropic_api_key",
            "ANTHROPIC_UPSTREAM",
        ),
    ):
        found.upstreams.append(_upstream(name, url, probe, key, loaded))
        relevant = (
            name == "upstream"
            or anthropic_used
            or loaded.sources.get(f"{variable.lower()}_url") != "default"
        )
        if not probe.ok and relevant:
            found.problems.append(_unreachable(name, url, probe, variable))
    found.problems += upstream_errors(turns, settings)
    found.windows = windows(turns)
    for window in found.windows:
        if window["source"] == "default":
            found.problems.append(_unknown_window(window))
    return found


def recent_turns(store: Store, sessions: int) -> list[dict[str, Any]]:
    """The `turn` events of the most recently active sessions, newest first."""
    turns: list[tuple[str, dict[str, Any]]] = []
    for session in store.list_sessions(limit=sessions, tenant=None):
        for event in store.list_events(session.id, kind=TURN_EVENT, limit=50):
            turns.append((str(event.created_at), dict(event.payload)))
    turns.sort(key=lambda pair: pair[0], reverse=True)
    return [payload | {"at": at} for at, payload in turns]


def windows(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, the window its newest governed turn used."""
    seen: dict[str, dict[str, Any]] = {}
    for turn in turns:
        model = str(turn.get("model") or "")
        if model and model not in seen and "window" in turn:
            source = str(turn.get("window_source", ""))
            seen[model] = {
                "model": model,
                "window": turn["window"],
                "source": source,
                "from": WINDOW_SOURCES.get(source, source),
                "at": turn["at"],
            }
    return list(seen.values())


_STATUS = re.compile(r" answered (\d{3}):")


def upstream_errors(turns: list[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """Failed turns' upstream errors, grouped by upstream and kind, newest error kept."""
    counts: Counter[tuple[str, str]] = Counter()
    last: dict[tuple[str, str], str] = {}
    for turn in turns:
        error = str(turn.get("error") or "")
        if turn.get("status") != "failed" or not error:
            continue
        base = error.split(" answered ", 1)[0].split(" could not ", 1)[0]
        base = base.removeprefix("the upstream at ")
        status = _STATUS.search(error)
        key = (base, status.group(1) if status else "unreachable")
        counts[key] += 1
        last.setdefault(key, error)
    return [
        {
            "stage": "upstream",
            "type": kind,
            "count": n,
            "last_error": last[(base, kind)],
            "advice": _error_advice(base, kind, settings),
        }
        for (base, kind), n in counts.most_common()
    ]


def _error_advice(base: str, kind: str, settings: Settings) -> str:
    anthropic = base.rstrip("/").startswith(settings.anthropic_upstream_url.rstrip("/"))
    where = "MEMLANE_ANTHROPIC_UPSTREAM_URL" if anthropic else "MEMLANE_UPSTREAM_URL"
    key = "anthropic_api_key_env" if anthropic else "upstream_api_key_env"
    return {
        "unreachable": f"start the model server, or point memlane at it: {where} "
        f"(`memlane config set {where.removeprefix('MEMLANE_').lower()} URL`)",
        "401": f"the upstream refused the key: let the client send its own, or `memlane config "
        f"set {key} VARIABLE` naming the variable that holds one",
        "403": "the key may not use this model or route: check the key's permissions",
        "404": "no such model or route: check the model name (`memlane init` lists the "
        "upstream's models) and that the URL ends where the API begins (…/v1)",
        "429": "rate limited or out of quota at the upstream: wait, or raise the limit",
        "400": "the upstream refused the request: if it was too long, memlane has learned the "
        "window (see the windows above); else the message says what it wants",
    }.get(kind, "see the upstream's message; `memlane serve`'s log has the whole exchange")


def _upstream(
    name: str, url: str, probe: Probe, key: str, loaded: LoadedSettings
) -> dict[str, Any]:
    secret = getattr(loaded.settings, key)
    configured = secret is not None and bool(secret.get_secret_value())
    return {
        "name": name,
        "url": url,
        "ok": probe.ok,
        "detail": probe.detail,
        "models": len(probe.models),
        "key": f"set ({loaded.sources.get(key, '')})"
        if configured
        else "not set (clients send theirs)",
    }


def _unreachable(name: str, url: str, probe: Probe, variable: str) -> dict[str, Any]:
    label = "the Anthropic upstream" if name == "anthropic" else "the upstream"
    flag = "--anthropic-upstream" if name == "anthropic" else "--upstream"
    setting = f"{variable.lower()}_url"
    return {
        "stage": name,
        "type": "unreachable",
        "count": 1,
        "last_error": f"{label} {url} {probe.detail}",
        "advice": f"start it, or point memlane at the right one: `memlane config set {setting} "
        f"URL` (or MEMLANE_{variable}_URL, or `memlane serve {flag} URL`)"
        + ("; Claude Code's requests fail with 502 until then" if name == "anthropic" else ""),
    }


def _unknown_window(window: dict[str, Any]) -> dict[str, Any]:
    model = window["model"]
    return {
        "stage": "governance",
        "type": "unknown window",
        "count": 1,
        "last_error": f"{model} was governed with the assumed window of {window['window']:,}",
        "advice": f"if its window is known, `memlane config set governance_context_windows "
        f"{model}=TOKENS`; an overflow error from the upstream also teaches it",
    }
