"""Hypothesis strategies shared by the tests of the steps that reorder a fused list by session."""

from __future__ import annotations

from hypothesis import strategies as st

from engramdb.retrieval.ranking import Fused

IDS = "abcdefgh"
relevances = st.floats(min_value=0, max_value=1, allow_nan=False)
fused_lists = st.lists(st.tuples(st.sampled_from(IDS), relevances), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Fused(i, r, None, None) for i, r in xs), key=lambda f: (-f.relevance, f.id))
)
session_maps = st.dictionaries(st.sampled_from(IDS), st.none() | st.sampled_from(["s1", "s2", "s3"]), max_size=8)
