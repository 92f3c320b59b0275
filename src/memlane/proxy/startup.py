"""What `memlane serve` tells the user once it listens: where, to what, with which parts.

A newcomer's first question is "is it working?". The report answers it before the
first request: the address, whether each upstream (OpenAI-compatible and Anthropic)
answered a probe (and what to do if not), the store, the embedder, memory on or off,
and where the config lives. The OpenAI-compatible upstream's model list also states
its models' windows, when its server knows them (`governance.budget`); they are kept.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from memlane.config import Settings
from memlane.engine.governance.budget import windows_in_model_list
from memlane.files.admin_token import token_path
from memlane.text.factory import own_llm_credential_source

PROBE_TIMEOUT = 2.0
PROBE_PATH = "/models"
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Probe:
    """What an upstream said to `GET {base}/models`; `ok` is False only when it is unusable."""

    ok: bool
    detail: str
    windows: dict[str, int] = field(default_factory=dict)
    """The windows its model list states (`governance.budget.windows_in_model_list`)."""
    models: tuple[str, ...] = ()
    """The model ids it listed."""


@dataclass(frozen=True)
class Probes:
    """Both upstreams' answers: the OpenAI-compatible one and the Anthropic one."""

    openai: Probe
    anthropic: Probe


def probe_upstream(settings: Settings, *, timeout: float = PROBE_TIMEOUT) -> Probe:
    """Ask the OpenAI-compatible upstream for its models once; never raises."""
    headers = {}
    key = settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else ""
    if key:
        headers["authorization"] = f"Bearer {key}"
    url = settings.upstream_url.rstrip("/") + PROBE_PATH
    return probe(url, headers, key_setting="MEMLANE_UPSTREAM_API_KEY", timeout=timeout)


def probe_anthropic(settings: Settings, *, timeout: float = PROBE_TIMEOUT) -> Probe:
    """Ask the Anthropic upstream for its models once (`/v1/models`); never raises."""
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else ""
    if key:
        headers["x-api-key"] = key
    url = settings.anthropic_upstream_url.rstrip("/") + "/v1" + PROBE_PATH
    return probe(url, headers, key_setting="MEMLANE_ANTHROPIC_API_KEY", timeout=timeout)


def probe_both(settings: Settings, *, timeout: float = PROBE_TIMEOUT) -> Probes:
    """Both probes at once: start-up waits for the slower one only."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="memlane-probe") as pool:
        openai = pool.submit(probe_upstream, settings, timeout=timeout)
        anthropic = pool.submit(probe_anthropic, settings, timeout=timeout)
        return Probes(openai.result(), anthropic.result())


def probe(url: str, headers: dict[str, str], *, key_setting: str, timeout: float) -> Probe:
    """`GET url`: whether it answers, what it lists; an unreachable one is not ok."""
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            response = client.get(url, headers=headers)
    except httpx.TimeoutException:
        return Probe(False, f"did not answer within {timeout:g} s")
    except httpx.HTTPError as exc:
        return Probe(False, f"is not reachable ({_reason(exc)})")
    status = response.status_code
    if status < 400:
        payload = _json(response)
        return Probe(
            True,
            f"answered ({_model_count(payload)})",
            windows=windows_in_model_list(payload),
            models=_model_ids(payload),
        )
    if status in (401, 403):
        return Probe(
            True, f"answered {status}: it wants a key; clients send theirs, or set {key_setting}"
        )
    return Probe(True, f"answered {status} to {PROBE_PATH} (some servers have no such route)")


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:120]


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def _model_count(payload: object) -> str:
    if not isinstance(payload, dict):
        return "a reply that is not a model list"
    data = payload.get("data")
    return f"{len(data)} models" if isinstance(data, list) else "no model list"


def _model_ids(payload: object) -> tuple[str, ...]:
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return ()
    return tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))


def redact_url(url: str) -> str:
    """A URL fit to print: any password in it replaced."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def report(
    settings: Settings,
    probe: Probe,
    *,
    config_file: Path | None,
    anthropic: Probe | None = None,
) -> list[str]:
    """The lines printed after binding: facts first, then what to fix."""
    base = f"http://{settings.host}:{settings.port}/v1"
    store = redact_url(settings.store_url) if settings.store_url else str(settings.database_path)
    config = config_file or settings.home_path / "config.toml"
    config_note = "" if config.exists() else " (none yet; optional)"
    lines = [
        f"memlane proxy listening on {base}",
        f"  upstream  {settings.upstream_url} {probe.detail}",
        f"  anthropic {settings.anthropic_upstream_url} "
        + (anthropic.detail if anthropic else "(for /v1/messages)"),
        f"  store     {store}",
        *([f"  workers   {_workers(settings)}"] if settings.workers > 1 else []),
        f"  memory    {_memory(settings)}",
        f"  own calls key from {own_llm_credential_source(settings)}",
        f"  config    {config}{config_note}",
        f"  admin     {_admin(settings)}",
        *(
            [f"  inspector http://{settings.host}:{settings.port}/ui (log in with the admin token)"]
            if settings.ui_enabled
            else []
        ),
        f"  clients   export OPENAI_BASE_URL={base}",
        f"            export ANTHROPIC_BASE_URL=http://{settings.host}:{settings.port}",
    ]
    if settings.mcp_enabled:
        mcp = f"http://{settings.host}:{settings.port}/mcp"
        lines.append(f"  mcp       {mcp} (streamable HTTP, the admin token; or `memlane mcp`)")
    if not probe.ok:
        lines.append(
            f"warning: the upstream {probe.detail}: requests will fail with 502 until it "
            "runs; start it (e.g. `ollama serve`) or set MEMLANE_UPSTREAM_URL / --upstream"
        )
    if anthropic is not None and not anthropic.ok:
        lines.append(
            f"warning: the Anthropic upstream {anthropic.detail}: Claude Code's requests will "
            "fail with 502; set MEMLANE_ANTHROPIC_UPSTREAM_URL / --anthropic-upstream (ignore "
            "this if no Anthropic client uses memlane)"
        )
    return lines


def _workers(settings: Settings) -> str:
    return (
        f"{settings.workers} processes on this port; worker 0 keeps the memory files in step, "
        "a worker that dies is restarted"
    )


def _admin(settings: Settings) -> str:
    if settings.admin_token is not None and settings.admin_token.get_secret_value():
        return "token from MEMLANE_ADMIN_TOKEN"
    return f"token in {token_path(settings.home_path)} (for /v1/memlane/ and memlane status)"


def _memory(settings: Settings) -> str:
    if not settings.memory_enabled:
        return "off (MEMLANE_MEMORY_ENABLED=false)"
    return f"on, embedder {settings.embedding_backend}, files under {settings.home_path}"
