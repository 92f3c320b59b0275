"""Hybrid retrieval as small pure stages: candidates → fuse → rerank → recency → MMR.

`search.search` is the entry point the read path, governance, the CLI, the
library and the evaluation all call; each stage is a function of its own module.
"""
