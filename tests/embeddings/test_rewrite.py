"""A question in statement form (``statement_form``; the searcher's ``statement_query``, measured, off by default)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.local import LocalEmbedder
from engramdb.embeddings.rewrite import statement_form
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.storage.base import Filter


@pytest.mark.parametrize(
    ("question", "statement"),
    [
        ("how do I book time off?", "book time off"),
        ("why did builds fail on CI?", "builds fail on CI because"),
        ("why not push an update to everyone at once?", "not push an update to everyone at once because"),
        ("what versioning scheme do we use?", "we use versioning scheme"),
        ("how long should we wait for the model?", "we wait for the model long"),
        ("can raw emails go to the analytics tool?", "raw emails go to the analytics tool"),
        ("a user asked for their data; who handles it?", "a user asked for their data; handles it"),
        ("how to page through results", "page through results"),
        ("retry an HTTP request with backoff", "retry an HTTP request with backoff"),
        ("  users never get the reset link?  ", "users never get the reset link"),
    ],
)
def test_examples(question: str, statement: str) -> None:
    assert statement_form(question) == statement


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w']+", text.lower()))


_PIECES = st.sampled_from(["a", "b", "c", " ", "?", ";", "why ", "how ", "do ", "what ", "is ", "I ", "not ", "to "])


@given(st.one_of(st.lists(_PIECES, max_size=20).map("".join), st.text(max_size=60)))
def test_no_word_is_added_but_because_and_not(question: str) -> None:
    out = statement_form(question)
    assert _words(out) <= _words(question) | {"because", "not"}
    assert out == out.strip()
    assert not out.endswith("?")


def test_the_searcher_embeds_the_statement_only_when_asked(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    question = "how do I book time off?"
    with Engram(tmp_path / "store", embedder=local_embedder) as mem:
        mem.remember("Vacation requests go into Personio two weeks ahead", agent="t")
        mem.remember("Does anyone know how to book the company car?", agent="t")
        searchers = [HybridSearcher(mem.store, local_embedder) for _ in range(3)]
        try:
            results = []
            for mode, searcher in enumerate(searchers):
                searcher.statement_query = mode
                results.append(
                    searcher.search(question, Filter(agent="t"), limit=2, now=datetime.now(UTC), touch=False)
                )
        finally:
            for searcher in searchers:
                searcher.close()
    asked, stated = local_embedder.embed([question, statement_form(question)])
    # The vector channel's cosines: the question's (0), the statement's (1), the higher of the two (2).
    for mode, hits in enumerate(results):
        assert len(hits) == 2
        for hit in hits:
            stored = local_embedder.embed([hit.memory.content])[0]
            both = (float(np.dot(asked, stored)), float(np.dot(stated, stored)))
            assert hit.vector_score == pytest.approx((both[0], both[1], max(both))[mode], abs=1e-4)
    assert {h.vector_score for h in results[0]} != {h.vector_score for h in results[1]}
