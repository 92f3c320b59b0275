"""`memlane run codex|claude [ARGS…]`: the agent through memlane, no file touched.

The proxy running on this home is used (`serve.json`); with none, one is started in
the background (its output in `<home>/serve.log`) and keeps running after the agent
exits. The agent is then executed in this process's place with memlane's address
and MCP server given the way each one takes them on the command line: Codex as `-c`
overrides, Claude Code as `ANTHROPIC_BASE_URL` and `--mcp-config`.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Annotated

import typer

from memlane.cli import clients
from memlane.cli.context import err_console, fail, state
from memlane.cli.running import (
    Running,
    home_options,
    installed_memlane,
    running_proxy,
    start_proxy,
)

app = typer.Typer(
    help="Start Codex or Claude Code through memlane (starting the proxy if none runs).",
    no_args_is_help=True,
)

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
ArgsOpt = Annotated[
    list[str] | None, typer.Argument(help="Passed to the agent as they are.", show_default=False)
]


def codex_arguments(wiring: clients.Wiring) -> list[str]:
    """`-c` overrides that make Codex use memlane as its provider and MCP server."""
    name = clients.SERVER_NAME
    values: dict[str, object] = {"model_provider": name}
    values |= {f"model_providers.{name}.{k}": v for k, v in clients.codex_provider(wiring).items()}
    values |= {f"mcp_servers.{name}.{k}": v for k, v in clients.mcp_entry(wiring).items()}
    arguments: list[str] = []
    for key, value in values.items():
        arguments += ["-c", f"{key}={json.dumps(value)}"]
    return arguments


def claude_mcp_config(wiring: clients.Wiring) -> str:
    return json.dumps({"mcpServers": {clients.SERVER_NAME: clients.claude_mcp_value(wiring)}})


@app.command("codex", context_settings=PASS_THROUGH)
def codex(ctx: typer.Context, args: ArgsOpt = None) -> None:
    """Run `codex ARGS…` with memlane as its model provider and MCP server."""
    wiring = _wiring(ctx, _proxy(ctx))
    _exec("codex", [*codex_arguments(wiring), *(args or [])], {})


@app.command("claude", context_settings=PASS_THROUGH)
def claude(ctx: typer.Context, args: ArgsOpt = None) -> None:
    """Run `claude ARGS…` with ANTHROPIC_BASE_URL at memlane and memlane's MCP server."""
    proxy = _proxy(ctx)
    _warn_if_unreachable(ctx, proxy)
    wiring = _wiring(ctx, proxy)
    env = {"ANTHROPIC_BASE_URL": wiring.base_url}
    # last: --mcp-config takes several values, and would swallow a prompt after it
    _exec("claude", [*(args or []), "--mcp-config", claude_mcp_config(wiring)], env)


def _proxy(ctx: typer.Context) -> Running:
    cli = state(ctx)
    found = running_proxy(cli.settings)
    if found is not None:
        return found
    err_console.print(f"memlane: starting the proxy for {cli.settings.home_path}", highlight=False)
    try:
        return start_proxy(cli.settings, cli.config_file)
    except RuntimeError as exc:
        fail(str(exc))


def _warn_if_unreachable(ctx: typer.Context, proxy: Running) -> None:
    """Claude Code retries a 502 for a minute and a half: say at once when the proxy's
    Anthropic upstream does not answer, and how to fix it."""
    if not proxy.anthropic_upstream_url:
        return
    from memlane.proxy.startup import probe_anthropic

    settings = state(ctx).settings.model_copy(
        update={"anthropic_upstream_url": proxy.anthropic_upstream_url}
    )
    probe = probe_anthropic(settings)
    if not probe.ok:
        err_console.print(
            f"[yellow]warning:[/] the proxy's Anthropic upstream {proxy.anthropic_upstream_url} "
            f"{probe.detail}: Claude Code will get 502s; restart the proxy with "
            "`memlane serve --anthropic-upstream URL` (or `memlane config set "
            "anthropic_upstream_url URL`)",
            highlight=False,
            soft_wrap=True,
        )


def _wiring(ctx: typer.Context, proxy: Running) -> clients.Wiring:
    key_env = "OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None
    options = home_options(state(ctx).settings.home_path, state(ctx).config_file)
    return clients.Wiring(proxy.url, installed_memlane(), key_env, options)


def _exec(agent: str, arguments: list[str], env: dict[str, str]) -> None:
    binary = shutil.which(agent)
    if binary is None:
        fail(f"`{agent}` is not on PATH: install it first, or put its folder on PATH")
    os.execve(binary, [agent, *arguments], {**os.environ, **env})
