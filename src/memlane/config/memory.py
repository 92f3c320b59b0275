"""Settings owned by the memory part of memlane (long-term memory and its retrieval).

The defaults: `top_k` 5, `max_entries` 500, `mmr_lambda` 0.7 (with dense
retrieval), `recency_weight` 0.05, no score threshold, summarisation and git
versioning on, no file watcher unless asked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from memlane.config.fields import Fraction, NonNegativeFloat, SettingsPart

ScopeLevel = Literal["conversation", "namespace", "global"]


class MemorySettings(SettingsPart):
    memory_enabled: bool = True
    """Keep long-term memory: store turns and facts, recall them into requests."""

    memory_dense: Literal["auto", "on", "off"] = "auto"
    """Dense (embedding) retrieval beside keyword search. auto: on only when embedding_backend is an
    endpoint (openai); on: also with the packaged model; off: keyword search over context-expanded
    turns, no model on the request path."""

    recall_deadline_ms: Annotated[int, Field(ge=1)] = 50
    """Longest recall may take in front of a request; past it the request is forwarded without
    memories (and the overrun recorded)."""

    memory_mode: Literal["always", "trimmed"] = "always"
    """When the proxy injects recalled memories: on every request, or only when governance had to
    trim the request."""

    memory_extract_facts: bool = True
    """Extract facts from each user message with the LLM, after the response (one call per batch
    of a session's turns)."""

    memory_store_turns: bool = True
    """Keep each user and assistant turn as a memory entry of its conversation."""

    memory_message_chars: Annotated[int, Field(ge=1_000)] = 64_000
    """Most characters of one message memory works on (fact extraction, its turn file, git); the
    rest is left out with a marker and a `memory.truncated` event (the transcript keeps all)."""

    memory_batch_turns: Annotated[int, Field(ge=1, le=64)] = 8
    """Turns of a session remembered together, with one fact-extraction call: a session's turns
    wait until it has been quiet for memory_batch_quiet_seconds, or this many wait (and at most
    a minute); shutdown remembers what waits."""

    memory_batch_quiet_seconds: Annotated[float, Field(ge=0, le=60)] = 3.0
    """How long a session goes without a new turn before its waiting turns are remembered (and its
    index and running summary looked at); 0: after every turn."""

    memory_fact_scope: Literal["conversation", "namespace"] = "namespace"
    """Where extracted facts live: the conversation only, or its namespace (repo), shared by the
    namespace's conversations."""

    memory_scopes: tuple[ScopeLevel, ...] = ("conversation", "namespace", "global")
    """Scopes a request recalls from. Namespaces never see each other's memories."""

    memory_top_k: Annotated[int, Field(ge=1, le=100)] = 5
    """Memories injected per request."""

    memory_candidates_factor: Annotated[int, Field(ge=1, le=20)] = 3
    """Candidates taken from keyword and from dense search: top_k × this, each."""

    memory_recall_reuse_seconds: NonNegativeFloat = 60.0
    """An agent's tool loop asks the same question (its user's last message) on every step: a
    conversation's recall search is reused for this long while it does, each memory read again
    before it is injected (one deleted or changed since: searched anew); 0: search every
    request."""

    memory_max_entries: Annotated[int, Field(ge=1)] = 500
    """Cap on facts and turns per conversation; the oldest go first, summaries are exempt."""

    memory_entity_expansion: bool = True
    """Entity-aware expansion: a memory that says a rare word (a name, a place, an identifier) of
    one of the two best hits is recalled with it (+0.013 Recall@10 on LoCoMo dev, held out too, up
    in every category; no model)."""

    memory_fact_sources: bool = True
    """A recalled fact brings the remembered turn it was extracted from (within memory_top_k; only
    from a scope the request recalls from)."""

    memory_cites: bool = True
    """Code checks: a memory that names project files (conf/app.toml) records what they held when it
    was noted, and recall says when they changed, moved or were deleted since. Only where the
    namespace is a project folder on this machine; off: nothing recorded or read."""

    memory_cites_per_recall: Annotated[int, Field(ge=0, le=1000)] = 20
    """Cited files checked per recall at most (a stat each, a hash when one changed); memories past
    it are shown unchecked."""

    memory_session_summaries: bool = True
    """Recall the summaries session indexing writes (the namespace's other conversations) as
    memories."""

    memory_mmr_lambda: Fraction = 0.7
    """MMR diversity weight (1.0 = pure relevance)."""

    memory_recency_weight: Fraction = 0.05
    """Weight w in (1 − w)·relevance + w·exp(−age_days / 30): enough to put a newer entry ahead of
    an equally relevant older one (0.2 cost 1.2 points of Recall@10 on LoCoMo dev)."""

    memory_score_threshold: Fraction | None = None
    """Minimum relevance (0–1) a memory needs to be injected; empty: no filter."""

    memory_keyword_weight: NonNegativeFloat = 1.0
    """Weight of the keyword (BM25) list in rank fusion."""

    memory_dense_weight: NonNegativeFloat = 0.5
    """Weight of the dense (embedding) list in rank fusion."""

    memory_summarization: bool = True
    """Keep a rolling summary per conversation."""

    memory_git: bool = True
    """Version the memory files in a git repository (one commit per update)."""

    memory_watch: bool = False
    """Watch the memory files and re-index what a person creates, edits or deletes while the proxy
    runs (edits made while stopped are picked up at start)."""

    memory_reranker_path: str | None = None
    """Folder with a cross-encoder (model.onnx + tokenizer.json) to rerank with."""

    memory_reranker_url: str | None = None
    """A /v1/rerank endpoint (llama.cpp, vLLM, TEI) to rerank with."""

    memory_llm_model: str | None = None
    """Model for fact extraction, reconciliation and summaries; empty: llm_model, else the request's
    model."""

    @field_validator("memory_scopes", mode="before")
    @classmethod
    def _split_scopes(cls, value: Any) -> Any:
        """Environment values arrive as text: accept `conversation,global`."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value
