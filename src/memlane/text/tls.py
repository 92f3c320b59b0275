"""One TLS context per process for memlane's own HTTP clients.

Building a default context loads the CA bundle: ~20 ms of CPU. memlane's LLM and
rerank clients are opened per call (a client bound to no event loop serves the
proxy, the CLI and tests alike), so without a shared context every background
LLM call paid it; under load that was most of the proxy's CPU.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def ssl_context() -> ssl.SSLContext:
    import httpx  # here, not at the top: a CLI command that calls no one never loads it

    return httpx.create_ssl_context()
