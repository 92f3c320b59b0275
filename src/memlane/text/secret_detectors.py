"""The precise detectors of `detect-secrets` (Yelp), loaded on first use, as spans to replace.

`detect-secrets` keeps the key shapes of many providers (AWS, GitHub, GitLab, Slack,
Stripe, SendGrid, Twilio, npm, PyPI, JWT, private keys, basic auth in URLs, IBM,
Artifactory, Discord, Telegram, …) and a keyword detector for quoted assignments. Its
own API reports only the secret's text (for some detectors only a prefix such as `ghp`),
so memlane uses each detector's regular expressions directly and replaces the span it
matched. Left out on purpose: the entropy detectors (they flag commit hashes, UUIDs
and plain words) and the public-IP detector (an address is not a credential).

Importing the plugins costs 0.3–1.4 s (they pull `requests` in), so nothing is loaded
until the first call (`load`, which the proxy runs in a thread as it starts).
"""

from __future__ import annotations

import re
import string
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MIN_GROUP = 8
"""A captured group shorter than this is a prefix (`ghp`, `glcbt-xx_`): the whole match goes."""
TRIM = " \t\r\n=:\"'`,;"
"""Context some detectors include at a match's edges (`(?:\\s|=|:|"|^)AKC…`): it stays."""


@dataclass(frozen=True, slots=True)
class Detector:
    """One regular expression of one detect-secrets plugin."""

    kind: str
    """What `[redacted <kind>]` says: the plugin's secret type, lower-case, dashed."""
    pattern: re.Pattern[str]
    group: int | None
    """The group holding the secret (the keyword detector names it), else the longest."""
    valid: Callable[[str], bool] | None = None
    """A check the plugin makes on what matched (a JWT must decode), when it has one."""
    triggers: tuple[str, ...] = ()
    """Text one of which any match contains (a lower-case one is looked for in the
    lower-cased text): without one, the expression is not run. Empty: always run."""
    gate: re.Pattern[str] | None = None
    """For an expression no text of its own starts (`\\d{8,10}:…`): an expression every
    match also matches that starts with text a search skips to, far cheaper than a
    scan of the whole text; where it finds nothing, the expression is not run."""

    def windows(self, text: str, lowered: str) -> Iterator[tuple[int, int]]:
        """The spans the expression can match in: around each trigger, within its line
        (a substring search costs far less than the expression's scan, and a long line of
        minified JSON is not scanned whole for one trigger in it)."""
        if not self.triggers:
            yield 0, len(text)
            return
        spans: list[tuple[int, int]] = []
        for trigger in self.triggers:
            within = lowered if trigger.islower() else text
            at = within.find(trigger)
            while at >= 0:
                reach = max(0, at - BEFORE)
                start = max(text.rfind("\n", reach, at) + 1, reach)
                end = text.find("\n", at, at + AFTER)
                spans.append((start, min(len(text), at + AFTER) if end < 0 else end))
                at = within.find(trigger, at + 1)
        yield from _merged(spans)


BEFORE = 512
"""How far before a trigger a match may start (a quoted value compared to `password`)."""
AFTER = 8_192
"""How far after a trigger a match may end (a JWT, an Azure connection string)."""


def _merged(spans: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """`spans` in order, overlapping ones joined."""
    current: tuple[int, int] | None = None
    for start, end in sorted(spans):
        if current is not None and start <= current[1]:
            current = (current[0], max(current[1], end))
            continue
        if current is not None:
            yield current
        current = (start, end)
    if current is not None:
        yield current


ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

_lock = threading.Lock()
_detectors: tuple[Detector, ...] | None = None


def loaded() -> bool:
    """Whether the detectors are in memory (a first `load` costs 0.3–1.4 s)."""
    return _detectors is not None


def load() -> tuple[Detector, ...]:
    """The detectors, imported once per process (thread-safe)."""
    global _detectors
    with _lock:
        if _detectors is None:
            _detectors = _build()
        return _detectors


def _build() -> tuple[Detector, ...]:
    from detect_secrets.plugins import (  # 0.3–1.4 s of imports: paid on first use
        artifactory,
        aws,
        azure_storage_key,
        basic_auth,
        cloudant,
        discord,
        github_token,
        gitlab_token,
        ibm_cloud_iam,
        ibm_cos_hmac,
        jwt,
        keyword,
        mailchimp,
        npm,
        openai,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        softlayer,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    # each plugin with the text any of its matches contains (read off its expressions)
    plugins: tuple[tuple[Any, tuple[str, ...]], ...] = (
        (artifactory.ArtifactoryDetector, ("AKC", "AP")),
        (aws.AWSKeyDetector, ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "aws")),
        (azure_storage_key.AzureStorageKeyDetector, ("AccountKey=",)),
        (basic_auth.BasicAuthDetector, ("://",)),
        (cloudant.CloudantDetector, ("cloudant", "cl_", "cl-", "clapi", "clkey", "clp", "clt")),
        (discord.DiscordBotTokenDetector, ()),  # gated (`GATES`)
        (github_token.GitHubTokenDetector, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
        (
            gitlab_token.GitLabTokenDetector,
            GITLAB_PREFIXES,
        ),
        (ibm_cloud_iam.IbmCloudIamDetector, ("key", "pwd", "pass", "token")),
        (ibm_cos_hmac.IbmCosHmacDetector, ("secret",)),
        (mailchimp.MailchimpDetector, ("-us",)),
        (npm.NpmDetector, ("_authtoken",)),
        (openai.OpenAIDetector, ("T3BlbkFJ",)),
        (private_key.PrivateKeyDetector, ("PRIVATE KEY", "PuTTY")),
        (pypi_token.PypiTokenDetector, ("pypi-",)),
        (sendgrid.SendGridDetector, ("SG.",)),
        (slack.SlackDetector, ("xox", "hooks.slack.com")),
        (softlayer.SoftlayerDetector, ("softlayer", "sl_", "sl-", "slapi", "slkey", "slp", "slt")),
        (square_oauth.SquareOAuthDetector, ("sq0csp-",)),
        (stripe.StripeDetector, ("k_live_",)),
        (telegram_token.TelegramBotTokenDetector, ()),  # gated (`GATES`)
        (twilio.TwilioKeyDetector, ("AC", "SK")),
    )
    gates = {
        discord.DiscordBotTokenDetector: DOTTED_SIX,
        telegram_token.TelegramBotTokenDetector: COLON_THEN_35,
    }
    found = [
        Detector(
            _kind(plugin.secret_type),
            _one_line(pattern),
            None,
            None,
            triggers,
            gates.get(plugin),
        )
        for plugin, triggers in plugins
        for pattern in plugin.denylist
    ]
    token = jwt.JwtTokenDetector
    found += [
        Detector(_kind(token.secret_type), _one_line(p), None, token.is_formally_valid, ("eyJ",))
        for p in token.denylist
    ]
    # the keyword detector's quoted forms only: unquoted, its value runs to the line's end
    found += [
        Detector("secret-keyword", _one_line(pattern), group, None, KEYWORDS)
        for pattern, group in keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()
    ]
    return tuple(found)


GITLAB_PREFIXES = (
    *("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-"),
    *("glagent-", "gloas-", "GR1348941"),
)
"""How every GitLab token the plugin knows starts (`gl` alone is in many words)."""
DOTTED_SIX = re.compile(r"\.[a-zA-Z\d_-]{6}\.")
"""What every Discord bot token holds (`[MNO]…{23,25}.{6}.{27}`): its middle part."""
COLON_THEN_35 = re.compile(r":[0-9A-Za-z_-]{35}")
"""What every Telegram bot token holds (`\\d{8,10}:{35}`): its colon and what follows."""

KEYWORDS = ("key", "pass", "pwd", "secret", "contrase")
"""What every name in the keyword detector's list contains."""


def _one_line(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """`pattern` as detect-secrets means it, run on a whole text: it scans line by line, so
    its "anything but a vertical tab" (`[^\\v…]`) never crosses a line, and `^` / `$`
    are a line's ends."""
    source = pattern.pattern.replace("[^\\v", "[^\\n\\v")
    return re.compile(source, pattern.flags | re.MULTILINE)


def _kind(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def spans(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, kind) of every secret the detectors find in `text`.

    A plugin's expressions share its triggers (the keyword detector's five, the private
    key's eight): their windows are looked for once per text, not once per expression,
    which was most of what redacting a long text cost."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few letters lower to two: keep the offsets
        lowered = text.translate(ASCII_LOWER)
    found: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    gated: dict[re.Pattern[str], bool] = {}
    held: dict[str, bool] = {}
    for detector in load():
        gate = detector.gate
        if gate is not None:
            if gate not in gated:
                gated[gate] = gate.search(text) is not None
            if not gated[gate]:
                continue
        windows = found.get(detector.triggers)
        if windows is None:
            windows = found[detector.triggers] = (
                list(detector.windows(text, lowered))
                if _holds(detector.triggers, text, lowered, held)
                else []
            )
        for window in windows:
            yield from _matches(text, detector, *window)


def _holds(triggers: tuple[str, ...], text: str, lowered: str, held: dict[str, bool]) -> bool:
    """Whether the text holds one of `triggers` (none: always), each trigger looked for
    once a text (plugins share `key`, `pass`, `token`...): where none is held, `windows`
    would find none, and is not run. Most of a short text's redaction was that."""
    if not triggers:
        return True
    for trigger in triggers:
        found = held.get(trigger)
        if found is None:
            found = held[trigger] = trigger in (lowered if trigger.islower() else text)
        if found:
            return True
    return False


def _matches(
    text: str, detector: Detector, pos: int, endpos: int
) -> Iterator[tuple[int, int, str]]:
    """The secrets one detector finds between `pos` and `endpos` (a line, or the text)."""
    for match in detector.pattern.finditer(text, pos, endpos):
        start, end = _secret_span(match, detector.group)
        while start < end and text[start] in TRIM:
            start += 1
        while end > start and text[end - 1] in TRIM:
            end -= 1
        if end - start < 4:
            continue
        if detector.valid is not None and not detector.valid(text[start:end]):
            continue
        yield start, end, detector.kind


def _secret_span(match: re.Match[str], group: int | None) -> tuple[int, int]:
    """Where the secret is: the named group, else the longest captured group (when it is
    more than a prefix), else the whole match."""
    if group is not None:
        return match.span(group)
    groups = [match.span(i) for i in range(1, (match.re.groups or 0) + 1) if match.group(i)]
    longest = max(groups, key=lambda s: s[1] - s[0], default=None)
    if longest is not None and longest[1] - longest[0] >= MIN_GROUP:
        return longest
    return match.span()
