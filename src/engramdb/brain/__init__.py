"""The brain's pure rules (seed 002): fact extraction, dates, sentiment, the routing table; the optional LLM client.

The services built on them (context, distillation, reasoning, routing, conversations) are in :mod:`engramdb.services`.
"""
