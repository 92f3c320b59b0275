"""Known credential shapes are redacted; ordinary text is left alone."""

from __future__ import annotations

import pytest

from memlane.text.redact import redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-live-abcdefghijklmnopqrstuvwx here", "key [redacted openai-key] here"),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "[redacted anthropic-key]"),
        ("api_key=sk-proj-abcdefghijklmnopqrstuvwx", "api_key=[redacted openai-key]"),
        ("AKIAIOSFODNN7EXAMPLE", "[redacted aws-access-key]"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[redacted github-token]"),
        ("password: correct-horse", "password: [redacted secret]"),
        ('export API_KEY="abc123def456"', "export API_KEY=[redacted secret]"),
        (
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz12",
            "Authorization: [redacted bearer-token]",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            "[redacted private-key]",
        ),
    ],
)
def test_credentials_are_redacted_by_kind(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The user prefers tabs and token economics",
        "Deploys go through staging-7 at 09:00",
        "password reset links expire after one day",
        "skip the sk step",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text
