"""The sample evaluation file shipped with memlane: the script's output, in the LoCoMo format."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from memlane.engine.retrieval.evaluation import SAMPLE_FILE, load_conversations

ROOT = Path(__file__).resolve().parents[3]


def _script() -> ModuleType:
    path = ROOT / "scripts" / "make_eval_sample.py"
    spec = importlib.util.spec_from_file_location("make_eval_sample", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_shipped_file_is_what_the_script_writes() -> None:
    assert SAMPLE_FILE.read_text(encoding="utf-8") == _script().render(), (
        "run .venv/bin/python scripts/make_eval_sample.py"
    )


def test_every_scored_question_has_gold_turns_of_its_own_conversation() -> None:
    conversations = load_conversations(SAMPLE_FILE)
    assert len(conversations) == 3
    for conversation in conversations:
        ids = {turn.id for turn in conversation.turns}
        scored = [q for q in conversation.questions if q.scored]
        assert {q.category for q in scored} == {1, 2, 3, 4}
        for question in scored:
            assert question.evidence, question.id
            assert set(question.evidence) <= ids, question.id
    for line in SAMPLE_FILE.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)  # the fields LoCoMo's file has, so one reader takes both
        assert set(record) == {"id", "turns", "questions"}
        assert set(record["turns"][0]) == {"id", "session", "speaker", "text", "time"}
        assert set(record["questions"][0]) == {
            "id",
            "question",
            "answer",
            "evidence",
            "category",
            "scored",
        }
