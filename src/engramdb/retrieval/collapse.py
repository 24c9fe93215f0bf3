"""One fact, one hit: near-identical memories of a ranking fold into the best-placed one. Pure.

Five outcome records of one situation ("api-auth-timeout", retried five times) are one fact to a reader: they
must not fill the top five, nor push the next fact out. Two memories are near-identical when they have the
same kind and the same text but for case, punctuation and spacing, or nearly the same set of words (Jaccard
>= :data:`SAME_WORDS`) with the same numbers and the same negations: as for deduplication on write, "port
5432" against "port 5433" and "always" against "never" are different facts however alike the rest. The
memory placed first keeps its place and its score; the others' ids ride along on it, so nothing is lost,
only not repeated.

What a record says may not be in its text: an outcome record's content is the context it was made in, and
what was done and how it went are in its metadata (``action``, ``outcome``); a failure's fix and the fixes
that did not work are in ``solution`` and ``failed_solutions``. Two records that differ there are different
facts however equal their texts (seed 001: ``increase-timeout`` failed, ``retry-with-exponential-backoff``
worked, both in "api-auth-timeout"), so they are never folded; the same action with the same outcome is.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, TypeVar

from engramdb.models import Memory

__all__ = ["OUTCOME_KEYS", "SAME_WORDS", "collapse", "outcome_of", "signature"]

#: Word-set overlap above which two texts of one kind are the same statement.
SAME_WORDS: Final = 0.85
_NUMBER = re.compile(r"\d+")
_PUNCT = re.compile(r"[^\w\s]+")
_NEGATIONS: Final = frozenset({"not", "no", "never", "without", "cannot", "dont", "don", "isnt", "doesnt", "always"})

T = TypeVar("T")


def signature(text: str) -> tuple[str, frozenset[str]]:
    """The text folded (case, punctuation, spacing), and its set of words."""
    folded = " ".join(_PUNCT.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())
    return folded, frozenset(folded.split())


#: Metadata that says what a record did and how it went (learning/records.py, services/failures.py).
OUTCOME_KEYS: Final = ("action", "outcome", "solution", "failed_solutions")


def _label(value: object) -> object:
    if isinstance(value, str):
        return " ".join(value.casefold().split())
    # Hand-written metadata may say ``"outcome": true`` or hold a list: compared as written, never ignored.
    return value if value is None or isinstance(value, bool | int | float) else repr(value)


def outcome_of(metadata: Mapping[str, Any]) -> tuple[object, ...]:
    """What ``metadata`` says was done and how it went: equal for records that may fold, () when it says nothing.

    Labels compare as :func:`signature` would not (``retry-with-backoff`` is not ``retry with backoff`` to a
    caller who recorded one of them), but case and spacing do not count; the failed fixes are a set.
    """
    if not any(k in metadata for k in OUTCOME_KEYS):
        return ()
    failed = metadata.get("failed_solutions")
    tried = frozenset(_label(f) for f in failed) if isinstance(failed, list | tuple) else frozenset[object]()
    return (
        _label(metadata.get("action")),
        _label(metadata.get("outcome")),
        _label(metadata.get("solution")),
        tried,
    )


def _numbers(words: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w in words if _NUMBER.fullmatch(w))


@dataclass(frozen=True, slots=True)
class _Key:
    """What near-identity compares, computed once per memory (a search compares each with up to ``limit``)."""

    kind: str
    folded: str
    words: frozenset[str]
    numbers: frozenset[str]
    negations: frozenset[str]
    #: :func:`outcome_of` the memory's metadata: keys of records that did different things never match.
    outcome: tuple[object, ...] = ()

    @classmethod
    def of(cls, memory: Memory) -> _Key:
        kind, text = memory.kind, memory.content
        key = _cached_key(kind, text) if len(text) <= _CACHED_CHARS else _key(kind, text)
        outcome = outcome_of(memory.metadata)
        return dataclasses.replace(key, outcome=outcome) if outcome else key


#: Texts up to this long have their keys cached (4,096 of them: a few MB at most, whatever memories hold).
_CACHED_CHARS: Final = 1000


def _key(kind: str, text: str) -> _Key:
    folded, words = signature(text)
    return _Key(kind, folded, words, _numbers(words), words & _NEGATIONS)


# A store's texts repeat (retries, re-told facts: ~13 copies each in bench/tenants.py's corpus) and so do the
# heads of successive searches; the key depends on (kind, text) alone, so each is folded once while cached.
_cached_key = lru_cache(maxsize=4096)(_key)


def _same(a: _Key, b: _Key) -> bool:
    if a.kind != b.kind or a.outcome != b.outcome:
        return False
    if a.folded == b.folded:
        return True
    wa, wb = a.words, b.words
    if not wa or not wb:
        return False
    # The overlap is at most the smaller set over the larger: most pairs of a ranking end here, unscanned.
    if min(len(wa), len(wb)) / max(len(wa), len(wb)) < SAME_WORDS:
        return False
    if a.negations != b.negations or a.numbers != b.numbers:
        return False
    return len(wa & wb) / len(wa | wb) >= SAME_WORDS


def collapse(ranked: Sequence[T], memory_of: Callable[[T], Memory], *, limit: int) -> list[tuple[T, list[str]]]:
    """The first ``limit`` distinct entries of ``ranked`` (best first), each with the ids folded into it.

    Quadratic in ``limit`` at most (each kept entry is compared with the kept ones); the scan stops once
    ``limit`` distinct entries are found, so an entry below them is never read. An entry whose folded text
    equals a kept one's goes to that one by a lookup: the kept entries above it were each compared with
    that entry when it was kept (none was the same), and the same kind, folded text and outcome compare alike.
    """
    kept: list[tuple[T, list[str]]] = []
    keys: list[_Key] = []
    exact: dict[tuple[str, str, tuple[object, ...]], int] = {}
    for entry in ranked:
        m = memory_of(entry)
        key = _Key.of(m)
        at = exact.get((key.kind, key.folded, key.outcome))
        if at is None:
            at = next((i for i, other in enumerate(keys) if _same(key, other)), None)
        if at is not None:
            kept[at][1].append(m.id)
            continue
        if len(kept) == limit:
            break
        exact[key.kind, key.folded, key.outcome] = len(kept)
        kept.append((entry, []))
        keys.append(key)
    return kept
