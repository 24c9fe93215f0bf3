"""Where the keyword channel runs (the worker thread or the caller) changes latency only, never the results."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from engramdb import Engram
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.storage.base import Filter

TURNS = [
    "Caroline: The support group met on Tuesday and we talked about coming out.",
    "Melanie: I painted a sunrise over the lake last weekend.",
    "Caroline: My counselling course starts in September.",
    "Melanie: The kids loved the camping trip, we roasted marshmallows.",
    "Caroline: I went to a pride parade with friends in June.",
    "Melanie: Pottery class was fun, I made a blue bowl.",
]
QUERIES = ("What did Melanie paint?", "pride parade in June", "camping with the kids", "support group")


def _recording_threads(searcher_store: Any) -> list[str]:
    """Wrap the store's keyword channel to record the name of the thread each call runs on."""
    names: list[str] = []
    inner = searcher_store.search.keyword_candidates

    def keyword_candidates(*args: Any, **kwargs: Any) -> Any:
        names.append(threading.current_thread().name)
        return inner(*args, **kwargs)

    searcher_store.search.keyword_candidates = keyword_candidates
    return names


def test_both_placements_of_the_keyword_channel_give_the_same_hits(mem: Engram) -> None:
    for text in TURNS:
        mem.remember(text, agent="a", kind="conversation")
    now = datetime.now(UTC)
    flt = Filter(agent="a")
    searchers = {mode: HybridSearcher(mem.store, mem.embedder) for mode in (True, False)}
    for mode, searcher in searchers.items():
        searcher.overlap_keyword = mode
    try:
        for query in QUERIES:
            found = {
                mode: [
                    (h.memory.id, h.score, h.keyword_score, h.vector_score)
                    for h in s.search(query, flt, limit=5, now=now, touch=False)
                ]
                for mode, s in searchers.items()
            }
            assert found[True] == found[False]
            assert found[True]
    finally:
        for searcher in searchers.values():
            searcher.close()


def test_the_keyword_channel_runs_where_it_is_told(mem: Engram) -> None:
    for text in TURNS:
        mem.remember(text, agent="a", kind="conversation")
    names = _recording_threads(mem.store)
    searcher = HybridSearcher(mem.store, mem.embedder)
    now, flt = datetime.now(UTC), Filter(agent="a")
    caller = threading.current_thread().name
    try:
        searcher.search("pottery class", flt, limit=5, now=now, touch=False)
        assert names[-1] != caller  # the default: overlapped with the embedding and the vector channel
        searcher.overlap_keyword = False
        searcher.search("pottery class", flt, limit=5, now=now, touch=False)
        assert names[-1] == caller
        searcher.search("?!", flt, limit=5, now=now, touch=False)  # no terms: no keyword query at all
        assert len(names) == 2
    finally:
        searcher.close()
