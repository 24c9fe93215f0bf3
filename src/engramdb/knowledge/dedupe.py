"""Deduplication on write: is a new memory a near-duplicate of one already stored, and how to merge. Pure.

A new memory merges into an existing one of the same agent and kind when their
normalised texts are identical, or when their vectors' cosine similarity reaches
the threshold *and* the texts agree on what similarity cannot see: the same
numbers ("port 5432" and "port 5433" embed at 0.96 with MiniLM) and the same
negations and polarity words ("always" against "never" run at 0.96 too). Merging
keeps the existing memory: the highest confidence, the union of tags, metadata
keys it lacked, summed outcome counts, and a ``merge_count`` plus a bounded
``merged_from`` provenance list in its metadata (when, who, how similar, and the
variant text when it differed), so what was folded in stays visible and can be undone.
Kinds in :data:`~engramdb.models.NO_MERGE_KINDS` (events) are never merged.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

from engramdb.models import NO_MERGE_KINDS, Memory

__all__ = [
    "MERGED_FROM_KEY",
    "MERGE_COUNT_KEY",
    "DedupePlan",
    "Duplicate",
    "batch_neighbours",
    "compatible",
    "find_duplicate",
    "merge_changes",
    "normalise",
    "plan_batch",
]

#: Metadata key counting how many writes were merged into a memory.
MERGE_COUNT_KEY: Final = "merge_count"
#: Metadata key listing the provenance of merged writes (newest last, at most :data:`MAX_PROVENANCE`).
MERGED_FROM_KEY: Final = "merged_from"
MAX_PROVENANCE: Final = 20

_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+(?:[.,:/_\-]\d+)*")
_WORD = re.compile(r"[a-z']+")
# Words that flip or bound a statement while barely moving its embedding.
_POLARITY: Final = frozenset(
    """
    not no never none nothing without cannot cant can't don't dont doesn't doesnt isn't isnt aren't arent
    wasn't wasnt won't wont shouldn't shouldnt mustn't mustnt avoid always enable enabled disable disabled
    allow allowed deny denied true false before after above below more less increase decrease min max
    minimum maximum first last only except success succeeded fail failed failure
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def normalise(text: str) -> str:
    """Case-folded, NFKC, punctuation dropped, whitespace collapsed: equal means the same statement."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", folded)).strip()


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text))


def _polarity(text: str) -> set[str]:
    return {w for w in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()) if w in _POLARITY}


def compatible(a: str, b: str) -> bool:
    """Whether two similar texts can be the same statement: same numbers, same negation/polarity words."""
    return _numbers(a) == _numbers(b) and _polarity(a) == _polarity(b)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The stored memory a new one duplicates, and their cosine similarity."""

    memory: Memory
    similarity: float


def find_duplicate(
    content: str,
    *,
    agent: str,
    kind: str,
    visibility: str = "private",
    candidates: Iterable[tuple[Memory, float]],
    threshold: float,
    user: str | None = None,
    session: str | None = None,
) -> Duplicate | None:
    """The best near-duplicate of a new memory among ``candidates`` (memory, cosine), or None.

    Only candidates of the same agent, kind, visibility, user and session qualify (merging must
    not widen or narrow who can read what), and never for kinds in
    :data:`~engramdb.models.NO_MERGE_KINDS`. An identical normalised text wins
    whatever its similarity; otherwise the most similar candidate at or above
    ``threshold`` whose text is :func:`compatible`.
    """
    if kind in NO_MERGE_KINDS:
        return None
    key = normalise(content)
    best: Duplicate | None = None
    for memory, similarity in candidates:
        if memory.agent != agent or memory.kind != kind or memory.visibility != visibility:
            continue
        if memory.user != user or memory.session != session or memory.valid_until is not None:
            continue
        if memory.shared_by is not None:
            continue
        if normalise(memory.content) == key:
            return Duplicate(memory, similarity)
        better = best is None or similarity > best.similarity
        if better and similarity >= threshold and compatible(content, memory.content):
            best = Duplicate(memory, similarity)
    return best


_BLOCK: Final = 1024


def batch_neighbours(
    memories: Sequence[Memory], vectors: npt.NDArray[np.float32], *, threshold: float
) -> list[list[tuple[int, float]]]:
    """For each row of a new batch, the EARLIER rows it may duplicate, with their cosine similarity.

    Only rows of the same agent, kind and visibility qualify; a row qualifies when its
    similarity reaches ``threshold`` or its normalised text is identical. Similarities
    are computed blockwise with one matrix product per block, so a batch of n costs
    O(n^2 d) floating-point work but only O(n) Python-level steps per row found.
    """
    groups: dict[tuple[str, str, str], list[int]] = {}
    for row, memory in enumerate(memories):
        if memory.kind not in NO_MERGE_KINDS:
            groups.setdefault((memory.agent, memory.kind, memory.visibility), []).append(row)
    out: list[list[tuple[int, float]]] = [[] for _ in memories]
    for rows in groups.values():
        if len(rows) < 2:
            continue
        matrix = vectors[np.asarray(rows)]
        first_of: dict[str, int] = {}
        for start in range(0, len(rows), _BLOCK):
            block = matrix[start : start + _BLOCK] @ matrix.T
            for offset in range(block.shape[0]):
                i = start + offset
                sims = block[offset, :i]
                near = {rows[j]: float(sims[j]) for j in np.nonzero(sims >= threshold)[0]}
                key = normalise(memories[rows[i]].content)
                twin = first_of.setdefault(key, rows[i])
                if twin != rows[i]:
                    near.setdefault(twin, float(vectors[twin] @ vectors[rows[i]]))
                out[rows[i]] = list(near.items())
    return out


def merge_changes(
    existing: Memory,
    incoming: Memory,
    *,
    similarity: float,
    at: datetime,
) -> dict[str, Any]:
    """The field changes that fold ``incoming`` (not stored) into ``existing``.

    Existing metadata values win on conflicts; the incoming ones that lost are kept
    in its provenance entry, so nothing the caller said is silently dropped.
    """
    metadata: dict[str, Any] = dict(existing.metadata)
    conflicts: dict[str, Any] = {}
    for key, value in incoming.metadata.items():
        if key in (MERGE_COUNT_KEY, MERGED_FROM_KEY):
            continue
        if key not in metadata:
            metadata[key] = value
        elif metadata[key] != value:
            conflicts[key] = value
    provenance: dict[str, Any] = {"at": at.isoformat(), "agent": incoming.agent, "similarity": round(similarity, 4)}
    if incoming.content != existing.content:
        provenance["content"] = incoming.content
    if conflicts:
        provenance["metadata"] = conflicts
    previous = metadata.get(MERGED_FROM_KEY)
    history = [p for p in previous if isinstance(p, Mapping)] if isinstance(previous, list) else []
    metadata[MERGED_FROM_KEY] = [*history, provenance][-MAX_PROVENANCE:]
    count = metadata.get(MERGE_COUNT_KEY)
    metadata[MERGE_COUNT_KEY] = (count if isinstance(count, int) and not isinstance(count, bool) else 0) + 1

    changes: dict[str, Any] = {"metadata": metadata}
    tags = tuple(dict.fromkeys((*existing.tags, *incoming.tags)))
    if tags != existing.tags:
        changes["tags"] = tags
    if incoming.confidence > existing.confidence:
        changes["confidence"] = incoming.confidence
    if incoming.attempts or incoming.successes:
        changes["successes"] = existing.successes + incoming.successes
        changes["attempts"] = existing.attempts + incoming.attempts
    redacted = tuple(sorted(set(existing.redacted) | set(incoming.redacted)))
    if redacted != existing.redacted:
        changes["redacted"] = redacted
    return changes


@dataclass(frozen=True, slots=True, kw_only=True)
class DedupePlan:
    """What a batch write does: memories to add (with their vector rows) and merges into stored ones."""

    new: list[Memory]
    rows: list[int]
    #: (stored memory id, incoming memory, similarity), in input order.
    merges: list[tuple[str, Memory, float]]
    #: For each input item, the id of the memory it ended up in.
    targets: list[str]


def plan_batch(
    memories: Sequence[Memory],
    vectors: npt.NDArray[np.float32],
    *,
    stored: Mapping[int, Sequence[tuple[Memory, float]]],
    threshold: float,
) -> DedupePlan:
    """Decide, for each new (redacted, embedded) memory, whether it is added or merged into another.

    ``stored`` holds, for each row checked for near-duplicates, its stored candidates (memory, cosine); a
    near-duplicate of such a row is looked for among them and among the earlier items of the same batch. The
    other rows are added as they are.
    """
    new: list[Memory] = []
    rows: list[int] = []
    merges: list[tuple[str, Memory, float]] = []
    targets: list[str] = []
    batch: dict[str, int] = {}  # position in new of each new memory, by id
    neighbours = batch_neighbours(memories, vectors, threshold=threshold) if stored else []
    for row, memory in enumerate(memories):
        duplicate = None
        if row in stored:
            # Earlier rows of the batch that stayed new (the others were folded into a memory already).
            earlier = [
                (new[batch[memories[j].id]], similarity) for j, similarity in neighbours[row] if memories[j].id in batch
            ]
            duplicate = find_duplicate(
                memory.content,
                agent=memory.agent,
                kind=memory.kind,
                visibility=memory.visibility,
                candidates=[*earlier, *stored[row]],
                threshold=threshold,
                user=memory.user,
                session=memory.session,
            )
        if duplicate is None:
            batch[memory.id] = len(new)
            new.append(memory)
            rows.append(row)
            targets.append(memory.id)
            continue
        target = duplicate.memory.id
        targets.append(target)
        if target in batch:
            # A duplicate inside the batch: fold it into the pending new memory before it is stored.
            pending = new[batch[target]]
            changes = merge_changes(pending, memory, similarity=duplicate.similarity, at=memory.created_at)
            new[batch[target]] = dataclasses.replace(pending, **changes)
        else:
            merges.append((target, memory, duplicate.similarity))
    return DedupePlan(new=new, rows=rows, merges=merges, targets=targets)
