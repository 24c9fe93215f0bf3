"""engramdb: a persistent memory and learning layer for LLM agents."""
