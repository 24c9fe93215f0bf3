"""Knowledge distillation (seed 002's KnowledgeDistiller): many memories that say one thing become one.

:class:`Distiller` groups an agent's memories by meaning (cosine similarity of their vectors
at least a threshold measured on a labelled corpus, see ``bench/distill.py``) and writes one
``knowledge`` memory per group of at least ``min_group``: a generalised statement, when it
applies, a confidence from the sources' outcomes, the source count and links to the sources
(metadata ``distilled_from``, tag ``distilled``). Running again updates the distilled memory
of a group (the one sharing most sources) instead of adding another. Sources stay, or are
tagged ``archived`` on request (a context then shows the distilled memory in their place).

Without an LLM the statement is built deterministically: the group's medoid (the source
closest in meaning to all others) with the details that vary between sources masked by the
placeholder rules of failure signatures (:mod:`engramdb.learning.signatures`), plus the
terms the sources share. With an LLM (optional collaborator) its one-sentence summary is
used when it passes validation, else the deterministic statement. Writes go through the
write pipeline (redaction, audit), all in one transaction.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.learning.failures import occurrence_from_memory
from engramdb.learning.records import parse_decision
from engramdb.learning.signatures import solution_key, variable_parts
from engramdb.models import DistillGroup, DistillResult, Kind, Memory
from engramdb.retrieval.text import query_terms
from engramdb.services._base import Service, ServiceContext
from engramdb.services.context import ARCHIVED_TAG
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.brain.llm import LLM

__all__ = [
    "DEFAULT_KINDS",
    "DEFAULT_THRESHOLD",
    "DISTILLED_TAG",
    "MAX_SOURCES",
    "Distiller",
    "generalize",
    "group_by_meaning",
    "medoid",
    "shared_terms",
]

#: Cosine similarity from which two memories say the same thing. Measured with bench/distill.py on a labelled
#: corpus (30 groups of paraphrases + 28 singletons, all-MiniLM-L6-v2), chosen on half the groups: on the other
#: half purity 1.00, coverage 0.94; on all, purity 1.00, coverage 0.97, pairwise F1 0.98 (0.50 merges topics).
DEFAULT_THRESHOLD: Final = 0.55
#: Kinds distilled when none is named (conversations, episodes and preferences are left alone).
DEFAULT_KINDS: Final[tuple[Kind, ...]] = (
    "knowledge",
    "success",
    "failure",
    "decision",
    "code_pattern",
    "collaboration",
)
DISTILLED_TAG: Final = "distilled"
#: Memories of one kind considered per run (the most recent); grouping is quadratic in this.
MAX_SOURCES: Final = 10_000
#: Characters of a distilled statement (and of an accepted LLM summary).
MAX_PATTERN_CHARS: Final = 600
_MIN_SUMMARY_CHARS: Final = 12
#: Terms listed as shared; a term is shared when at least this share of the sources use it.
_TERMS: Final = 6
_TERM_SHARE: Final = 0.5
#: Similarity rows computed at once (bounds memory: block x n floats).
_BLOCK: Final = 1024
#: Tags of failure bookkeeping that must not travel to a knowledge memory.
_PRIVATE_TAG_PREFIXES: Final = ("sig:", "pattern:")
_RUN: Final = re.compile(r"<(\w+)>(?:(?:[.:,;/_+-]|\s*[,;|]\s*|\s+)<\1>)+")
_SPACE: Final = re.compile(r"\s+")

Vectors = npt.NDArray[np.float32]


# -- pure steps ------------------------------------------------------------------------------------------------


def group_by_meaning(vectors: Vectors, threshold: float) -> list[list[int]]:
    """Groups of rows of unit ``vectors`` that say the same thing (pure, deterministic).

    Sphere exclusion (Butina): the row with the most neighbours (cosine >= ``threshold``)
    not yet grouped founds a group of itself and those neighbours; repeat. Every member is
    within ``threshold`` of its founder, so a group cannot chain across topics. Returns
    every group (singletons included), largest first, members in row order.
    """
    n = len(vectors)
    neighbours: list[npt.NDArray[np.intp]] = []
    for start in range(0, n, _BLOCK):
        sims = vectors[start : start + _BLOCK] @ vectors.T
        neighbours.extend(np.flatnonzero(row >= threshold) for row in sims)
    order = sorted(range(n), key=lambda i: (-len(neighbours[i]), i))
    taken = np.zeros(n, dtype=bool)
    groups: list[list[int]] = []
    for i in order:
        if taken[i]:
            continue
        members = sorted({i, *(int(j) for j in neighbours[i] if not taken[j])})
        taken[members] = True
        groups.append(members)
    groups.sort(key=lambda g: (-len(g), g[0]))
    return groups


def medoid(vectors: Vectors) -> tuple[int, float]:
    """The row most similar to all others, and the mean similarity of the others to it (1.0 alone)."""
    if len(vectors) == 1:
        return 0, 1.0
    sims = vectors @ vectors.T
    best = int(np.argmax(sims.sum(axis=1)))
    others = np.delete(sims[best], best)
    return best, float(np.clip(others.mean(), 0.0, 1.0))


def _present(value: str, text: str) -> bool:
    """Whether ``value`` (a quoted one with or without its quotes) occurs in ``text`` as a whole word."""
    inner = value.strip().lstrip("bBrRuUfF").strip("'\"`") or value
    return re.search(rf"(?<![\w]){re.escape(inner)}(?![\w])", text, flags=re.IGNORECASE) is not None


def generalize(texts: Sequence[str], center: int) -> str:
    """``texts[center]`` with the details that vary across ``texts`` masked (pure).

    Details are what failure signatures mask (numbers, paths, hosts, quoted values,
    timestamps, ids...); one that appears in more than half the texts is kept, since it is
    part of what they share.
    """
    text = _SPACE.sub(" ", texts[center]).strip()
    for name, values in variable_parts(text).items():
        for value in dict.fromkeys(values):
            if not value.strip():
                continue
            share = sum(_present(value, t) for t in texts) / len(texts)
            if share <= 0.5 or len(texts) == 1:
                text = re.sub(rf"(?<![\w<]){re.escape(value)}(?![\w>])", f"<{name}>", text)
    text = _RUN.sub(r"<\1>", text)
    return _bounded(text)


def shared_terms(texts: Sequence[str], *, center: int = 0, limit: int = _TERMS) -> list[str]:
    """Content words used by at least half of ``texts`` (and two), most widely used first (pure)."""
    per_text = [set(query_terms(t)) for t in texts]
    df = Counter(term for terms in per_text for term in terms)
    need = max(2, math.ceil(_TERM_SHARE * len(texts)))
    first = {t: i for i, t in enumerate(query_terms(texts[center]))}
    terms = [t for t, c in df.items() if c >= need and not any(ch.isdigit() for ch in t) and len(t) > 2]
    terms.sort(key=lambda t: (-df[t], first.get(t, len(first)), t))
    return terms[:limit]


def _bounded(text: str, limit: int = MAX_PATTERN_CHARS) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Knowledge:
    """What a group says: the statement, when it applies, and how sure it is."""

    pattern: str
    applies_when: str
    confidence: float
    basis: str
    evidence: dict[str, Any]


def _posterior(successes: float, attempts: float) -> float:
    return round((successes + 1.0) / (attempts + 2.0), 4)


def _decision_knowledge(sources: Sequence[Memory], center: int, terms: Sequence[str]) -> _Knowledge | None:
    records = [r for r in (parse_decision(m) for m in sources) if r is not None]
    if not records:
        return None
    stats: dict[str, list[float]] = {}
    for r in records:
        s = stats.setdefault(r.action, [0.0, 0.0])
        s[0] += r.success
        s[1] += 1.0
    ranked = sorted(stats.items(), key=lambda kv: (-_posterior(*kv[1]), -kv[1][1], kv[0]))
    best, (wins, tries) = ranked[0]
    situation = generalize([m.content for m in sources], center)
    others = "; ".join(f"{a}: {s:g} of {n:g}" for a, (s, n) in ranked[1:4])
    pattern = f"In situations like {situation!r}, {best!r} worked {wins:g} of {tries:g} times"
    pattern += f" (other actions: {others})" if others else ""
    return _Knowledge(
        pattern=_bounded(pattern),
        applies_when=situation,
        confidence=_posterior(wins, tries),
        basis="outcomes",
        evidence={"best_action": best, "actions": {a: {"successes": s, "attempts": n} for a, (s, n) in ranked}},
    )


def _failure_knowledge(sources: Sequence[Memory], center: int) -> _Knowledge:
    occurrences = [occurrence_from_memory(m) for m in sources]
    error = generalize([o.message for o in occurrences], center)
    fixes = Counter(solution_key(o.solution) for o in occurrences if o.solution)
    text_of = {solution_key(o.solution): o.solution for o in occurrences if o.solution}
    contexts = [o.context for o in occurrences if o.context]
    applies = generalize(contexts, 0) if contexts else error
    fixed = sum(fixes.values())
    if fixes:
        key, times = fixes.most_common(1)[0]
        pattern = f"Recurring failure {error!r}: fixed by {text_of[key]!r} ({times} of {len(sources)} occurrences)"
    else:
        pattern = f"Recurring failure {error!r} ({len(sources)} occurrences, no fix recorded)"
    return _Knowledge(
        pattern=_bounded(pattern),
        applies_when=applies,
        confidence=_posterior(fixed, len(sources)),
        basis="fixes",
        evidence={"fixed": fixed, "occurrences": len(sources)},
    )


def _knowledge(sources: Sequence[Memory], center: int, cohesion: float, terms: Sequence[str]) -> _Knowledge:
    """What the group ``sources`` (all of one kind) says, deterministically."""
    kind = sources[0].kind
    if kind == "decision":
        found = _decision_knowledge(sources, center, terms)
        if found is not None:
            return found
    if kind == "failure":
        return _failure_knowledge(sources, center)
    applies = f"tasks about {', '.join(terms)}" if terms else "the situation of the sources"
    successes = sum(m.successes for m in sources)
    attempts = sum(m.attempts for m in sources)
    pattern = generalize([m.content for m in sources], center)
    if attempts > 0:
        return _Knowledge(
            pattern=pattern,
            applies_when=applies,
            confidence=_posterior(successes, attempts),
            basis="feedback",
            evidence={"successes": successes, "attempts": attempts},
        )
    return _Knowledge(
        pattern=pattern, applies_when=applies, confidence=round(cohesion, 4), basis="agreement", evidence={}
    )


def _summary_prompt(kind: str, sources: Sequence[Memory]) -> str:
    lines = "\n".join(f"- {_bounded(m.content, 400)}" for m in sources[:20])
    return (
        f"These {len(sources)} {kind} memories of an AI agent say the same thing. Write ONE general sentence "
        "(at most 60 words) that states the reusable knowledge they share, without specific numbers, paths or "
        f"names that vary between them. Answer with the sentence only.\n{lines}"
    )


def _valid_summary(answer: object) -> str | None:
    if not isinstance(answer, str):
        return None
    text = _SPACE.sub(" ", answer).strip().strip('"').strip()
    if not _MIN_SUMMARY_CHARS <= len(text) <= MAX_PATTERN_CHARS or "\x00" in text:
        return None
    return text


# -- the service -----------------------------------------------------------------------------------------------


class Distiller(Service):
    """Turns groups of memories that say the same thing into one distilled ``knowledge`` memory each."""

    def __init__(self, ctx: ServiceContext, *, llm: LLM | None = None, threshold: float = DEFAULT_THRESHOLD) -> None:
        super().__init__(ctx)
        self._llm = llm
        #: Cosine similarity from which memories are grouped (tune per instance).
        self.threshold = _threshold(threshold)

    def distill(
        self,
        *,
        agent: str | None = None,
        kind: Kind | Sequence[Kind] | None = None,
        min_group: int = 3,
        dry_run: bool = False,
        archive_sources: bool = False,
        threshold: float | None = None,
    ) -> list[Memory]:
        """Distil ``agent``'s memories (of ``kind``, default :data:`DEFAULT_KINDS`); returns the distilled memories.

        One per group of at least ``min_group`` similar memories, as written (or, with
        ``dry_run``, as they would be: nothing is written). See :meth:`run`.
        """
        result = self.run(
            agent=agent,
            kind=kind,
            min_group=min_group,
            dry_run=dry_run,
            archive_sources=archive_sources,
            threshold=threshold,
        )
        return result.memories

    def run(
        self,
        *,
        agent: str | None = None,
        kind: Kind | Sequence[Kind] | None = None,
        min_group: int = 3,
        dry_run: bool = False,
        archive_sources: bool = False,
        threshold: float | None = None,
    ) -> DistillResult:
        """Group, distil and write; the groups found and what was done with each.

        Only ``agent``'s own memories are sources (not those shared with it, not distilled
        ones); groups never mix kinds. A group whose sources overlap those of an earlier
        distilled memory updates that memory. ``archive_sources`` tags the sources
        ``archived``. Bad arguments raise ValidationError before anything is read.
        """
        agent = check.agent_or_default(agent, self._settings)
        kinds = check.kinds(kind) or DEFAULT_KINDS
        if isinstance(min_group, bool) or not isinstance(min_group, int) or not 2 <= min_group <= MAX_SOURCES:
            raise ValidationError(
                f"min_group must be an integer within [2, {MAX_SOURCES}], not {check.shown(min_group)}"
            )
        for flag, name in ((dry_run, "dry_run"), (archive_sources, "archive_sources")):
            if not isinstance(flag, bool):
                raise ValidationError(f"{name} must be true or false, not {check.shown(flag)}")
        cut = self.threshold if threshold is None else _threshold(threshold)
        existing = self._distilled(agent)
        claimed: set[str] = set()
        groups: list[DistillGroup] = []
        archive: list[Memory] = []
        considered = 0
        for k in kinds:
            sources = self._sources(agent, k)
            considered += len(sources)
            if len(sources) < min_group:
                continue
            vectors = self._vectors(sources)
            for rows in group_by_meaning(vectors, cut):
                if len(rows) < min_group:
                    break
                members = [sources[r] for r in rows]
                groups.append(
                    self._plan(
                        agent=agent,
                        kind=k,
                        members=members,
                        vectors=vectors[rows],
                        existing=existing,
                        claimed=claimed,
                        threshold=cut,
                    )
                )
                archive += [m for m in members if ARCHIVED_TAG not in m.tags]
        if dry_run:
            shown = tuple(
                dataclasses.replace(g, memory=self._pipeline.redact(g.memory)) if g.action == "create" else g
                for g in groups
            )
            return DistillResult(agent=agent, dry_run=True, threshold=cut, considered=considered, groups=shown)
        written, archived = self._write(agent, groups, archive if archive_sources else [])
        return DistillResult(
            agent=agent, dry_run=False, threshold=cut, considered=considered, groups=tuple(written), archived=archived
        )

    # -- reading ---------------------------------------------------------------------------------------------
    def _sources(self, agent: str, kind: Kind) -> list[Memory]:
        flt = Filter(agent=agent, kinds=(kind,), include_shared=False)
        out: list[Memory] = []
        for page in self._recall.pages(flt):
            out += [m for m in page if DISTILLED_TAG not in m.tags]
            if len(out) >= MAX_SOURCES:
                break
        out = out[:MAX_SOURCES]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def _distilled(self, agent: str) -> list[Memory]:
        flt = Filter(agent=agent, tags=(DISTILLED_TAG,), include_shared=False)
        return [m for page in self._recall.pages(flt) for m in page]

    def _vectors(self, memories: Sequence[Memory]) -> Vectors:
        stored: dict[str, Any] = {}
        ids = [m.id for m in memories]
        for start in range(0, len(ids), check.PAGE_SIZE):
            stored.update(
                self._store.vectors.get(ids[start : start + check.PAGE_SIZE], model_id=self._embedder.model_id)
            )
        missing = [m for m in memories if m.id not in stored]
        if missing:
            fresh = self._embedder.embed([m.content for m in missing])
            stored.update({m.id: v for m, v in zip(missing, fresh, strict=True)})
        matrix = np.stack([np.asarray(stored[i], dtype=np.float32) for i in ids])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    # -- planning --------------------------------------------------------------------------------------------
    def _plan(
        self,
        *,
        agent: str,
        kind: Kind,
        members: Sequence[Memory],
        vectors: Vectors,
        existing: Sequence[Memory],
        claimed: set[str],
        threshold: float,
    ) -> DistillGroup:
        center, cohesion = medoid(vectors)
        texts = [m.content for m in members]
        terms = shared_terms(texts, center=center)
        found = _knowledge(members, center, cohesion, terms)
        pattern, method = found.pattern, "deterministic"
        if self._llm is not None:
            summary = self._summary(kind, members)
            if summary is not None:
                pattern, method = summary, "llm"
        ids = sorted(m.id for m in members)
        content = f"{pattern}\nApplies when: {found.applies_when}."
        metadata: dict[str, Any] = {
            "distilled_from": ids,
            "source_count": len(ids),
            "source_kind": kind,
            "medoid": members[center].id,
            "pattern": pattern,
            "applies_when": found.applies_when,
            "shared_terms": terms,
            "confidence_basis": found.basis,
            "evidence": found.evidence,
            "cohesion": round(cohesion, 4),
            "method": method,
            "threshold": threshold,
        }
        shared_tags = set.intersection(*(set(m.tags) for m in members))
        tags = [DISTILLED_TAG, *sorted(t for t in shared_tags if _keeps_tag(t))]
        visibility = "public" if all(m.visibility == "public" for m in members) else "private"
        previous = _match(ids, kind, existing, claimed)
        now = self._clock()
        if previous is None:
            item = {
                "content": content,
                "agent": agent,
                "kind": "knowledge",
                "tags": tags,
                "metadata": metadata,
                "confidence": found.confidence,
                "visibility": visibility,
            }
            # Validated now (a dry run reports what a real run would refuse); the write redacts it.
            memory, action = self._pipeline.new_memory(item, now=now), "create"
        else:
            claimed.add(previous.id)
            changes = {"content": content, "tags": tuple(tags), "metadata": metadata, "confidence": found.confidence}
            same = all(_same(getattr(previous, k), v) for k, v in changes.items())
            memory = previous
            if not same:
                memory = dataclasses.replace(
                    previous, content=content, tags=tuple(tags), metadata=metadata, confidence=found.confidence
                )
            action = "unchanged" if same else "update"
        return DistillGroup(
            kind=kind,
            source_ids=tuple(ids),
            medoid_id=members[center].id,
            pattern=pattern,
            applies_when=found.applies_when,
            shared_terms=tuple(terms),
            confidence=found.confidence,
            basis=found.basis,
            cohesion=round(cohesion, 4),
            action=action,
            memory=memory,
        )

    def _summary(self, kind: str, members: Sequence[Memory]) -> str | None:
        """The LLM's summary of the group if it is a usable sentence; None (deterministic fallback) otherwise."""
        assert self._llm is not None
        try:
            answer = self._llm.complete(
                [{"role": "user", "content": _summary_prompt(kind, members)}], temperature=0.0, max_tokens=160
            )
        except Exception:  # noqa: BLE001 - any LLM failure falls back to the deterministic statement
            return None
        return _valid_summary(answer)

    # -- writing ---------------------------------------------------------------------------------------------
    def _write(
        self, agent: str, groups: Sequence[DistillGroup], archive: Sequence[Memory]
    ) -> tuple[list[DistillGroup], int]:
        """Every write of the run in one transaction, through the pipeline: new, updated, archived."""
        now = self._clock()
        out: list[DistillGroup] = []
        with self._pipeline.transaction():
            created = self._pipeline.write(
                [g.memory for g in groups if g.action == "create"], force=True, now=now, audit_action="distill"
            )
            fresh = iter(created)
            for g in groups:
                if g.action == "create":
                    out.append(dataclasses.replace(g, memory=next(fresh)))
                elif g.action == "update":
                    m = g.memory
                    changes = {"content": m.content, "tags": m.tags, "metadata": m.metadata, "confidence": m.confidence}
                    out.append(
                        dataclasses.replace(
                            g, memory=self._pipeline.update(m.id, changes, actor=agent, action="distill")
                        )
                    )
                else:
                    out.append(g)
            for m in archive:
                self._pipeline.update(m.id, {"tags": (*m.tags, ARCHIVED_TAG)}, actor=agent, action="archive", current=m)
        return out, len(archive)


def _threshold(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value <= 1.0:
        raise ValidationError(f"threshold must be a number within (0, 1], not {check.shown(value)}")
    return float(value)


def _keeps_tag(tag: str) -> bool:
    return tag not in (ARCHIVED_TAG, DISTILLED_TAG) and not tag.startswith(_PRIVATE_TAG_PREFIXES)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(a, b, abs_tol=1e-9)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return list(a) == list(b)
    return a == b


def _match(ids: Sequence[str], kind: str, existing: Sequence[Memory], claimed: set[str]) -> Memory | None:
    """The earlier distilled memory (of this kind, not yet claimed) sharing most sources with ``ids``."""
    wanted = set(ids)
    best: tuple[int, str, Memory] | None = None
    for m in existing:
        if m.id in claimed or m.metadata.get("source_kind") != kind:
            continue
        sources = m.metadata.get("distilled_from")
        overlap = len(wanted & set(sources)) if isinstance(sources, list) else 0
        if overlap and (best is None or (overlap, m.updated_at.isoformat()) > (best[0], best[1])):
            best = (overlap, m.updated_at.isoformat(), m)
    return best[2] if best is not None else None
