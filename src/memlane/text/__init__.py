"""Text services: tokens, embeddings, and the LLM client."""
