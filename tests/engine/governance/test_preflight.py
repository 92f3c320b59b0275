from __future__ import annotations

import pytest

from memlane.engine.governance.errors import ContextOverflow
from memlane.engine.governance.flow import govern
from tests.engine.governance.helpers import Builder, agentic, governor, noise, settings_for


async def test_a_request_that_cannot_fit_is_refused_with_context_length_exceeded() -> None:
    gov = governor(settings_for())
    b = agentic("chat", 4)
    b.user(noise(60_000, 1))  # the user's own message is larger than the window
    with pytest.raises(ContextOverflow) as caught:
        await govern(gov, b.messages, user_text="x")
    error = caught.value
    assert error.code == "context_length_exceeded"
    assert error.limit == gov.budget.limit
    assert error.tokens > error.limit
    assert "8192-token context window" in str(error)


async def test_an_unknown_model_is_compacted_to_the_default_but_never_refused() -> None:
    settings = settings_for(governance_default_window=4_096)
    gov = governor(settings, model="some-local-model")
    assert not gov.budget.window.known
    b = Builder("chat").user(noise(40_000, 2))
    governed = await govern(gov, b.messages, user_text="x")
    assert governed.stats.tokens_out > gov.budget.limit  # forwarded: the upstream decides


async def test_preflight_off_forwards_anyway() -> None:
    gov = governor(settings_for(governance_preflight=False))
    b = Builder("chat").user(noise(60_000, 1))
    governed = await govern(gov, b.messages, user_text="x")
    assert governed.stats.tokens_out > gov.budget.limit


async def test_compaction_off_still_checks_before_forwarding() -> None:
    gov = governor(settings_for(governance_compact_threshold=0))
    with pytest.raises(ContextOverflow):
        await govern(gov, agentic("chat", 80).messages, user_text="x")
