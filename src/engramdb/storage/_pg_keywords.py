"""The PostgreSQL store's keyword ranking: BM25 of the embedded store's form (FTS5's ``bm25()``), from postings.

``ts_rank_cd`` read and ranked every matched row's ``tsv`` (most of a keyword statement's work: bench/RESULTS.md,
issue 26, eighth round) and has no inverse document frequency. Since schema step 11 the
reader's own matches are ranked from ``memory_terms`` instead: one index-only range scan per question lexeme yields
each matching memory's count of it and its length, and the score is FTS5's BM25 (k1 1.2, b 0.75, its idf floored at
1e-6, written once in the schema as ``engram_bm25_part``), summed over the question's lexemes. Other agents' public and
shared rows, and a search over every agent, are ranked from their ``tsv`` by ``engram_bm25``: the same formula.

The store-wide figures BM25 needs (rows, each lexeme's document count, the mean length) come from the store's lexeme
sample (:mod:`._pg_terms`), as the term choice already did: like the embedded store's global counts, they are the
whole store's, not the reader's. Without a sample (a store never analysed) every lexeme weighs 1 and lengths are
not normalised. Terms are chosen as the embedded store chooses them (:func:`~._keyword_budget.bounded_terms`: the
rarest first while their document counts fit :data:`~._keyword_budget.KEYWORD_POSTINGS_BUDGET`), and each term reads
at most its newest ``term_postings`` postings among the reader's rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from engramdb.storage._keyword_budget import KEYWORD_POSTINGS_BUDGET, bounded_terms
from engramdb.storage._pg_terms import SampledFrequencies

__all__ = ["KEYWORD_TERM_POSTINGS", "Bm25Query", "bm25_query", "fts5_idf", "own_scores_sql", "tsquery_text"]

#: A question term's postings among the reader's own rows read at most, newest first. The embedded store ranks every
#: posting of the terms it keeps (at most :data:`KEYWORD_POSTINGS_BUDGET` over the whole store, the rarest always):
#: the same bound, applied to a term's postings in the reader's scope, only binds when its rarest term alone is
#: over it there (one reader holding most of a 1M store).
KEYWORD_TERM_POSTINGS: Final = KEYWORD_POSTINGS_BUDGET
#: FTS5's floor for a term in more than half the rows (its idf would be negative).
_MIN_IDF: Final = 1e-6


def fts5_idf(documents: float, rows: float) -> float:
    """FTS5's inverse document frequency of a term in ``documents`` of ``rows`` (``fts5Bm25Function``)."""
    idf = math.log((rows - documents + 0.5) / (documents + 0.5))
    return idf if idf > 0.0 else _MIN_IDF


@dataclass(frozen=True, slots=True, kw_only=True)
class Bm25Query:
    """The lexemes a keyword search ranks by, their idf weights, and the store's mean row length (None: lengths
    are not normalised)."""

    lexemes: tuple[str, ...]
    idf: tuple[float, ...]
    mean_length: float | None


def bm25_query(
    terms: Sequence[str],
    lexemes: Mapping[str, tuple[str, ...]],
    *,
    sample: SampledFrequencies | None,
    budget: int = KEYWORD_POSTINGS_BUDGET,
) -> Bm25Query | None:
    """The BM25 query of ``terms`` (``lexemes``: each term's stems), or None when no term has a lexeme.

    With a ``sample``, the rarest lexemes are kept while their estimated document counts fit ``budget`` (the rarest
    always), each weighted by FTS5's idf; without one, every lexeme is kept with weight 1.
    """
    stems = list(dict.fromkeys(x for t in terms for x in lexemes.get(t, ())))
    if not stems:
        return None
    if sample is None or sample.total <= 0:
        return Bm25Query(lexemes=tuple(stems), idf=tuple(1.0 for _ in stems), mean_length=None)
    counts = [sample.rows(x) for x in stems]
    kept = bounded_terms(stems, [round(c) for c in counts], budget=budget)
    rows = max(sample.total, 1.0)
    by_stem = dict(zip(stems, counts, strict=True))
    return Bm25Query(
        lexemes=tuple(kept),
        idf=tuple(fts5_idf(by_stem[x], rows) for x in kept),
        mean_length=sample.mean_length if sample.mean_length > 0 else None,
    )


def tsquery_text(lexemes: Sequence[str]) -> str:
    """A ``tsquery`` (text form) matching any of ``lexemes`` as they are (no parsing or stemming: they are stems).

    Each is quoted, a quote or backslash in it escaped, so user text never reads as query syntax.
    """
    quoted = ("'" + x.replace("\\", "\\\\").replace("'", "''") + "'" for x in lexemes)
    return " | ".join(quoted)


def own_scores_sql() -> str:
    """The reader's own rows matching the query's lexemes with their BM25 scores (``rid``, ``score``), from the
    postings' index alone: each lexeme's newest postings of the reader, summed per row.

    Parameters: the mean length (or NULL), the lexemes, their idf weights, the reader, the postings per lexeme.
    """
    return (
        "SELECT t.rid, sum(engram_bm25_part(q.idf, t.tf, t.dl, coalesce(?::float8, t.dl::float8))) AS score "
        "FROM unnest(?::text[], ?::float8[]) AS q (lexeme, idf) "
        "CROSS JOIN LATERAL (SELECT p.rid, p.tf, p.dl FROM memory_terms p WHERE p.agent = ? AND p.lexeme = q.lexeme "
        "ORDER BY p.rid DESC LIMIT ?) t GROUP BY t.rid"
    )
