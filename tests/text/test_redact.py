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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("glpat-abcdefghijklmnopqrst01", "[redacted gitlab-token]"),
        ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "[redacted npm-token]"),
        ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEy", "[redacted pypi-token]"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "[redacted huggingface-token]"),
        (
            "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ",
            "[redacted sendgrid-key]",
        ),
        ("AC0123456789abcdef0123456789abcdef", "[redacted twilio-key]"),
        ("0123456789abcdef0123456789abcdef-us12", "[redacted mailchimp-key]"),
        ("123456789:AAabcdefghijklmnopqrstuvwxyz0123456", "[redacted telegram-token]"),
        ("sq0atp-abcdefghijklmnopqrstuv", "[redacted square-token]"),
        (
            "DefaultEndpointsProtocol=https;AccountKey=" + "A" * 86 + "==;x",
            "DefaultEndpointsProtocol=https;AccountKey=[redacted azure-storage-key];x",
        ),
        (
            "psql postgresql://bob:hunter2hunter@db.example/app",
            "psql postgresql://bob:[redacted url-password]@db.example/app",
        ),
        ('{"api_key": "abc123def456"}', '{"api_key": [redacted secret]}'),
        ("my api_key=sk-live-abcdefghijklmnopqrstuvwx ok", "my api_key=[redacted openai-key] ok"),
    ],
)
def test_the_shapes_secret_scanners_know_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting again changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "see https://example.com/docs and http://localhost:8100/v1",
        "meet at 12:30, room 4",
        "the commit 0123456789abcdef0123456789abcdef0123 fixed it",
    ],
)
def test_urls_times_and_hashes_are_not_credentials(text: str) -> None:
    assert redact(text) == text


def test_a_text_redacted_again_is_not_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn's text is redacted for its memory entry, its extraction prompt and the
    session index's prompts within seconds; the detectors (~0.2 ms for a short turn)
    run once for it."""
    from memlane.text import redact as module

    scans: list[str] = []
    real = module._redact

    def counted(text: str) -> str:
        scans.append(text)
        return real(text)

    monkeypatch.setattr(module, "_redact", counted)
    module._remembered.cache_clear()
    text = "deploy with OPENAI_API_KEY=sk-proj-" + "a1B2c3D4" * 6 + " tonight"
    first, again = redact(text), redact(text)
    assert first == again == real(text)
    assert "[redacted" in first
    assert scans == [text]
    long = text + " " + "x" * module.REMEMBERED_CHARS  # too long to keep: scanned each time
    assert redact(long) == redact(long)
    assert scans == [text, long, long]


def test_the_detectors_look_for_their_shared_triggers_once_a_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plugin's expressions share its triggers: where they may match in a text is looked
    for once, not once per expression (most of what a long prompt's redaction cost), and
    what is found is the same."""
    from memlane.text import secret_detectors
    from memlane.text.secret_detectors import Detector

    text = (
        "User: my key is in the vault, password='hunter2-horse-battery'\n\n"
        "Assistant: the private key and the gl token stay out of the repo\n"
    ) * 20
    expected = sorted(secret_detectors.spans(text))
    looked: list[tuple[str, ...]] = []
    real = Detector.windows

    def counted(self: Detector, text: str, lowered: str) -> object:
        looked.append(self.triggers)
        return real(self, text, lowered)

    monkeypatch.setattr(Detector, "windows", counted)
    assert sorted(secret_detectors.spans(text)) == expected
    assert any(kind == "secret-keyword" for _, _, kind in expected)
    lowered = text.lower()
    held = {
        d.triggers
        for d in secret_detectors.load()
        if d.gate is None and any(t in (lowered if t.islower() else text) for t in d.triggers)
    }
    # a gate that finds nothing, or triggers the text does not hold: no windows looked for
    assert sorted(looked) == sorted(held)
    assert len(held) < len({d.triggers for d in secret_detectors.load()})
