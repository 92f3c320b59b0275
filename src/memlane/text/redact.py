"""Credentials never become memories: known key shapes are replaced before anything is kept.

A user pastes `api_key=sk-live-…` into a conversation; the session transcript keeps it
verbatim (the client resends it anyway), but nothing memlane writes on its own (facts,
remembered turns, their Markdown files, git, session metadata, the search index) and
nothing it sends to its own LLM calls may carry it. Each span is replaced by
`[redacted <kind>]`; an assignment keeps its name (`DATABASE_PASSWORD=[redacted secret]`),
a URL or `curl -u` keeps its user.

Two sets of rules, both precise (no entropy guesses: those flag commit hashes, UUIDs and
plain words):

- memlane's own (`RULES`, `BASIC`, `ASSIGNMENT` with `CREDENTIAL_NAME`, `TOLD`): the shapes
  providers document for their keys, including those detect-secrets does not know (OpenAI
  project keys, Anthropic, Hugging Face, Google, Groq, xAI), and assignments by name the
  way people write them in shells, `.env` files, YAML and JSON: `*SECRET*`, `*PASSWORD`,
  `*PASSWD`, `*_TOKEN`, `*_KEY`, `PGPASSWORD`, `client_secret:`, `Authorization: Basic …`,
  `curl -u user:pass`, `mysql -pS3cret`, `scheme://user:pass@host`; and in prose, `my
  password is X`, `with secret X`, `my api key is X`, where X must look like a
  credential (`the key is to rest` and `my password is long enough` stay);
- the regular-expression detectors of `detect-secrets` (`text.secret_detectors`), loaded
  on first use, each run only around the text its matches must contain.

The corpus in `tests/text/data/redaction_corpus.json` holds the spellings that must go
and the look-alikes that must stay; `benchmarks/redaction.py` prints recall, false
positives and the cost per KB.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from memlane.text import secret_detectors


@dataclass(frozen=True, slots=True)
class Rule:
    """One credential shape, the kind it is redacted as, and text any match contains."""

    kind: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]
    """A substring search for these (a lower-case one in the lower-cased text) decides
    whether the expression runs at all: most text holds none, and `in` costs far less."""
    keeps_prefix: bool = False
    """The first group (a header's name, a URL's user) stays."""
    gate: re.Pattern[str] | None = None
    """Where a trigger is common text (a period, `-u`, `://`): an expression every match
    also matches, far cheaper to search than the rule's own (it starts with text a
    search skips to), decides whether that one runs."""
    _lower: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _exact: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # sorted once: a turn's text is redacted for its entry, its prompts, its index
        object.__setattr__(self, "_lower", tuple(t for t in self.triggers if t.islower()))
        object.__setattr__(self, "_exact", tuple(t for t in self.triggers if not t.islower()))

    def redact(self, text: str, lowered: str) -> str:
        if not (_holds_any(self._lower, lowered) or _holds_any(self._exact, text)):
            return text
        if self.gate is not None and self.gate.search(text) is None:
            return text
        if self.keeps_prefix:
            return self.pattern.sub(rf"\g<1>[redacted {self.kind}]", text)
        return self.pattern.sub(f"[redacted {self.kind}]", text)


def _holds_any(triggers: tuple[str, ...], text: str) -> bool:
    """`any(t in text for t in triggers)` without a generator: a third of a short
    text's redaction was the generators of the rules' checks."""
    for trigger in triggers:  # noqa: SIM110 (see the docstring)
        if trigger in text:
            return True
    return False


RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY[A-Z ]*-----.*?"
            r"(?:-----END [A-Z ]*PRIVATE KEY[A-Z ]*-----|\Z)",
            re.S,
        ),
        ("PRIVATE KEY",),
    ),
    Rule("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), ("sk-ant-",)),
    Rule("openai-key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{20,}"), ("sk-",)),
    Rule(
        "stripe-key",
        re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("_live_", "_test_"),
    ),
    Rule("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("AKIA", "ASIA")),
    Rule(
        "github-token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), ("xox",)),
    Rule("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), ("AIza",)),
    Rule(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        ("eyJ",),
    ),
    Rule("bearer-token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-+/=]{20,}"), ("bearer",)),
    Rule(
        "gitlab-token",
        re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|oas|imt|soat)-[A-Za-z0-9_\-]{20,}"),
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glimt-", "glsoat-"),
    ),
    Rule("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), ("npm_",)),
    Rule("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"), ("pypi-",)),
    Rule("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), ("hf_",)),
    Rule("groq-key", re.compile(r"\bgsk_[A-Za-z0-9]{40,}"), ("gsk_",)),
    Rule("xai-key", re.compile(r"\bxai-[A-Za-z0-9]{40,}"), ("xai-",)),
    Rule("perplexity-key", re.compile(r"\bpplx-[A-Za-z0-9]{40,}"), ("pplx-",)),
    Rule("replicate-token", re.compile(r"\br8_[A-Za-z0-9]{30,}"), ("r8_",)),
    Rule("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b"), ("SG.",)),
    Rule("twilio-key", re.compile(r"\b(?:AC|SK)[0-9a-f]{32}\b"), ("AC", "SK")),
    Rule("mailchimp-key", re.compile(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"), ("-us",)),
    Rule(
        "discord-token",
        re.compile(r"\b[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}"),
        (".",),
        gate=secret_detectors.DOTTED_SIX,
    ),
    Rule("telegram-token", re.compile(r"\b[0-9]{8,10}:AA[0-9A-Za-z_\-]{33}\b"), (":AA",)),
    Rule("square-token", re.compile(r"\bsq0(?:atp|csp)-[0-9A-Za-z_\-]{22,43}"), ("sq0",)),
    Rule(
        "azure-storage-key",
        re.compile(r"(?i)(?<=AccountKey=)[A-Za-z0-9+/]{86}=="),
        ("accountkey=",),
    ),
    # `Authorization: Basic dXNlcjpwYXNz`, `Token abc…`, `Digest …` (the header name stays)
    Rule(
        "authorization",
        re.compile(
            r"(?i)(\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?"
            r"(?:basic|token|digest|negotiate|apikey|key)?\s*)(?!\[redacted)[^\s'\"]{6,}"
        ),
        ("authorization",),
        keeps_prefix=True,
    ),
    # `https://user:password@host` (the user stays, the password goes)
    Rule(
        "url-password",
        re.compile(r"(?i)(?<=://)([^\s:/@]*:)(?!\[redacted)[^\s@/]+(?=@)"),
        ("://",),
        keeps_prefix=True,
        gate=re.compile(r"://[^\s:/@]*:[^\s@/]+@"),
    ),
    # `curl -u user:pass`, `--user=user:pass` (the user stays)
    Rule(
        "user-password",
        re.compile(r"((?<!\S)(?:-u|--user)(?:\s+|=)['\"]?[^\s:'\"]+:)(?!\[redacted)[^\s'\"]+"),
        ("-u",),
        keeps_prefix=True,
        gate=re.compile(r"-(?:u|-user)[\s=]"),
    ),
    # `mysql -uroot -pS3cret`, `sshpass -p S3cret ssh …`, `redis-cli -a S3cret` (the
    # command stays; `mysql -p db` asks for the password, and `db` stays)
    Rule(
        "cli-password",
        re.compile(
            r"""((?:\b(?:mysql[a-z]*|mariadb[a-z\-]*)\b[^\n|;&]*?\s-p"""
            r"""|\bsshpass\b[^\n|;&]*?\s-p[ \t]*|\bredis-cli\b[^\n|;&]*?\s-a[ \t]+))"""
            r"""(?![\s$\[])(?:'[^'\n]*'|"[^"\n]*"|[^\s'"`;|&]+)"""
        ),
        ("mysql", "mariadb", "sshpass", "redis-cli"),
        keeps_prefix=True,
    ),
)


BASIC = re.compile(r"\bBasic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
"""`Basic <base64>` outside a header (a log line, a curl command written out)."""

ASSIGNMENT = re.compile(
    r"""(?x)
    (?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]{3,100}+)
    (?P<sep>['"]?\]?[ \t]*(?::=|=>|=|:(?!//))[ \t]*)
    (?=(?P<value>"[^"\n]{1,400}"|'[^'\n]{1,400}'|[^\s'",;&<>()\[\]]++(?![(\[])))
    """
)
"""`name = value`, `name: value`, `"name": "value"`: shells, `.env`, YAML, JSON, URL
queries. Whether the name says it is a credential is `CREDENTIAL_NAME`'s to say."""

CREDENTIAL_NAME = re.compile(
    r"""(?ix)
        [A-Za-z0-9_.\-]*(?:secret|password|passwd|passphrase|credentials?)[A-Za-z0-9_\-]*
      | (?:[A-Za-z0-9_.\-]*[_.\-]|pg|db|api|auth|access|private|client|session|refresh)?
        (?P<family>token|key|pass|pwd|pw|apikey|auth)
    """
)
"""A credential's name: anything with `secret` or `password` in it; else one whose last
part is `token`, `key`, `pass`, `pwd`, `pw` (`GITHUB_TOKEN`, `x-api-key`, `PGPASS`,
`DB_PW`): so `max_tokens: 4096` and `token_count=12` stay."""

TOLD_NAME = re.compile(
    r"(?:pass(?:word|wd|phrase)|pwd|pw|secret|key|token|credentials?)(?![a-z0-9_\-])"
)
"""A credential's name in prose, looked for in the lower-cased text: a search for it
skips to the few letters it starts with, where `TOLD` then runs (a case-blind scan of
the whole text with it cost five times as much)."""
TOLD = re.compile(
    r"""(?ix)
    (?P<name>[a-z]+)
    (?P<sep>
        [ \t]*[:=][ \t]*
      | (?:[ \t]+for[ \t]+(?:the[ \t]+)?[\w@.\-]{1,64})?[ \t]+
        (?:(?:(?:is|was|has[ \t]+been)[ \t]+)?(?:set|changed|reset)[ \t]+to
          | (?:is|was)(?:[ \t]+(?:now|still))?[ \t]*:?)
        [ \t]+
      | [ \t]+
    )
    ['"`]?(?P<value>[^\s'"`]{1,400}?)(?=[.,;:!?)\]}'"`]*(?:\s|\Z))
    """
)
"""A credential told in prose, from its name on: `my password is X`, `the db password
for root was X`, `with secret X`, `pw=X`, `my api key is X` (`secret access key is X`
is found at `key`). Whether the value is one is `_told`'s to say: prose is full of
`the key is to rest`."""

TOLD_KINDS = {
    **dict.fromkeys(("password", "passwd", "passphrase", "pwd", "pw"), "password"),
    **dict.fromkeys(("secret", "credential", "credentials"), "secret"),
    **dict.fromkeys(("key", "token"), "key"),
}
"""Which bar a told value must clear (`_strong`)."""
NAMED_ALONE = frozenset({"password", "passwd", "passphrase", "secret"})
"""Names whose value may follow a space alone (`passwd X`, `with secret X`)."""
KEY_OWNERS = frozenset(
    {
        "my", "your", "our", "their", "his", "her",
        "api", "access", "secret", "private", "auth", "bearer", "refresh", "session",
        "signing", "encryption", "master", "license", "deploy", "bot", "client", "service",
        "aws", "openai", "anthropic", "groq", "xai", "github", "gitlab", "stripe", "slack",
        "google", "gemini", "azure", "mistral", "cohere", "huggingface", "hf", "npm", "pypi",
    }
)  # fmt: skip
"""The word just before `key` or `token` that makes it a credential's (`my key`, `api
key`, `access token`); `the cache key is 3f2a…`, `the primary key is id` stay."""
KEY_SPACED = frozenset({"api", "access", "secret", "private", "auth", "bearer", "refresh"})
"""Of those, the ones after which `key X` or `token X`, with no `is`, is a credential."""
_NOT_TOLD = re.compile(
    r"(?:~|\.{1,2})?/|[A-Za-z]:\\|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+\Z"
    r"|[a-z0-9]+(?:-[a-z0-9]+)*-[a-z]+ed\Z"
)
"""A path, an e-mail address, or a hyphenated adjective (`sha256-hashed`)."""

PLACEHOLDERS = frozenset(
    {
        "str", "string", "bytes", "int", "bool", "none", "null", "nil", "true", "false",
        "optional", "secretstr", "any", "undefined", "required", "dict", "list", "object",
        "self", "value", "empty",
    }
)  # fmt: skip
"""Values that are a type, a constant or a blank, not a credential (code and schemas)."""

_TYPE_LIKE = re.compile(r"^(?:[A-Za-z_][\w.]*\(|[{$<%]|\*+$|\[redacted|[A-Z][a-z]+\[|https?://)")
"""Values that are a call, a template, a variable, a mask, a generic type or a URL."""
_WORDISH = re.compile(r"[a-z]+(?:[_\-][a-z]+)*|[A-Z]+(?:[_\-][A-Z]+)*|\d{1,6}")
"""A plain word, identifier or small number: what a `*_KEY` or `*_TOKEN` setting often
holds in code (`sort_key=name`, `next_token=None`), unlike a credential."""


ASSIGNMENT_TRIGGERS = ("secret", "pass", "credential", "token", "key", "pw", "auth")
"""What every credential name `CREDENTIAL_NAME` and `TOLD` accept contains."""


REMEMBERED_CHARS = 8_192
"""Texts up to this long are redacted once and remembered (`_remembered`)."""


def redact(text: str) -> str:
    """`text` with every credential-shaped span replaced by `[redacted <kind>]`.

    A turn's text is redacted several times within seconds (its memory entry, the
    extraction prompt, the session index's prompt, which repeats the latest turns): a
    short text's answer is remembered, in this process's memory only."""
    if len(text) <= REMEMBERED_CHARS:
        return _remembered(text)
    return _redact(text)


@functools.lru_cache(maxsize=1024)
def _remembered(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    given = text
    lowered = text.lower()
    for rule in RULES:
        text = rule.redact(text, lowered)
    if "Basic" in text:
        text = BASIC.sub(_basic, text)
    if any(t in lowered for t in ASSIGNMENT_TRIGGERS):
        # `sub` hands back the text itself where it replaced nothing
        found = [*_assignments(text), *_told(text, lowered if text is given else None)]
        if found:
            text = _replace(text, sorted(found))
    return _detected(text)


def redact_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message with its text redacted: string content, and the text of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": redact(content)}
    if isinstance(content, list):
        parts = [
            {**part, "text": redact(part["text"])}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
        return {**message, "content": parts}
    return dict(message)


def redact_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` with every string, and every string in a list, redacted (model-written
    metadata before it is stored or written to a file)."""
    return {key: _redact_value(value) for key, value in fields.items()}


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_value(v) for v in value]
    return value


def _basic(match: re.Match[str]) -> str:
    """`Basic <base64>` whose base64 decodes to `user:password`."""
    try:
        decoded = base64.b64decode(match.group(1), validate=True)
    except (binascii.Error, ValueError):
        return match.group(0)
    return "Basic [redacted basic-auth]" if b":" in decoded else match.group(0)


PATH_NAMES = frozenset({"pwd", "passwd"})
"""Names that are as often a path's as a credential's: `pwd: /home/ana/api` (a shell's
working directory) and `passwd: /etc/passwd` (the file) keep a value that is a path."""
PATH_VALUE = re.compile(r"(?:~|\.{1,2})?(?:/[\w.\-]+)+/?")
"""A path of plain segments, nothing else (a credential holds `+`, `=`, `$`, `!`…)."""


def _assignments(text: str) -> Iterator[tuple[int, int, str]]:
    """The values (quotes included) of the assignments whose name is a credential's."""
    for match in ASSIGNMENT.finditer(text):
        named = CREDENTIAL_NAME.fullmatch(match.group("name"))
        if named is None:
            continue
        value = match.group("value")
        if value[0] in "\"'":
            value = value[1:-1]
        if match.group("name").lower() in PATH_NAMES and PATH_VALUE.fullmatch(value):
            continue
        if _is_credential(value, keyish=named.group("family") is not None):
            yield (*match.span("value"), "secret")


def _is_credential(value: str, *, keyish: bool) -> bool:
    """Whether an assigned value is a credential rather than a type, a call or a blank.
    `*_KEY` / `*_TOKEN` names also need a value that is not a plain word."""
    stripped = value.strip()
    if len(stripped) < 4 or stripped.lower() in PLACEHOLDERS or _TYPE_LIKE.match(stripped):
        return False
    if not any(c.isalnum() for c in stripped):
        return False
    return not (keyish and (len(stripped) < 8 or _WORDISH.fullmatch(stripped)))


def _told(text: str, lowered: str | None = None) -> Iterator[tuple[int, int, str]]:
    """The values of the credentials `TOLD` finds in prose that look like one
    (`lowered`: the text lower-cased, when the caller has it)."""
    if lowered is None:
        lowered = text.lower()
    if len(lowered) != len(text):  # a few letters lower to two: keep the offsets
        lowered = text.translate(secret_detectors.ASCII_LOWER)
    for named in TOLD_NAME.finditer(lowered):
        start = named.start()
        if start and lowered[start - 1].isalnum():
            continue
        name = named.group()
        kind = TOLD_KINDS[name]
        owner = _word_before(text, start) if kind == "key" else ""
        if kind == "key" and owner not in KEY_OWNERS:
            continue
        match = TOLD.match(text, start)
        if match is None:
            continue
        spaced = not match.group("sep").strip()  # `passwd X`, not `passwd: X`
        if spaced and name not in NAMED_ALONE and owner not in KEY_SPACED:
            continue
        if _strong(match.group("value"), kind):
            yield (*match.span("value"), "secret")


def _word_before(text: str, at: int) -> str:
    """The word before `at` (`api` in `api key`, `api_key`, `API-Key`), lower-cased."""
    end = at
    while end > 0 and text[end - 1] in " \t_-":
        end -= 1
    start = end
    while start > 0 and end - start < 20 and text[start - 1].isalnum():
        start -= 1
    return text[start:end].lower()


def _strong(value: str, kind: str) -> bool:
    """Whether a value told in prose looks like a credential: no space (`TOLD` stops at
    one), not a word, type, template, path or address; a password holds letters with
    digits or symbols, or only digits, or is long (`correct-horse-battery-staple`); a
    secret the same but longer; a key letters and digits, 16 or more."""
    if len(value) < 6 or value.lower() in PLACEHOLDERS or _TYPE_LIKE.match(value):
        return False
    if _NOT_TOLD.match(value):
        return False
    letters = digits = symbols = False
    for c in value:
        if c.isalpha():
            letters = True
        elif c.isdigit():
            digits = True
        elif c not in "-_.":
            symbols = True
    if kind == "key":
        return len(value) >= 16 and letters and digits
    if len(value) >= 20 or (letters and (digits or symbols)):
        return kind == "password" or len(value) >= 8
    return kind == "password" and digits and not letters and not symbols


def _detected(text: str) -> str:
    """`text` with what the detect-secrets detectors find replaced."""
    found = sorted(secret_detectors.spans(text))
    return _replace(text, found) if found else text


def _replace(text: str, found: list[tuple[int, int, str]]) -> str:
    """`text` with the spans replaced, overlapping spans merged (the first kind named)."""
    out: list[str] = []
    at = 0
    for start, end, kind in found:
        if end <= at:
            continue
        if start < at:  # overlaps what was just replaced: extend it
            start = at
        else:
            out.append(text[at:start])
            out.append(f"[redacted {kind}]")
        at = end
    out.append(text[at:])
    return "".join(out)
