"""A store's health check (``engram doctor``): is the data intact, consistent and fully audited?

:class:`Doctor` runs read-only checks and returns a :class:`~engramdb.models.HealthReport`:

* ``database``: the database's own check (SQLite ``PRAGMA integrity_check``, or
  ``quick_check`` with ``quick=True``; PostgreSQL checks its own pages: not applicable);
* ``keyword_index``: the full-text index is in step with the memories (FTS5 ``integrity-check``);
* ``vectors``: every memory has a vector from the store's model, of the embedder's dimension,
  finite and of unit length;
* ``audit_chain``: the hash chain verifies against the stored head (:func:`engramdb.auditchain.verify`);
* ``audit_coverage``: every change in the history has its audit entry
  (:func:`engramdb.auditcoverage.coverage`).

A failing check names what is wrong in one line; a check that cannot run because the data
is unreadable fails with the error it met, and the other checks still run. :func:`examine`
opens a store by location just for the checks (without the facade's own start-up reads), so
a store the facade refuses to open is still examined, or reported as an ``open`` failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

import numpy as np

from engramdb import auditchain, auditcoverage
from engramdb.config import Settings, load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.errors import EngramError
from engramdb.models import AuditEvent, Change, HealthCheck, HealthReport
from engramdb.storage import open_store
from engramdb.storage.base import MODEL_META_KEY, Store, StoredVector

__all__ = ["CHECKS", "Doctor", "examine"]

#: The checks :meth:`Doctor.run` runs, in order.
CHECKS: Final = ("database", "keyword_index", "vectors", "audit_chain", "audit_coverage")

#: How far a stored vector's length may be from 1.
_NORM_TOLERANCE: Final = 1e-3
_PAGE: Final = 1000
_SHOWN: Final = 3


def examine(
    location: str | None = None,
    *,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    quick: bool = False,
) -> HealthReport:
    """Open the store at ``location`` (default: the settings' home) and run every check.

    ``embedder`` defaults to the configured one; if it cannot be made, vectors are checked
    against the store's own model. A store that cannot be opened (emptied, vanished, a damaged
    header) gives a report with one failed ``open`` check.
    """
    settings = settings if settings is not None else load_settings()
    where = location if location is not None else str(settings.home)
    try:
        store = open_store(where, settings=settings)
    except EngramError as exc:
        return HealthReport(location=where, checks=(HealthCheck(name="open", ok=False, detail=_first_line(exc)),))
    try:
        if embedder is None:
            try:
                embedder = make_embedder(settings)
            except EngramError:
                embedder = None
        return Doctor(store, embedder, settings, quick=quick).run()
    finally:
        store.close()


class Doctor:
    """Checks one open store; see the module docstring. Read-only: it never repairs anything."""

    def __init__(self, store: Store, embedder: Embedder | None, settings: Settings, *, quick: bool = False) -> None:
        self._store = store
        self._embedder = embedder
        self._settings = settings
        self._quick = quick

    def run(self) -> HealthReport:
        """Run every check (each even if an earlier one failed)."""
        checks: dict[str, Callable[[], HealthCheck]] = {
            "database": self.database,
            "keyword_index": self.keyword_index,
            "vectors": self.vectors,
            "audit_chain": self.audit_chain,
            "audit_coverage": self.audit_coverage,
        }
        return HealthReport(location=self._store.location, checks=tuple(_guarded(n, checks[n]) for n in CHECKS))

    # -- the checks ---------------------------------------------------------------------------------------
    def database(self) -> HealthCheck:
        """The database's own consistency check."""
        problems = self._store.checks.database(quick=self._quick)
        if problems is None:
            return HealthCheck(name="database", ok=True, detail="not applicable: the server checks its own pages")
        kind = "quick_check" if self._quick else "integrity_check"
        if problems:
            return HealthCheck(name="database", ok=False, detail=f"{kind}: {_listed(problems)}")
        pending = self._store.checks.pending()
        note = f"; {pending} read bookkeeping items wait for the next write" if pending else ""
        return HealthCheck(name="database", ok=True, detail=f"{kind} ok{note}")

    def keyword_index(self) -> HealthCheck:
        """The keyword index against the memories table."""
        problems = self._store.checks.keyword_index()
        if problems:
            return HealthCheck(name="keyword_index", ok=False, detail=f"out of step: {_listed(problems)}")
        return HealthCheck(name="keyword_index", ok=True, detail="in step with the memories")

    def vectors(self) -> HealthCheck:
        """Every memory has a sound vector from the store's model."""
        stored_model = self._store.meta.get(MODEL_META_KEY)
        model = self._embedder.model_id if self._embedder is not None else stored_model
        dim = self._embedder.dim if self._embedder is not None else None
        counts = _VectorCounts()
        for batch in self._store.checks.iter_vectors(batch=_PAGE):
            for row in batch:
                counts.add(row, model=model, dim=dim)
        if counts.total == 0:
            return HealthCheck(name="vectors", ok=True, detail="no memories")
        if stored_model is not None and model is not None and stored_model != model:
            return HealthCheck(
                name="vectors",
                ok=False,
                detail=f"the store searches vectors of model {stored_model!r}, this embedder is {model!r}: re-embed",
            )
        return counts.check()

    def audit_chain(self) -> HealthCheck:
        """The hash chain and the stored head."""
        result = auditchain.verify(self._events(), head=self._store.audit.head())
        if not result.ok:
            return HealthCheck(name="audit_chain", ok=False, detail=result.reason)
        return HealthCheck(name="audit_chain", ok=True, detail=f"{result.checked} entries intact")

    def audit_coverage(self) -> HealthCheck:
        """Every recorded change has its audit entry."""
        if not self._settings.audit:
            return HealthCheck(name="audit_coverage", ok=True, detail="not checked: auditing is off")
        result = auditcoverage.coverage(self._history(), self._events())
        if result.missing:
            shown = ", ".join(f"{c.action} of {c.memory_id} at {c.at.isoformat()}" for c in result.missing[:_SHOWN])
            more = f" and {len(result.missing) - _SHOWN} more" if len(result.missing) > _SHOWN else ""
            return HealthCheck(
                name="audit_coverage",
                ok=False,
                detail=f"{len(result.missing)} of {result.checked} changes have no audit entry: {shown}{more}",
            )
        if result.checked == 0 and result.skipped and self._store.audit.head() is None:
            return HealthCheck(
                name="audit_coverage",
                ok=False,
                detail=f"the audit trail is empty but {result.skipped} changes are recorded "
                "(the trail was removed, or auditing was off when they were made)",
            )
        before = f" ({result.skipped} before the trail began or not audited)" if result.skipped else ""
        return HealthCheck(name="audit_coverage", ok=True, detail=f"{result.checked} changes audited{before}")

    # -- paging -------------------------------------------------------------------------------------------
    def _events(self) -> Iterator[AuditEvent]:
        after = 0
        while True:
            page = self._store.audit.events(after_seq=after, limit=_PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].seq

    def _history(self) -> Iterator[Change]:
        after = 0
        while True:
            page = self._store.memories.history_all(after_seq=after, limit=_PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].seq


class _VectorCounts:
    """Tally of vector problems by kind, with the first few ids of each."""

    def __init__(self) -> None:
        self.total = 0
        self.problems: dict[str, list[str]] = {}

    def add(self, row: StoredVector, *, model: str | None, dim: int | None) -> None:
        self.total += 1
        problem = _vector_problem(row, model=model, dim=dim)
        if problem is not None:
            self.problems.setdefault(problem, []).append(row.memory_id)

    def check(self) -> HealthCheck:
        if not self.problems:
            return HealthCheck(name="vectors", ok=True, detail=f"{_memories(self.total)}, every vector sound")
        parts = [
            f"{len(ids)} {problem} (e.g. {', '.join(ids[:_SHOWN])})" for problem, ids in sorted(self.problems.items())
        ]
        bad = sum(len(ids) for ids in self.problems.values())
        return HealthCheck(name="vectors", ok=False, detail=f"{bad} of {_memories(self.total)}: {'; '.join(parts)}")


def _memories(n: int) -> str:
    return f"{n} memory" if n == 1 else f"{n} memories"


def _vector_problem(row: StoredVector, *, model: str | None, dim: int | None) -> str | None:
    """What is wrong with one stored vector, or None."""
    if row.vector is None or row.model_id is None:
        return "without a vector"
    if model is not None and row.model_id != model:
        return "with a vector from another model"
    if row.dim is None or row.vector.shape != (row.dim,) or (dim is not None and row.dim != dim):
        return "with a vector of the wrong dimension"
    if not bool(np.isfinite(row.vector).all()):
        return "with a vector that is not finite"
    if abs(float(np.linalg.norm(row.vector.astype(np.float64))) - 1.0) > _NORM_TOLERANCE:
        return "with a vector not of unit length"
    return None


def _listed(problems: list[str]) -> str:
    shown = "; ".join(p.replace("\n", " ") for p in problems[:_SHOWN])
    return shown + (f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else "")


def _guarded(name: str, check: Callable[[], HealthCheck]) -> HealthCheck:
    """Run one check; an error it meets (unreadable data) fails that check only."""
    try:
        return check()
    except EngramError as exc:
        return HealthCheck(name=name, ok=False, detail=f"could not check: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
