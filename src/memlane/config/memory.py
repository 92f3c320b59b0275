"""Settings owned by the memory part of memlane (long-term memory and its retrieval).

The defaults: `top_k` 5, `max_entries` 500, `mmr_lambda` 0.7 (with dense
retrieval), `recency_weight` 0.05, no score threshold, summarisation and git
versioning on, no file watcher unless asked.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ScopeLevel = Literal["conversation", "namespace", "global"]


class MemorySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_enabled: bool = Field(
        default=True,
        description="Keep long-term memory: store turns and facts, recall them into requests.",
    )
    memory_dense: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Dense (embedding) retrieval beside keyword search. auto: on only when "
        "embedding_backend is an endpoint (openai); on: also with the packaged model; off: "
        "keyword search over context-expanded turns, no model on the request path.",
    )
    recall_deadline_ms: int = Field(
        default=50,
        ge=1,
        description="Longest recall may take in front of a request; past it the request is "
        "forwarded without memories (and the overrun recorded).",
    )
    memory_mode: Literal["always", "trimmed"] = Field(
        default="always",
        description="When the proxy injects recalled memories: on every request, or only "
        "when governance had to trim the request.",
    )
    memory_extract_facts: bool = Field(
        default=True,
        description="Extract facts from each user message with the LLM, after the response.",
    )
    memory_store_turns: bool = Field(
        default=True,
        description="Keep each user and assistant turn as a memory entry of its conversation.",
    )
    memory_fact_scope: Literal["conversation", "namespace"] = Field(
        default="namespace",
        description="Where extracted facts live: the conversation only, or its namespace "
        "(repo), shared by the namespace's conversations.",
    )
    memory_scopes: tuple[ScopeLevel, ...] = Field(
        default=("conversation", "namespace", "global"),
        description="Scopes a request recalls from. Namespaces never see each other's memories.",
    )
    memory_top_k: int = Field(default=5, ge=1, le=100, description="Memories injected per request.")
    memory_candidates_factor: int = Field(
        default=3,
        ge=1,
        le=20,
        description="Candidates taken from keyword and from dense search: top_k × this, each.",
    )
    memory_max_entries: int = Field(
        default=500,
        ge=1,
        description="Cap on facts and turns per conversation; the oldest go first, "
        "summaries are exempt.",
    )
    memory_entity_expansion: bool = Field(
        default=True,
        description="Entity-aware expansion: a memory that says a rare word (a name, a place, "
        "an identifier) of one of the two best hits is recalled with it (+0.013 Recall@10 on "
        "LoCoMo dev held out, up in every category; no model).",
    )
    memory_fact_sources: bool = Field(
        default=True,
        description="A recalled fact brings the remembered turn it was extracted from "
        "(within memory_top_k; only from a scope the request recalls from).",
    )
    memory_session_summaries: bool = Field(
        default=True,
        description="Recall the summaries session indexing writes (the namespace's other "
        "conversations) as memories.",
    )
    memory_mmr_lambda: float = Field(
        default=0.7, ge=0.0, le=1.0, description="MMR diversity weight (1.0 = pure relevance)."
    )
    memory_recency_weight: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="Weight w in (1 − w)·relevance + w·exp(−age_days / 30): enough to put a "
        "newer entry ahead of an equally relevant older one (0.2 cost 1.2 points of "
        "Recall@10 on LoCoMo dev).",
    )
    memory_score_threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Minimum relevance (0–1) a memory needs to be injected; empty: no filter.",
    )
    memory_keyword_weight: float = Field(
        default=1.0,
        ge=0.0,
        description="Weight of the keyword (BM25) list in rank fusion.",
    )
    memory_dense_weight: float = Field(
        default=0.5,
        ge=0.0,
        description="Weight of the dense (embedding) list in rank fusion.",
    )
    memory_summarization: bool = Field(
        default=True, description="Keep a rolling summary per conversation."
    )
    memory_git: bool = Field(
        default=True,
        description="Version the memory files in a git repository (one commit per update).",
    )
    memory_watch: bool = Field(
        default=False,
        description="Watch the memory files and re-index what a person creates, edits or "
        "deletes while the proxy runs (edits made while stopped are picked up at start).",
    )
    memory_reranker_path: str | None = Field(
        default=None,
        description="Folder with a cross-encoder (model.onnx + tokenizer.json) to rerank with.",
    )
    memory_reranker_url: str | None = Field(
        default=None,
        description="A /v1/rerank endpoint (llama.cpp, vLLM, TEI) to rerank with.",
    )
    memory_llm_model: str | None = Field(
        default=None,
        description="Model for fact extraction, reconciliation and summaries; empty: "
        "llm_model, else the request's model.",
    )

    @field_validator("memory_scopes", mode="before")
    @classmethod
    def _split_scopes(cls, value: Any) -> Any:
        """Environment values arrive as text: accept `conversation,global`."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value
