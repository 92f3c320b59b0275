"""The cheap searches that decide whether a credential expression runs at all: they never
hide a credential, and ordinary prose runs none of the expressions they guard."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memlane.text import redact as module
from memlane.text import secret_detectors
from memlane.text.redact import redact

CORPUS = json.loads((Path(__file__).parent / "data" / "redaction_corpus.json").read_text())
TOKEN = "Ab1_" * 16
SHAPES = [
    f"MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.{TOKEN[:27]}",  # discord
    "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",  # telegram
    "1234567890:" + TOKEN[:35],
    "ghp_" + TOKEN[:36],
    "gho_" + TOKEN[:36],
    "github_pat_" + TOKEN[:50],
    "glpat-" + TOKEN[:24],
    "glsoat-" + TOKEN[:24],
    "glagent-" + TOKEN[:50],
    "GR1348941" + TOKEN[:24],
    "curl -u admin:hunter2horse https://x.test",
    "curl --user=admin:hunter2horse https://x.test",
    "curl -u\tadmin:hunter2horse",
    "https://admin:hunter2horse@db.internal:5432/app",
    "POSTGRES://Admin:Hunter2Horse@db.internal/app",
]
TEXTS = [
    *(item["text"] for item in CORPUS["secrets"]),
    *CORPUS["look_alikes"],
    *SHAPES,
    *(f"User: see this. {shape}. Thanks: done." for shape in SHAPES),
]
PROSE = (
    "User: the deploy of v2.3 failed at 10:41:07 again. Can you look at "
    "https://example.com/docs/setup and run-up the tests with `pytest -q -x`? The "
    "highlight: though the glossary says so, git log shows a right fix (e.g. commit 3f2a9c4)."
    "\n\nAssistant: Sure. The stack trace ends in src/app/main.py:42: a KeyError for "
    "'port'. Set it in config.yaml, then run `make test -u`.\n\n"
) * 20


def test_every_gate_finds_what_its_expression_finds() -> None:
    """A gate is a necessary condition: wherever the expression it guards matches, the
    gate matches too, so no credential is left for the gate to hide."""
    rules = [rule for rule in module.RULES if rule.gate is not None]
    detectors = [d for d in secret_detectors.load() if d.gate is not None]
    assert {rule.kind for rule in rules} == {"discord-token", "url-password", "user-password"}
    assert {d.kind for d in detectors} == {"discord-bot-token", "telegram-bot-token"}
    matched = 0
    for text in TEXTS:
        for guarded in (*rules, *detectors):
            assert guarded.gate is not None
            if guarded.pattern.search(text):
                matched += 1
                assert guarded.gate.search(text), (guarded.kind, text)
    assert matched >= len(rules) + len(detectors)


def test_every_match_holds_one_of_its_triggers() -> None:
    """The rules' and detectors' triggers (the GitHub and GitLab prefixes in full): any
    text an expression matches holds one."""
    guarded = [*module.RULES, *secret_detectors.load()]
    for text in TEXTS:
        lowered = text.lower()
        for each in guarded:
            found = each.pattern.search(text)
            if found is None or not each.triggers:
                continue
            held = [t for t in each.triggers if t in (lowered if t.islower() else text)]
            assert held, (each.kind, text)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_shape_in_prose_is_redacted(shape: str) -> None:
    text = f"{PROSE[:300]} here it is: {shape} and more."
    assert shape not in redact(text)
    assert "[redacted" in redact(text)


class Counted:
    """An expression that counts its scans."""

    def __init__(self, pattern: re.Pattern[str], scans: list[str]) -> None:
        self.pattern = pattern
        self.scans = scans

    def sub(self, *args: Any) -> str:
        self.scans.append(self.pattern.pattern)
        return self.pattern.sub(*args)

    def finditer(self, *args: Any) -> Iterator[re.Match[str]]:
        self.scans.append(self.pattern.pattern)
        return self.pattern.finditer(*args)


def test_prose_runs_none_of_the_gated_expressions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Periods, colons, `-u`, URLs, `gh` and `gl` in words are in most texts: redacting
    a long prompt of prose scans it with none of the expressions they used to let run."""
    scans: list[str] = []
    watched = {"discord-token", "url-password", "user-password", "github-token", "gitlab-token"}
    rules = tuple(
        replace(rule, pattern=Counted(rule.pattern, scans)) if rule.kind in watched else rule
        for rule in module.RULES
    )
    kinds = {"discord-bot-token", "telegram-bot-token", "gitlab-token"}
    detectors = tuple(
        replace(d, pattern=Counted(d.pattern, scans)) if d.kind in kinds else d
        for d in secret_detectors.load()
    )
    monkeypatch.setattr(module, "RULES", rules)
    monkeypatch.setattr(secret_detectors, "_detectors", detectors)
    assert module._redact(PROSE) == PROSE
    assert scans == []
    shaped = PROSE + SHAPES[0] + "\n" + SHAPES[1] + "\n"
    assert SHAPES[0] not in module._redact(shaped)
    assert SHAPES[1] not in module._redact(shaped)
    assert scans
