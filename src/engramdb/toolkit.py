"""Public calls that work beside an :class:`~engramdb.Engram` rather than through one.

Interfaces and integrations use only the public API; these are the few things they need that an open
store cannot give, or that are pure values-in, values-out over what the API returns:

- :func:`examine` checks a store by location, a damaged one too (``engram doctor``): opening it through
  ``Engram`` would run the facade's start-up reads, which stop at the damage;
- :func:`store_exists` / :func:`require_store`: whether a folder holds a store, without creating one;
- :func:`available_packs` / :func:`load_pack`: the shipped knowledge packs, read without a store;
- :func:`redacted`: what a store's redaction policy makes of a text (``mem.redaction``), e.g. to know
  whether a document is stored as it is;
- :func:`learning_curves`: success over time per category, from ``mem.learning.outcomes`` and
  ``mem.learning.trends``, at a chosen resolution;
- :func:`text_relevance`: the calibrated relevance a search gives a text, its embedding's cosine given (to
  score a query against part of a memory, e.g. a saved pattern's task without its steps).

Every import is inside its function, so naming this module loads neither the storage nor numpy.
The names below are kept stable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engramdb.models import CategoryTrend, DecisionRecord, HealthReport, Pack, RedactionPolicy, TimelinePoint

__all__ = [
    "available_packs",
    "examine",
    "learning_curves",
    "load_pack",
    "redacted",
    "require_store",
    "store_exists",
    "text_relevance",
]


def _location(location: str | os.PathLike[str]) -> str:
    from engramdb.errors import ValidationError

    if not isinstance(location, str | os.PathLike):
        raise ValidationError(f"location must be a path or a URL, not {type(location).__name__}")
    text = os.fspath(location)
    if not isinstance(text, str):
        raise ValidationError("location must be a text path, not bytes")
    return text


def examine(location: str | os.PathLike[str] | None = None, *, quick: bool = False) -> HealthReport:
    """Check the store at ``location`` (default: the ``home`` setting) for damage, read-only.

    Integrity, keyword index, vectors, audit chain and coverage (see ``mem.doctor``). A store that
    cannot be opened gives a report with one failed ``open`` check; a folder holding no store raises
    :class:`~engramdb.errors.NotFound` (a mistyped path is not a healthy new store).
    """
    from engramdb._validate import shown
    from engramdb.config import load_settings
    from engramdb.errors import ValidationError
    from engramdb.services.doctor import examine as run

    if not isinstance(quick, bool):
        raise ValidationError(f"quick must be true or false, not {shown(quick)}")
    settings = load_settings()
    where = _location(location) if location is not None else str(settings.home)
    require_store(where)
    return run(where, settings=settings, quick=quick)


def require_store(location: str | os.PathLike[str]) -> None:
    """:class:`~engramdb.errors.NotFound`, naming the path, unless ``location`` holds a store.

    A database URL or ``":memory:"`` passes (a server or the process holds it), and so does a path that
    exists but is no store folder: opening it then says what is wrong with it.
    """
    from engramdb.storage import require_store as required

    required(_location(location))


def store_exists(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` holds a store (:func:`require_store` passes); nothing is created."""
    from engramdb.errors import NotFound

    try:
        require_store(location)
    except NotFound:
        return False
    return True


def available_packs() -> list[str]:
    """The names of the knowledge packs shipped with engramdb, sorted (``mem.knowledge.seed`` loads one)."""
    from engramdb.services.packs import available_packs as names

    return names()


def load_pack(name: str) -> Pack:
    """The shipped pack ``name``, validated; ValidationError for an unknown one (listing the known ones)."""
    from engramdb.services.packs import load_pack as load

    return load(name)


def redacted(text: str, *, policy: RedactionPolicy) -> str:
    """``text`` as a store with ``policy`` (``mem.redaction``) would keep it: each secret or PII replaced."""
    from engramdb._validate import shown
    from engramdb.errors import ValidationError
    from engramdb.models import RedactionPolicy
    from engramdb.privacy.redact import redact_text

    if not isinstance(text, str):
        raise ValidationError(f"text must be a string, not {shown(text)}")
    if not isinstance(policy, RedactionPolicy):
        raise ValidationError(f"policy must be a RedactionPolicy, not {type(policy).__name__}")
    return redact_text(text, policy=policy).text


def learning_curves(
    records: Sequence[DecisionRecord], trends: Sequence[CategoryTrend], *, min_per_point: int = 8
) -> list[tuple[CategoryTrend, str, list[TimelinePoint]]]:
    """Per trend (``mem.learning.trends``): its calendar bucket and success rate per bucket, oldest first.

    ``records`` are ``mem.learning.outcomes``; a record without a category counts for ``general``.
    The bucket is the finest that holds ``min_per_point`` outcomes a point on average (at most 40 points).
    """
    from engramdb._validate import shown
    from engramdb.errors import ValidationError
    from engramdb.learning.analytics import GENERAL, choose_bucket, timeline

    if isinstance(min_per_point, bool) or not isinstance(min_per_point, int) or min_per_point < 1:
        raise ValidationError(f"min_per_point must be a positive integer, not {shown(min_per_point)}")
    out: list[tuple[CategoryTrend, str, list[TimelinePoint]]] = []
    for trend in trends:
        mine = [r for r in records if (r.category or GENERAL) == trend.category]
        bucket = choose_bucket(trend.first_at, trend.last_at, n=len(mine), min_per_point=min_per_point)
        _, points = timeline(mine, bucket=bucket)
        out.append((trend, bucket, points))
    return out


def text_relevance(query: str, text: str, *, cosine: float, embedder: object = None) -> float:
    """The calibrated relevance in [0, 1] that a search gives a memory of ``text`` for ``query`` (README,
    "Relevance"), ``cosine`` being their embeddings' cosine similarity by ``embedder`` (``mem.embedder``; its
    calibration, the bundled model's if None)."""
    import math

    from engramdb._validate import shown
    from engramdb.embeddings.profile import profile_of
    from engramdb.errors import ValidationError
    from engramdb.retrieval.evidence import coverage, relevance
    from engramdb.retrieval.text import query_terms

    for name, value in (("query", query), ("text", text)):
        if not isinstance(value, str):
            raise ValidationError(f"{name} must be a string, not {shown(value)}")
    if isinstance(cosine, bool) or not isinstance(cosine, int | float) or not math.isfinite(cosine):
        raise ValidationError(f"cosine must be a finite number, not {shown(cosine)}")
    return relevance(float(cosine), coverage(query_terms(query), text), calibration=profile_of(embedder).calibration)
