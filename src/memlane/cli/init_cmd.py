"""`memlane init`: write the configuration every command reads, after trying it.

It asks for the upstreams and the names of the variables holding their keys (in a
terminal; with flags, `CI=true` or no terminal it never asks), probes each upstream's
model list, offers the models it found, and writes `config.toml` one key at a time
(`config.editing`), so a file the user wrote keeps its comments and other keys.
Keys themselves are never written: only the names of the variables that hold them.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from pydantic import SecretStr

from memlane.cli.config_cmd import config_path
from memlane.cli.context import console, fail, print_json, state
from memlane.cli.options import JsonOpt
from memlane.config import ConfigError, Settings
from memlane.config.editing import checked, parsed_value, set_key
from memlane.files.atomic import write_atomic
from memlane.proxy.startup import Probe, probe_anthropic, probe_upstream

ASKED = (
    ("upstream_url", "OpenAI-compatible upstream (Ollama, vLLM, OpenAI, a gateway)"),
    ("upstream_api_key_env", "variable holding its key (empty: none)"),
    ("anthropic_upstream_url", "Anthropic upstream, for Claude Code"),
    ("anthropic_api_key_env", "variable holding its key (empty: the client's own)"),
)


def interactive() -> bool:
    """A person at a terminal, and not a CI job: only then does `init` ask."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false")
    return sys.stdin.isatty() and not ci


def init(
    ctx: typer.Context,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="OpenAI-compatible base URL.")
    ] = None,
    upstream_key_env: Annotated[
        str | None,
        typer.Option("--upstream-key-env", help="Variable holding the upstream's key."),
    ] = None,
    anthropic_upstream: Annotated[
        str | None, typer.Option("--anthropic-upstream", help="Anthropic base URL (no /v1).")
    ] = None,
    anthropic_key_env: Annotated[
        str | None,
        typer.Option("--anthropic-key-env", help="Variable holding the Anthropic key."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model for memlane's own calls and chat.")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Ask nothing: flags and current values.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Set up memlane: ask for (or take) the upstreams, probe them, write config.toml."""
    path = config_path(ctx)
    current = state(ctx).loaded(lenient=True).settings
    given: dict[str, str | None] = {
        "upstream_url": upstream,
        "upstream_api_key_env": upstream_key_env,
        "anthropic_upstream_url": anthropic_upstream,
        "anthropic_api_key_env": anthropic_key_env,
    }
    ask = interactive() and not yes and not as_json
    answers = {key: _answer(key, label, given[key], current, ask=ask) for key, label in ASKED}
    trial = _trial(current, answers)
    probes = {"upstream": probe_upstream(trial), "anthropic": probe_anthropic(trial)}
    if not as_json:
        _report(trial, probes)
    chosen = model or _choose_model(probes["upstream"], current.llm_model, ask=ask)
    if chosen:
        answers["llm_model"] = chosen
    text = _written(path.read_text(encoding="utf-8") if path.exists() else "", answers, path)
    try:
        write_atomic(path, text, mode=0o600)
    except OSError as exc:
        fail(f"cannot write {path}: {exc}")
    if as_json:
        print_json(
            {
                "config_file": str(path),
                "written": {k: v for k, v in answers.items() if v},
                "probes": {
                    name: {"ok": p.ok, "detail": p.detail, "models": list(p.models)}
                    for name, p in probes.items()
                },
            }
        )
        return
    console.print(f"wrote {path}", highlight=False, soft_wrap=True)
    console.print(
        "next: `memlane serve`, then `memlane connect codex` / `memlane connect claude` "
        "(or `memlane run codex`); `memlane doctor` checks it all",
        highlight=False,
        soft_wrap=True,
    )


def _answer(key: str, label: str, given: str | None, current: Settings, *, ask: bool) -> str:
    if given is not None:
        return given.strip()
    value = getattr(current, key) or ""
    if not ask:
        return str(value)
    return str(typer.prompt(label, default=str(value), show_default=True)).strip()


def _trial(current: Settings, answers: dict[str, str]) -> Settings:
    """The settings the answers make, keys read from the variables they name."""
    update: dict[str, Any] = {}
    try:
        for key, value in answers.items():
            update[key] = parsed_value(key, value) if value else None
    except ConfigError as exc:
        fail(str(exc))
    for holder in ("upstream_api_key_env", "anthropic_api_key_env"):
        variable = update.get(holder)
        if variable and os.environ.get(variable):
            update[holder.removesuffix("_env")] = SecretStr(os.environ[variable])
    return current.model_copy(update={k: v for k, v in update.items() if v is not None})


def _report(trial: Settings, probes: dict[str, Probe]) -> None:
    for name, url in (
        ("upstream", trial.upstream_url),
        ("anthropic", trial.anthropic_upstream_url),
    ):
        probe = probes[name]
        mark = "ok" if probe.ok else "unreachable"
        console.print(f"{name:9} {url} {probe.detail} [{mark}]", highlight=False, soft_wrap=True)
        if probe.models:
            shown = ", ".join(probe.models[:12]) + (" …" if len(probe.models) > 12 else "")
            console.print(f"          models: {shown}", highlight=False, soft_wrap=True)


def _choose_model(probe: Probe, current: str | None, *, ask: bool) -> str | None:
    if not ask or not probe.models:
        return None
    default = current if current in probe.models else probe.models[0]
    answer = typer.prompt("model for memlane's own calls and `memlane chat`", default=default)
    return str(answer).strip() or None


def _written(text: str, answers: dict[str, str], path: Any) -> str:
    try:
        for key, value in answers.items():
            if value:
                text = set_key(text, key, parsed_value(key, value))
        return checked(text, path)
    except ConfigError as exc:
        fail(str(exc))
