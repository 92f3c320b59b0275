"""Hypothesis profiles for the fuzz suite.

`memlane` (the default) is what the suite runs: derandomized (the same examples
every run, so a failure is reproducible and the suite's time is predictable) and
no example database left in the work tree. Each test bounds its own number of
examples; `MEMLANE_FUZZ_SCALE=20` multiplies them. `deep` draws fresh random
examples on each run: `HYPOTHESIS_PROFILE=deep .venv/bin/pytest tests/fuzz`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SUPPRESSED = [
    HealthCheck.function_scoped_fixture,  # one proxy serves every example of a test, on purpose
    HealthCheck.too_slow,  # each example is a real HTTP request
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
]

settings.register_profile(
    "memlane",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=SUPPRESSED,
    print_blob=True,
)
settings.register_profile(
    "deep",
    deadline=None,
    database=None,
    suppress_health_check=SUPPRESSED,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "memlane"))
