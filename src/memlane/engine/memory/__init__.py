"""Long-term memory: extraction, reconciliation, files, retrieval."""
