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
        ("gsk_" + "a1B2c3D4" * 6 + "e5F6", "[redacted groq-key]"),
        ("xai-" + "a1B2c3D4" * 10, "[redacted xai-key]"),
        ("pplx-" + "a1B2c3D4" * 6, "[redacted perplexity-key]"),
        ("r8_" + "a1B2c3D4" * 4 + "e5F6G", "[redacted replicate-token]"),
    ],
)
def test_the_shapes_secret_scanners_know_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting again changes nothing


def test_credentials_written_in_prose_are_redacted() -> None:
    """QA's message: the AWS secret and the password reached facts, memory files, git and
    the extraction prompts."""
    said = (
        "my key is sk-proj-" + "a1B2c3D4" * 4 + " and my aws key is AKIAIOSFODNN7EXAMPLE"
        " with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYZZ. my password is"
        " correct-horse-battery-staple-77"
    )
    assert redact(said) == (
        "my key is [redacted openai-key] and my aws key is [redacted aws-access-key]"
        " with secret [redacted secret]. my password is [redacted secret]"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the db password is Xk9#mq2Lp, ok?", "the db password is [redacted secret], ok?"),
        ("pw=hunter2hunter", "pw=[redacted secret]"),
        ("PW: S3cretPW", "PW: [redacted secret]"),
        ("passwd Sup3rS3cret!", "passwd [redacted secret]!"),
        ("ssh admin@db with password Adm1nPass", "ssh admin@db with password [redacted secret]"),
        ("the password for root is 'N3w!pw'.", "the password for root is '[redacted secret]'."),
        ("password was changed to N3wPass!x", "password was changed to [redacted secret]"),
        ("my password is 19840312", "my password is [redacted secret]"),
        ("the passphrase is correcthorsebatterystaple", "the passphrase is [redacted secret]"),
        ("my api key is " + "7c4e1a9b" * 4, "my api key is [redacted secret]"),
        ("the API_KEY is " + "7c4e1a9b" * 4, "the API_KEY is [redacted secret]"),
        ("the secret is " + "9b8a7c6d" * 4, "the secret is [redacted secret]"),
        (
            "my aws secret access key is je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
            "my aws secret access key is [redacted secret]",
        ),
        ("my token is " + "0a1b2c3d" * 4, "my token is [redacted secret]"),
        ("DB_PW=pgpw2024x", "DB_PW=[redacted secret]"),
        ("İ: the password is Xk9#mq2Lp", "İ: the password is [redacted secret]"),  # İ lowers to 2
    ],
)
def test_a_credential_told_by_name_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(
    "text",
    [
        "my password is long enough",
        "the key is to rest",
        "the secret is patience",
        "password is required",
        "the password is case-sensitive",
        "the password is sha256-hashed",
        "the password for root is in the vault",
        "the cache key is 3f2a9c4b1d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",  # whose key: not said
        "the idempotency key is 550e8400-e29b-41d4-a716-446655440000",
        "my ssh key is ~/.ssh/id_ed25519",
        "the access token is short-lived",
        "the api key is $OPENAI_API_KEY",
        "the secret is GitHub Actions",
        "with secret agent 007",
        "if password is None:",
        "self.api_key is None",
        "password = get_password()",
    ],
)
def test_prose_about_credentials_is_untouched(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql -u root -pS3cret", "mysql -u root -p[redacted cli-password]"),
        ("mysqldump -uroot -p'S3 cret' db", "mysqldump -uroot -p[redacted cli-password] db"),
        ("mariadb -u app -pApp2024 shop", "mariadb -u app -p[redacted cli-password] shop"),
        ("sshpass -p 'hunter2x' ssh root@h", "sshpass -p [redacted cli-password] ssh root@h"),
        ("redis-cli -h c -a R3disPass ping", "redis-cli -h c -a [redacted cli-password] ping"),
        ("mysql -u root -p mydb", "mysql -u root -p mydb"),  # asks for it: `mydb` is a database
        ("mysql -u root -P 3306 app", "mysql -u root -P 3306 app"),
        ("mysql -u root -p$MYSQL_PWD app", "mysql -u root -p$MYSQL_PWD app"),
        ("redis-cli -h cache -p 6379 ping", "redis-cli -h cache -p 6379 ping"),
    ],
)
def test_a_password_on_a_command_line_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected


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
