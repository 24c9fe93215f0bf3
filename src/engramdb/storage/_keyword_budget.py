"""A bound on the work of one keyword query: the rarest terms, up to a budget of postings.

FTS5 has no early-terminating top-k (no WAND): an ``OR`` query ranks every document that
contains any of its terms, so its cost grows with the store. At 100k memories a question's
terms match ~8% of the rows (a speaker's name, "friends", "going" ...) and ranking them is
most of the keyword channel's time; at 1M it would be ten times that.

BM25 already tells which terms matter least: a term's weight is its inverse document
frequency, so the commonest terms add the least to any score and bring in the most
documents. :func:`bounded_terms` keeps terms from the rarest up while the documents they
match (their document frequencies summed) stay within a budget; the rarest term is always
kept. Small stores never reach the budget, so their results are exactly BM25 over every
term; large ones drop only their commonest query terms.

Document frequencies come from counting each term's matches once (``count(*)`` of a
one-term FTS5 query walks only that term's posting list) and are cached per term until the
store has grown by a tenth: a stale count only shifts which common term is dropped. Once a
store's keyword index is built (:mod:`engramdb.storage._kw_index`) the counts come from it
instead: exact and free.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

__all__ = ["KEYWORD_POSTINGS_BUDGET", "DocFrequencies", "bounded_terms"]

#: Postings one keyword query may rank (see the module docstring). Chosen on the dev sets with
#: ``bench/scale.py --keyword-recall`` (every LoCoMo conversation among LongMemEval distractors,
#: 100k memories, keyword recall@50 of evidence): unbounded 65.8, 40k 65.8, 20k 65.9, 10k 64.4,
#: 5k 62.5. 20k is the smallest budget that loses nothing; it leaves most 100k-memory queries
#: whole and caps what a query ranks at 1M memories at about what it ranks at 100k.
KEYWORD_POSTINGS_BUDGET: Final = 20_000
#: Cached counts are refreshed once the store has this many times the memories it had.
_REFRESH_GROWTH: Final = 1.1
_MAX_CACHED_TERMS: Final = 50_000


def bounded_terms(terms: Sequence[str], frequencies: Sequence[int], *, budget: int) -> list[str]:
    """The terms to query: rarest first while their summed frequencies fit ``budget``, in the original order.

    Terms matching nothing are kept (they cost nothing). The rarest matching term is always kept,
    so a query of only common terms still finds something.
    """
    if len(terms) != len(frequencies):
        raise ValueError("one frequency per term")
    order = sorted(range(len(terms)), key=lambda i: frequencies[i])
    keep: set[int] = set()
    spent = 0
    for i in order:
        df = frequencies[i]
        # `spent` is 0 until a matching term is kept: the rarest matching term always is.
        if spent and spent + df > budget:
            break
        keep.add(i)
        spent += df
    return [t for i, t in enumerate(terms) if i in keep]


class DocFrequencies:
    """Cached per-term document counts of one store's keyword index (use under the store's lock)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._size = 0

    def clear(self) -> None:
        """Forget every count (the store closed)."""
        self._counts.clear()
        self._size = 0

    def of(self, conn: sqlite3.Connection, terms: Sequence[str], quoted: Sequence[str]) -> list[int]:
        """The number of memories matching each term (``quoted``: the same terms as FTS5 strings)."""
        size = _store_size(conn)
        if size > self._size * _REFRESH_GROWTH or size < self._size or len(self._counts) > _MAX_CACHED_TERMS:
            self._counts.clear()
            self._size = size
        out = []
        for term, phrase in zip(terms, quoted, strict=True):
            n = self._counts.get(term)
            if n is None:
                n = self._counts[term] = int(
                    conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (phrase,)).fetchone()[
                        0
                    ]
                )
            out.append(n)
        return out


def _store_size(conn: sqlite3.Connection) -> int:
    """The largest memory key ever assigned: an O(1) stand-in for the number of memories."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
    return int(row[0]) if row else 0
