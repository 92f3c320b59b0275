"""Credentials never become memories: known key shapes are replaced before anything is kept.

A user pastes `api_key=sk-live-…` into a conversation; the session transcript keeps it
verbatim (the client resends it anyway), but nothing memlane writes on its own (facts,
remembered turns, their Markdown files, git, the search index) and nothing it sends
to its own LLM calls may carry it. Each pattern names the kind it redacts:
`[redacted openai-key]`. The patterns follow the shapes providers document for their
keys, plus the generic `secret = value` assignment.
"""

from __future__ import annotations

import re

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S
        ),
    ),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{20,}")),
    ("stripe-key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{20,}")),
    # `password = hunter2`, `api_key: "abc…"`, `TOKEN=…` (the name stays, the value goes)
    (
        "secret",
        re.compile(
            r"(?i)\b((?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|token|"
            r"password|passwd|pwd)\s*[:=]\s*)(['\"]?)(?!\[redacted)([^\s'\"]{6,})\2"
        ),
    ),
)


def redact(text: str) -> str:
    """`text` with every credential-shaped span replaced by `[redacted <kind>]`."""
    for kind, pattern in PATTERNS:
        if kind == "secret":
            text = pattern.sub(lambda m: f"{m.group(1)}[redacted secret]", text)
        else:
            text = pattern.sub(f"[redacted {kind}]", text)
    return text
