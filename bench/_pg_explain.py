"""The plans of one client's search statements, as they ran: ``auto_explain`` (ANALYZE, BUFFERS) on its connections.

``ExplainLog.attach(mem)`` loads ``auto_explain`` into every pooled connection of a PostgreSQL ``Engram`` (its
searches' statements, and only its, are logged with their executed plans); ``mark(label)`` notes where the server
log stands, and ``summary()`` gives, per phase between marks and per statement kind, the median execution time and
shared buffers hit and read. bench/pg_writers.py ``--explain``: the same statements idle and during the writes.
"""

from __future__ import annotations

import itertools
import re
import statistics
from pathlib import Path
from typing import Any

__all__ = ["ExplainLog"]

_ENTRY = re.compile(r"duration: ([\d.]+) ms\s+plan:\n(.*?)(?=\n\S[^\n]*(?:LOG|ERROR|STATEMENT):|\Z)", re.S)
# The keyword statement returns its rows' vectors too: it is told apart first.
_KINDS = (
    ("keyword", "ts_rank_cd"),
    ("vector", "v.embedding"),
    ("access counts", "UPDATE memories SET last_accessed"),
    ("pending-list clean", "gin_clean_pending_list"),
)


def _kind(text: str) -> str:
    query = text.partition("Query Text:")[2][:4000]
    return next((name for name, needle in _KINDS if needle in query), "other")


class ExplainLog:
    def __init__(self, log: Path) -> None:
        self._log = log
        self._marks: list[tuple[str, int]] = []

    def attach(self, mem: Any) -> int:
        """Load auto_explain into each connection of ``mem``'s pool (all of them at once); how many."""
        backend = mem._pipeline._store.search._backend
        pool = backend._require_pool()
        conns = [pool.getconn() for _ in range(pool.max_size)]
        try:
            for conn in conns:
                conn.execute("LOAD 'auto_explain'")
                for setting, value in (
                    ("auto_explain.log_min_duration", "0"),
                    ("auto_explain.log_analyze", "on"),
                    ("auto_explain.log_buffers", "on"),
                    ("auto_explain.log_timing", "off"),  # per-node timing would slow the plans themselves
                    ("auto_explain.log_nested_statements", "on"),
                ):
                    conn.execute("SELECT set_config(%s, %s, false)", (setting, value))
        finally:
            for conn in conns:
                pool.putconn(conn)
        return len(conns)

    def mark(self, label: str) -> None:
        self._marks.append((label, self._log.stat().st_size))

    def summary(self) -> dict[str, Any]:
        text = self._log.read_bytes()
        out: dict[str, Any] = {}
        bounds = [*self._marks, ("", len(text))]
        for (label, begin), (_, end) in itertools.pairwise(bounds):
            by_kind: dict[str, list[tuple[float, int, int]]] = {}
            for m in _ENTRY.finditer(text[begin:end].decode(errors="replace")):
                plan = m.group(2)
                top = re.search(r"Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?", plan)
                hit = int(top.group(1) or 0) if top else 0
                read = int(top.group(2) or 0) if top else 0
                by_kind.setdefault(_kind(plan), []).append((float(m.group(1)), hit, read))
            out[label] = {
                kind: {
                    "n": len(rows),
                    "ms_p50": round(statistics.median(r[0] for r in rows), 2),
                    "shared_hit_p50": statistics.median(r[1] for r in rows),
                    "shared_read_p50": statistics.median(r[2] for r in rows),
                }
                for kind, rows in sorted(by_kind.items())
            }
        return out
