"""The advisory lock keys memlane's PostgreSQL store takes (two-int form, so they never meet
the per-session bigint locks): shared by the migrations and the vector index."""

from __future__ import annotations

# Advisory lock keys (two-int form, so they never meet the per-session bigint locks).
LOCK_CLASS = 0x6D6C  # "ml"
MIGRATION_LOCK = 1
VECTOR_INDEX_LOCK = 2
BATCH_LOCK = 3
"""Held by a replica's write batch (`store.group_commit`) until it commits."""
