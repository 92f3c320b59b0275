"""Credentials never become memories: known key shapes are replaced before anything is kept.

A user pastes `api_key=sk-live-…` into a conversation; the session transcript keeps it
verbatim (the client resends it anyway), but nothing memlane writes on its own (facts,
remembered turns, their Markdown files, git, the search index) and nothing it sends
to its own LLM calls may carry it. Each pattern names the kind it redacts:
`[redacted openai-key]`. The patterns follow the shapes providers document for their
keys, plus the generic `secret = value` assignment and a password in a URL.

Why patterns of our own rather than a secret scanner's: `detect-secrets` 1.5.0 (last
release 2024-05) and its maintained fork `bc-detect-secrets` 1.5.52 were tried on this
machine. They install offline, but take 1.0–1.4 s to import their plugins, pull
`requests` in, find neither OpenAI project keys (`sk-proj-…`, `sk-live-…`) nor
Anthropic keys, and several of their detectors report only a token's prefix
(`ghp`, `glpat`), not the span to replace; their entropy detectors, made for code,
flag every word of ordinary prose. The shapes their regular-expression plugins know
are covered here (AWS, GitHub, GitLab, Slack, Stripe, npm, PyPI, SendGrid, Twilio,
Mailchimp, Discord, Telegram, Square, Azure storage, JWT, private keys, basic auth),
checked one by one in `tests/text/test_redact.py`; a new provider's shape is one line.
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
    ("gitlab-token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|oas|imt|soat)-[A-Za-z0-9_\-]{20,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b")),
    ("twilio-key", re.compile(r"\b(?:AC|SK)[0-9a-f]{32}\b")),
    ("mailchimp-key", re.compile(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b")),
    (
        "discord-token",
        re.compile(r"\b[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}"),
    ),
    ("telegram-token", re.compile(r"\b[0-9]{8,10}:AA[0-9A-Za-z_\-]{33}\b")),
    ("square-token", re.compile(r"\bsq0(?:atp|csp)-[0-9A-Za-z_\-]{22,43}")),
    ("azure-storage-key", re.compile(r"(?i)(?<=AccountKey=)[A-Za-z0-9+/]{86}==")),
    # `https://user:password@host` (the user stays, the password goes)
    ("url-password", re.compile(r"(?i)(?<=://)([^\s:/@]+:)(?!\[redacted)[^\s@/]+(?=@)")),
    # `password = hunter2`, `api_key: "abc…"`, `TOKEN=…` (the name stays, the value goes)
    (
        "secret",
        re.compile(
            r"(?i)\b((?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|token|"
            r"password|passwd|pwd)['\"]?\s*[:=]\s*)(['\"]?)(?!\[redacted)([^\s'\"]{6,})\2"
        ),
    ),
)


KEEPS_PREFIX = frozenset({"secret", "url-password"})
"""Kinds whose first group (the setting's name, the URL's user) is kept."""


def redact(text: str) -> str:
    """`text` with every credential-shaped span replaced by `[redacted <kind>]`."""
    for kind, pattern in PATTERNS:
        if kind in KEEPS_PREFIX:  # the name (or the user) stays
            text = pattern.sub(rf"\g<1>[redacted {kind}]", text)
        else:
            text = pattern.sub(f"[redacted {kind}]", text)
    return text
