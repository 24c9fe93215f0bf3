"""The keyword cache's postings read from FTS5 itself, and what FTS5 says of its own state.

:func:`build` reads every posting of ``memories_fts`` through ``fts5vocab`` (the same tokenizer and stems as
FTS5's) in one read transaction; the other functions read FTS5's totals and structure record, the ``history``
position and its anchor, by which :class:`~engramdb.storage._kw_index.KeywordIndex` checks that a built or
loaded index still matches the database.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import I32 as _I32
    from engramdb.storage._arrays import Bool as _Bool
    from engramdb.storage._arrays import npt

__all__ = ["Postings", "anchor", "build", "fts_state", "fts_totals", "max_rid", "max_seq", "tokenizer"]

VOCAB: Final = "temp.engram_kw_vocab"


@dataclass(slots=True)
class Postings:
    """One built index: per term the sorted row keys and counts, plus per-row token counts."""

    seq: int
    #: A plain dict when built; a saved file's terms, decoded as queries name them, when loaded.
    terms: Mapping[str, tuple[_I32, npt.NDArray[Any]]]
    doc_len: _I32
    #: Rows whose postings above still hold (False: changed or forgotten since the build).
    base_alive: _Bool
    rows: int
    tokens: int
    #: FTS5's structure record when the cache last matched it (see KeywordIndex._current).
    structure: bytes = b""
    #: The history position at which ``structure`` was read.
    seq_checked: int = -1
    base_dead: int = 0
    #: Rows changed or added since the build: term -> {row key: count}, and row key -> its terms.
    delta_terms: dict[str, dict[int, int]] = field(default_factory=dict)
    delta_docs: dict[int, tuple[str, ...]] = field(default_factory=dict)
    #: The memory id of the history row at ``seq``: which database this is (see _kw_persist).
    anchor: str = ""
    #: The index's count of forgets when this content was read: saved only while no forget came since.
    forgets: int = 0


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (as in FTS5's records), decoded in order."""
    out, value, i = [], 0, 0
    while i < len(blob):
        byte = blob[i]
        value = (value << 7) | (byte & 0x7F)
        i += 1
        if not byte & 0x80:
            out.append(value)
            value = 0
    return out


def fts_totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """FTS5's own (rows, tokens over all columns) of ``memories_fts``: what bm25() divides by."""
    return fts_state(conn)[:2]


def fts_state(conn: sqlite3.Connection) -> tuple[int, int, bytes]:
    """FTS5's totals (see fts_totals) and its structure record, which changes with every write of the index."""
    blocks = dict(conn.execute("SELECT id, block FROM memories_fts_data WHERE id IN (1, 10)").fetchall())
    numbers = _varints(bytes(blocks.get(1) or b""))
    return (numbers[0] if numbers else 0), sum(numbers[1:]), bytes(blocks.get(10) or b"")


def tokenizer(conn: sqlite3.Connection) -> str:
    """The ``tokenize`` option of ``memories_fts`` (the private tokenising table must match it)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'").fetchone()
    found = re.search(r"tokenize\s*=\s*'([^']*)'", row[0] if row else "")
    return found.group(1) if found else "unicode61"


def max_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT max(seq) FROM history").fetchone()[0] or 0)


def anchor(conn: sqlite3.Connection, seq: int) -> str:
    """The memory id of history row ``seq`` (a random id: another store's file names another, or none)."""
    row = conn.execute("SELECT memory_id FROM history WHERE seq = ?", (seq,)).fetchone()
    return str(row[0]) if row else ""


def max_rid(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
    return int(row[0]) if row else 0


def build(conn: sqlite3.Connection) -> Postings:
    """Read every posting of ``memories_fts`` in one read transaction (run on a connection of its own)."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab(main, memories_fts, instance)")
    doc_len = np.zeros(0, dtype=np.int32)
    terms: dict[str, tuple[_I32, npt.NDArray[np.uint16 | np.int32]]] = {}
    conn.execute("BEGIN")
    try:
        seq = max_seq(conn)
        rows, tokens, structure = fts_state(conn)
        doc_len = np.zeros(max_rid(conn) + 1, dtype=np.int32)
        # One row per term: the string of its instances' row keys (sorted: the vocabulary walks
        # terms, then rows); an instance per occurrence, so run lengths are the counts. Read
        # term by term: only one term's string is held at a time.
        for term, joined in conn.execute(f"SELECT term, group_concat(doc) FROM {VOCAB} GROUP BY term"):
            docs = np.fromstring(joined, dtype=np.int64, sep=",")  # text mode: C parsing, ~6x split()
            if docs.size > 1 and np.any(docs[1:] < docs[:-1]):
                docs.sort()
            if docs[-1] >= doc_len.size:
                doc_len = np.concatenate([doc_len, np.zeros(int(docs[-1]) + 1 - doc_len.size, np.int32)])
            starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
            counts = np.diff(np.append(starts, docs.size))
            doc_len[docs[starts]] += counts.astype(np.int32)
            tf_type = np.uint16 if counts.max() <= np.iinfo(np.uint16).max else np.int32
            terms[term] = (docs[starts].astype(np.int32), counts.astype(tf_type))
    finally:
        if conn.in_transaction:  # an interrupt may already have ended it
            conn.execute("COMMIT")
    alive = np.ones(doc_len.size, dtype=bool)
    return Postings(seq, terms, doc_len, alive, rows, tokens, structure, seq, anchor=anchor(conn, seq))
