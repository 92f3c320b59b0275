"""The PostgreSQL + pgvector backend: one database shared by many proxy replicas."""

from memlane.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
