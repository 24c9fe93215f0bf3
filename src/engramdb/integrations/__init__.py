"""engramdb inside agent frameworks, each behind an optional extra.

- :mod:`engramdb.integrations.langchain` (``pip install "engramdb[langchain]"``): :func:`memory_tools` gives a
  LangChain agent memory tools bound to one agent (``save_pattern``, ``recall_patterns``, ``get_pattern_stats``,
  ``remember``, ``search``, ``suggest``, ``record_outcome``).
- :mod:`engramdb.integrations.langgraph` (``pip install "engramdb[langgraph]"``): :class:`EngramStore`, a LangGraph
  long-term store (``BaseStore``) with engramdb's hybrid search, redaction and audit trail.
- :mod:`engramdb.integrations.chroma` (``pip install "engramdb[chroma]"``): :func:`import_chroma` brings the
  collections of a Chroma persist directory into an engramdb store (``engram import chroma PATH``).

This package imports none of those frameworks itself: import the submodule you need.
"""

from __future__ import annotations

__all__: list[str] = []
