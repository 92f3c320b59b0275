"""`memlane serve`'s start-up report probes both upstreams and says what to fix."""

from __future__ import annotations

import socket
from pathlib import Path

from memlane.config import Settings
from memlane.proxy.startup import probe_both, report
from tests.support.upstream import ScriptedUpstream


def dead_url() -> str:
    """A loopback address nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_dead_anthropic_upstream_is_named_with_the_fix(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    dead = dead_url()
    settings = Settings(home=tmp_path, upstream_url=upstream.url, anthropic_upstream_url=dead)
    probes = probe_both(settings, timeout=2)
    assert probes.openai.ok
    assert probes.openai.models == ScriptedUpstream.MODELS
    assert not probes.anthropic.ok

    lines = report(settings, probes.openai, config_file=None, anthropic=probes.anthropic)
    anthropic_line = next(line for line in lines if line.startswith("  anthropic"))
    assert dead in anthropic_line
    assert "is not reachable" in anthropic_line
    warnings = [line for line in lines if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "Anthropic upstream" in warnings[0]
    assert "--anthropic-upstream" in warnings[0]
