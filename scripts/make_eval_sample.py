"""Write the sample evaluation file `memlane eval retrieval` runs on when given no file.

Three made-up conversations between two friends, four sessions each, with
facts planted among small talk and questions whose gold evidence is the turn
(or turns) that state them, in the format of the LoCoMo development file
(`id`, `turns` with `D<session>:<turn>` ids, `questions` with `evidence` and a
LoCoMo category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial, which is not scored). Deterministic: the same file on every run.

    .venv/bin/python scripts/make_eval_sample.py

rewrites `src/memlane/engine/retrieval/sample_conversations.jsonl`.

`tests/engine/retrieval/test_sample_file.py` fails when the file differs from
what this script writes. It is small and written for memlane: figures on it show
that evaluation works, not how good retrieval is (see the Benchmarks page).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "memlane" / "engine" / "retrieval" / "sample_conversations.jsonl"

SMALL_TALK = [
    "How was your weekend?",
    "Pretty quiet, mostly caught up on sleep.",
    "Work has been busy again this week.",
    "Same here, too many meetings.",
    "Did you watch anything good lately?",
    "Not really, I keep starting shows and never finishing them.",
    "The weather finally turned nice.",
    "I know, I even had lunch outside today.",
    "How is your family doing?",
    "Everyone is fine, thanks for asking.",
    "I should really call my parents more often.",
    "Me too, time just flies.",
    "Any plans for the evening?",
    "Just cooking something simple and reading a bit.",
    "That sounds relaxing.",
    "It is, I needed a calm day.",
    "Traffic this morning was terrible.",
    "I took the bike, so I was lucky.",
    "Are you still enjoying the new job?",
    "Mostly, the people are nice.",
    "I tried a new recipe but it did not turn out well.",
    "Happens to me all the time, just try again.",
    "I have been so tired lately.",
    "Maybe you need a proper holiday.",
    "Thanks for listening, by the way.",
    "Anytime, that is what friends are for.",
]


@dataclass(frozen=True)
class Cast:
    """One conversation's people and the details its facts are made of."""

    conv: str
    a: str
    b: str
    start: datetime
    pet: str
    breed: str
    sibling: str
    city: str
    hobby: str
    first_instrument: str
    second_instrument: str
    race: str
    allergy: str


CASTS = [
    Cast(
        "sample-1",
        "Maya",
        "Jonas",
        datetime(2025, 3, 2, 18, 30),
        "Pepper",
        "beagle",
        "Lukas",
        "Porto",
        "pottery",
        "cello",
        "ukulele",
        "Lisbon half marathon",
        "peanuts",
    ),
    Cast(
        "sample-2",
        "Priya",
        "Tom",
        datetime(2025, 6, 14, 9, 15),
        "Mochi",
        "ragdoll cat",
        "Anika",
        "Vancouver",
        "bouldering",
        "piano",
        "harmonica",
        "Berlin city relay",
        "shellfish",
    ),
    Cast(
        "sample-3",
        "Lena",
        "Omar",
        datetime(2025, 10, 5, 20, 0),
        "Biscuit",
        "greyhound",
        "Samir",
        "Edinburgh",
        "woodworking",
        "violin",
        "banjo",
        "Oslo trail race",
        "sesame",
    ),
]


def conversation(cast: Cast, rng: random.Random) -> dict[str, Any]:
    """Four sessions of small talk with the cast's facts said at fixed places."""
    a, b = cast.a, cast.b
    planted: dict[int, list[tuple[str, str, str]]] = {
        # session: [(key, speaker, text)], each placed at a random turn of its session
        1: [
            ("pet", a, f"We finally adopted a {cast.breed} from the shelter, named {cast.pet}."),
            ("instrument1", a, f"I have played the {cast.first_instrument} since I was at school."),
            ("seasick", b, "I get seasick on every ferry, even on a calm sea."),
        ],
        2: [
            ("sibling", b, f"My sibling {cast.sibling} just moved to {cast.city} for a new job."),
            (
                "hobby",
                a,
                f"I signed up for a {cast.hobby} class yesterday, first lesson on Monday.",
            ),
        ],
        3: [
            ("race", b, f"I registered for the {cast.race}, so I run four times a week now."),
            ("instrument2", a, f"Last month I started learning the {cast.second_instrument} too."),
            ("allergy", b, f"Careful with the cake, I am allergic to {cast.allergy}."),
        ],
        4: [
            ("visit", a, f"I booked flights to visit {cast.sibling}'s new place in {cast.city}."),
            ("knee", b, "My knee hurts after the long run, the physio told me to rest for weeks."),
        ],
    }
    turns: list[dict[str, Any]] = []
    where: dict[str, str] = {}
    for session in range(1, 5):
        when = cast.start + timedelta(days=17 * (session - 1))
        talk = rng.sample(SMALL_TALK, 10)
        lines = [(a if i % 2 == 0 else b, text) for i, text in enumerate(talk)]
        for _key, speaker, text in planted[session]:
            at = rng.randrange(1, len(lines) + 1)
            lines.insert(at, (speaker, text))
        for number, (speaker, text) in enumerate(lines, start=1):
            turn_id = f"D{session}:{number}"
            for key, _, said in planted[session]:
                if said == text:
                    where[key] = turn_id
            turns.append(
                {
                    "id": turn_id,
                    "session": session,
                    "speaker": speaker,
                    "text": text,
                    "time": when.isoformat(),
                }
            )
    hobby_day = cast.start + timedelta(days=17) - timedelta(days=1)
    questions = [
        (f"What is the name of the dog or cat {a} adopted?", cast.pet, ["pet"], 4),
        (f"Where did {b}'s sibling move to?", cast.city, ["sibling"], 4),
        (f"What is {b} allergic to?", cast.allergy, ["allergy"], 4),
        (f"Which race did {b} register for?", cast.race, ["race"], 4),
        (
            f"When did {a} sign up for the {cast.hobby} class?",
            hobby_day.strftime("%-d %B %Y"),
            ["hobby"],
            2,
        ),
        (
            f"Which instruments does {a} play?",
            f"{cast.first_instrument} and {cast.second_instrument}",
            ["instrument1", "instrument2"],
            1,
        ),
        (
            f"Which city will {a} fly to, and who lives there?",
            f"{cast.city}, where {cast.sibling} moved",
            ["visit", "sibling"],
            1,
        ),
        (
            f"Would {b} enjoy a week-long sailing holiday?",
            "Probably not: they get seasick",
            ["seasick"],
            3,
        ),
        (
            f"Might {b} have to skip the {cast.race}?",
            "Likely: the physio prescribed weeks of rest",
            ["knee", "race"],
            3,
        ),
        (f"What is the name of {b}'s horse?", "never mentioned", [], 5),
    ]
    return {
        "id": cast.conv,
        "turns": turns,
        "questions": [
            {
                "id": f"{cast.conv}/q{i}",
                "question": question,
                "answer": answer,
                "evidence": [where[key] for key in keys],
                "category": category,
                "scored": category != 5,
            }
            for i, (question, answer, keys, category) in enumerate(questions)
        ],
    }


def render() -> str:
    rng = random.Random(41)
    return "".join(json.dumps(conversation(cast, rng)) + "\n" for cast in CASTS)


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
