"""Every secret spelling of the corpus is redacted, every look-alike survives unchanged,
and memlane's own LLM calls carry no credential (the one place they all pass)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlane.text import secret_detectors
from memlane.text.llm import OWN_CALL_HEADER, OpenAICompatibleLLM
from memlane.text.llm_anthropic import AnthropicLLM
from memlane.text.redact import redact, redact_fields, redact_message
from tests.support.anthropic_upstream import ScriptedAnthropic, Turn
from tests.support.upstream import Reply, ScriptedUpstream

CORPUS = json.loads((Path(__file__).parent / "data" / "redaction_corpus.json").read_text())
SECRETS: list[dict[str, str]] = CORPUS["secrets"]
LOOK_ALIKES: list[str] = CORPUS["look_alikes"]


def test_the_corpus_is_large_enough_to_mean_something() -> None:
    assert len(SECRETS) >= 50
    assert len(LOOK_ALIKES) >= 50


@pytest.mark.parametrize("item", SECRETS, ids=[s["text"][:40] for s in SECRETS])
def test_every_secret_spelling_is_redacted(item: dict[str, str]) -> None:
    done = redact(item["text"])
    assert item["secret"] not in done
    assert "[redacted " in done
    assert redact(done) == done  # redacting again changes nothing


@pytest.mark.parametrize("text", LOOK_ALIKES, ids=[t[:40] for t in LOOK_ALIKES])
def test_every_look_alike_survives_unchanged(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DATABASE_PASSWORD=hunter2secret", "DATABASE_PASSWORD=[redacted secret]"),
        ("GITHUB_TOKEN=abcdef0123456789", "GITHUB_TOKEN=[redacted secret]"),
        ("PGPASSWORD=s3cr3tpw psql", "PGPASSWORD=[redacted secret] psql"),
        ("curl -u admin:hunter22 https://x", "curl -u admin:[redacted user-password] https://x"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [redacted authorization]"),
        ("log: Basic dXNlcjpwYXNzd29yZA== sent", "log: Basic [redacted basic-auth] sent"),
        ("redis://:redispass123@cache:6379", "redis://:[redacted url-password]@cache:6379"),
    ],
)
def test_names_and_users_stay_the_values_go(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_the_detect_secrets_detectors_are_in_use() -> None:
    # memlane's own rules know no Slack webhook: this one is detect-secrets' SlackDetector
    url = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    assert redact(f"post to {url} now") == "post to [redacted slack-token] now"
    kinds = {d.kind for d in secret_detectors.load()}
    assert {"aws-access-key", "github-token", "private-key", "secret-keyword"} <= kinds
    assert not [k for k in kinds if "entropy" in k]  # they flag commit hashes


def test_a_secret_deep_in_a_long_single_line_is_found() -> None:
    # minified JSON: detectors run around each trigger, not over the whole line
    url = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    line = '{"a": "' + "x" * 50_000 + f" {url} " + "y" * 50_000 + '", "eyJ": 1}'
    done = redact(line)
    assert "XXXXXXXXXXXXXXXXXXXXXXXX" not in done
    assert done == line.replace(url, "[redacted slack-token]")


def test_a_secret_on_one_line_never_spreads_to_the_next() -> None:
    text = 'password = "hunter2"\nsome "quoted" words stay'
    assert redact(text) == 'password = [redacted secret]\nsome "quoted" words stay'


def test_messages_and_model_written_fields_are_redacted() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "PGPASSWORD=s3cr3tpw"}]}
    assert redact_message(message)["content"][0]["text"] == "PGPASSWORD=[redacted secret]"
    fields: dict[str, Any] = {"summary": "key DATABASE_PASSWORD=hunter2x", "tags": ["x"], "n": 1}
    assert redact_fields(fields) == {
        "summary": "key DATABASE_PASSWORD=[redacted secret]",
        "tags": ["x"],
        "n": 1,
    }


@pytest.mark.parametrize("size", [100, 40_000])  # inline, and in a worker thread
async def test_an_openai_compatible_call_carries_no_credential(
    upstream: ScriptedUpstream, size: int
) -> None:
    upstream.script(Reply(text="ok"))
    llm = OpenAICompatibleLLM(upstream.url, api_key="k", default_model="m")
    said = "x" * size + "\nAZURE_CLIENT_SECRET=abc~def123.xyzQRS"
    await llm.complete(
        [{"role": "system", "content": "Sum up."}, {"role": "user", "content": said}]
    )
    sent = upstream.last
    assert b"abc~def123.xyzQRS" not in sent.body
    assert sent.messages[1]["content"].endswith("AZURE_CLIENT_SECRET=[redacted secret]")
    assert sent.headers[OWN_CALL_HEADER] == "1"


async def test_an_anthropic_call_carries_no_credential(
    anthropic_upstream: ScriptedAnthropic,
) -> None:
    anthropic_upstream.script(Turn(text="ok"))
    llm = AnthropicLLM(anthropic_upstream.base, api_key="k", default_model="claude")
    await llm.complete(
        [
            {"role": "system", "content": "client_secret: 8Q~wXyZ.abc123"},
            {"role": "user", "content": "x"},
        ]
    )
    sent = anthropic_upstream.last
    assert sent.json["system"] == "client_secret: [redacted secret]"
    assert sent.headers[OWN_CALL_HEADER] == "1"


async def test_the_chat_stream_is_no_own_call(upstream: ScriptedUpstream) -> None:
    upstream.script(Reply(text="hi"))
    llm = OpenAICompatibleLLM(upstream.url, api_key="k")
    async for _ in llm.stream([{"role": "user", "content": "Hi"}], model="m"):
        pass
    assert OWN_CALL_HEADER not in upstream.last.headers  # `memlane chat` is a client
