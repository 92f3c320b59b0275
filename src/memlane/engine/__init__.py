"""The engine: governance, memory, retrieval, sessions, scaffold."""
