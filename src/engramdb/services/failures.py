"""Failures and their fixes: ``mem.failures``.

Thin on purpose: every method validates its arguments, reads memories through the
store's roles and the recall (the agent is a hard filter there, and memories shared
with the agent count), writes through the write pipeline, and hands values to the
pure modules :mod:`~engramdb.learning.signatures` and :mod:`~engramdb.learning.failures`.

How a failure is stored: one ``failure`` memory per occurrence, its content the
error (and what the agent was doing), its metadata the signature, exception type,
pattern key, the fix that worked and the fixes that did not. Two tags index it:
``sig:<hash>`` (its signature) and ``pattern:<key>`` (its pattern), so the
occurrences of a pattern are found without scanning every failure. The pattern key
is decided when the failure is recorded: the key of an earlier failure with the
same signature, else of one whose signature means the same (same exception type,
embeddings at least :data:`~engramdb.learning.failures.SIMILARITY_THRESHOLD`
alike), else a new key derived from the agent and the signature.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from engramdb import _validate as check
from engramdb._validate import PAGE_SIZE
from engramdb.errors import NotFound, ValidationError
from engramdb.learning import _args
from engramdb.learning import checks as chk
from engramdb.learning.failures import (
    SIMILARITY_THRESHOLD,
    Candidate,
    Occurrence,
    aggregate_solutions,
    best_match,
    build_pattern,
    find_pattern,
    group_occurrences,
    name_patterns,
    occurrence_from_memory,
)
from engramdb.learning.pattern_apply import apply_memory, memory_words
from engramdb.learning.pattern_names import MIN_PREFIX, nearest_by_words, prevention_effect
from engramdb.learning.signatures import (
    GENERIC_FIX_KEY,
    decisive_template,
    error_signature,
    pattern_key,
    signature_hash,
)
from engramdb.models import (
    CheckResult,
    FailurePattern,
    FailureWarning,
    Memory,
    PatternPlan,
    PreventionCheck,
    SolutionStats,
    Visibility,
)
from engramdb.services._base import Service, ServiceContext
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    pass

__all__ = ["PATTERN_TAG", "SIG_TAG", "FailureService"]

_FAILURE: tuple[str, ...] = ("failure",)
_KNOWLEDGE: tuple[str, ...] = ("knowledge",)
#: Cosine similarity of two error messages below which a failure's fixes say nothing about the other's.
_RELATED_FLOOR: Final = 0.45
#: Past failures (nearest by meaning) whose signatures are compared with a new one's.
_CANDIDATES: Final = 20
#: Tag prefixes that index failure memories by signature and by pattern.
SIG_TAG: Final = "sig:"
PATTERN_TAG: Final = "pattern:"


class FailureService(Service):
    """Failure learning: record occurrences, find fixes and patterns, check before acting, plan."""

    def __init__(self, ctx: ServiceContext, *, similarity: float = SIMILARITY_THRESHOLD) -> None:
        super().__init__(ctx)
        #: Signature similarity at or above which a reworded failure joins an existing pattern.
        self.similarity = similarity

    # -- failures --------------------------------------------------------------------------------------------
    def record(
        self,
        error: BaseException | str,
        *,
        agent: str | None = None,
        context: str = "",
        solution: str | None = None,
        failed_solutions: Iterable[str] = (),
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        visibility: Visibility = "private",
    ) -> Memory:
        """Record one occurrence of a failure; returns the ``failure`` memory.

        ``error`` is an exception or its message. ``solution`` is the fix that worked
        (if one did), ``failed_solutions`` the fixes tried that did not. Call it once per
        occurrence: occurrences are what :meth:`patterns` counts and what
        :meth:`solutions` learns from.
        """
        text, etype = _args.error(error)
        agent = check.agent_or_default(agent, self._settings)
        if not isinstance(context, str):
            raise ValidationError(f"context must be text, not {type(context).__name__}")
        fix = _args.optional_text(solution, "solution")
        failed = _args.texts(failed_solutions, "failed_solutions")
        extra = check.metadata(metadata)
        user_tags = check.tags(tags if not isinstance(tags, str) else [tags])
        signature = error_signature(text)
        key = self._pattern_for(text, signature, etype, agent)
        content = text
        if context.strip():
            content += f"\nContext: {context.strip()}"
        if fix:
            content += f"\nFix: {fix}"
        meta = {
            **extra,
            "error": text,
            "signature": signature,
            "error_type": etype,
            "pattern": key,
            "context": context.strip(),
            "solution": fix,
            "failed_solutions": list(failed),
        }
        return self._pipeline.remember(
            content,
            agent=agent,
            kind="failure",
            tags=[*user_tags, SIG_TAG + signature_hash(signature), PATTERN_TAG + key],
            metadata=meta,
            visibility=visibility,
        )

    def solutions(self, error: BaseException | str, *, agent: str | None = None, limit: int = 3) -> list[SolutionStats]:
        """The fixes recorded for ``error``'s failure pattern, best first.

        The pattern is the one of earlier failures with the same signature, else of
        failures whose signature means the same. ``successes`` counts the times a fix
        was the one that worked, ``attempts`` the times it was tried. Empty when the
        failure is new or nothing was ever fixed. When the value that decides the fix
        differs ("No module named 'numpy'" against a fix recorded for 'fastapi'), the other
        value's fixes are left out; a fix recorded as generic (``metadata={"generic": True}``,
        as the shipped packs mark theirs) is the answer then.
        """
        text, etype = _args.error(error)
        agent = check.agent_or_default(agent, self._settings)
        limit = check.limit(limit)
        signature = error_signature(text)
        occurrences, key = self._related_occurrences(text, signature, etype, agent)
        if occurrences:
            found = build_pattern(_main_group(occurrences, signature, key)).solutions
            if found:
                return found[:limit]
        return self._similar_solutions(text, etype, agent)[:limit]

    def _similar_solutions(self, text: str, etype: str | None, agent: str) -> list[SolutionStats]:
        """Fixes of failures like ``text`` (no pattern of its own has any): each past occurrence counts by how
        alike the messages are in meaning (cosine above :data:`_RELATED_FLOOR`, linearly to 1), and half
        at least when its exception type is the same; given only an exception type (``"TimeoutError"``),
        every failure of that type counts fully."""
        flt = Filter(agent=agent, kinds=_FAILURE)
        bare_type = etype is not None and text.strip().rstrip(":").strip() in (etype, text.split(":", 1)[0])
        bare_type = bare_type and ":" not in text.strip().rstrip(":")
        weights: dict[str, float] = {}
        occs: dict[str, Occurrence] = {}
        template, values = decisive_template(text)
        if bare_type:
            for o in self._all_failures(agent):
                if o.error_type == etype:
                    occs[o.id], weights[o.id] = o, 1.0
        else:
            query = self._embedder.embed([text])[0]
            cands = self._store.search.vector_candidates(query, flt, limit=50)
            memories = self._store.memories.get_many([c.id for c in cands], flt)
            for c in cands:
                m = memories.get(c.id)
                if m is None:
                    continue
                o = occurrence_from_memory(m)
                w = max(0.0, (float(c.score) - _RELATED_FLOOR) / (1.0 - _RELATED_FLOOR))
                if etype is not None and o.error_type == etype:
                    w = max(w, 0.5)
                if values:
                    their_template, theirs = decisive_template(o.message)
                    if their_template == template and theirs == values:
                        w = 1.0  # the same failure, only worded with or without its exception class
                    elif their_template == template:
                        # Another module's fix is no fix for this one; a generic fix is the answer.
                        w = 1.0 if m.metadata.get(GENERIC_FIX_KEY) is True else 0.0
                if w > 0.0:
                    occs[o.id], weights[o.id] = o, min(1.0, w)
        return aggregate_solutions(occs.values(), weights)

    def patterns(
        self, *, agent: str | None = None, recurring: bool = False, since: datetime | None = None
    ) -> list[FailurePattern]:
        """The failure patterns ``agent`` has seen (its own failures and those shared with it).

        Most occurrences first, then most recent. ``recurring=True`` keeps patterns seen
        at least twice; ``since`` keeps patterns seen at or after that time (their
        statistics still cover their whole history).
        """
        agent = check.agent_or_default(agent, self._settings)
        if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
            raise ValidationError("since must be a timezone-aware datetime")
        groups = group_occurrences(self._all_failures(agent))
        patterns = self._with_effects(groups, name_patterns([build_pattern(g) for g in groups]), agent)
        if recurring:
            patterns = [p for p in patterns if p.occurrences >= 2]
        if since is not None:
            patterns = [p for p in patterns if p.last_seen >= since]
        patterns.sort(key=lambda p: (-p.occurrences, -p.last_seen.timestamp(), p.id))
        return patterns

    def pattern(self, pattern_id: str, *, agent: str | None = None) -> FailurePattern:
        """One failure pattern by its id, its readable name, or a unique prefix of its id (at least 4 characters)."""
        agent = check.agent_or_default(agent, self._settings)
        groups = group_occurrences(self._all_failures(agent))
        group = self._pattern_group(pattern_id, agent, groups)
        named = self._with_effects(groups, name_patterns([build_pattern(g) for g in groups]), agent)
        return next(p for g, p in zip(groups, named, strict=True) if g is group)

    def _with_effects(
        self, groups: Sequence[list[Occurrence]], patterns: list[FailurePattern], agent: str
    ) -> list[FailurePattern]:
        """``patterns`` (one per group, in order) with the effect of their prevention checks, where one is saved."""
        first: dict[str, datetime] = {}
        for c in self.checks(agent=agent):
            if c.pattern_id is not None and (c.pattern_id not in first or c.created_at < first[c.pattern_id]):
                first[c.pattern_id] = c.created_at
        if not first:
            return patterns
        now = self._clock()
        out = []
        for g, p in zip(groups, patterns, strict=True):
            since = next((first[k] for k in dict.fromkeys(o.key for o in g) if k in first), None)
            effect = prevention_effect([o.at for o in g], since=since, now=now) if since is not None else None
            out.append(replace(p, effect=effect) if effect is not None else p)
        return out

    def _pattern_group(
        self, pattern_id: str, agent: str, groups: Sequence[list[Occurrence]] | None = None
    ) -> list[Occurrence]:
        agent = check.agent_name(agent)
        if not isinstance(pattern_id, str) or not pattern_id.strip():
            raise ValidationError("pattern id must be a non-empty string")
        wanted = pattern_id.strip()
        if groups is None:
            groups = group_occurrences(self._all_failures(agent))
        return find_pattern(groups, wanted, agent=agent)

    def prevention(self, pattern_id: str, *, agent: str | None = None) -> list[str]:
        """Checks to run before acting so that the failure pattern ``pattern_id`` does not happen again."""
        return self.pattern(pattern_id, agent=agent).prevention

    def preflight(
        self,
        action: str,
        *,
        agent: str | None = None,
        limit: int = 3,
        min_similarity: float = 0.35,
    ) -> list[FailureWarning]:
        """Before acting: the known failure patterns a planned ``action`` (or context) resembles, closest first.

        A pattern is reported when one of its occurrences (the error and what the agent
        was doing when it happened) is at least ``min_similarity`` alike in meaning.
        Empty when nothing similar ever failed.
        """
        action = check.content(action, what="action")
        agent = check.agent_or_default(agent, self._settings)
        limit = check.limit(limit)
        if isinstance(min_similarity, bool) or not isinstance(min_similarity, int | float):
            raise ValidationError(f"min_similarity must be a number, not {check.shown(min_similarity)}")
        flt = Filter(agent=agent, kinds=_FAILURE)
        query = self._embedder.embed([action])[0]
        cands = [c for c in self._store.search.vector_candidates(query, flt, limit=50) if c.score >= min_similarity]
        if not cands:
            return []
        # The same grouping as ``patterns`` (so both count the same occurrences, whether a failure was
        # recorded here or written with ``remember(kind="failure")``), and the same names.
        groups = group_occurrences(self._all_failures(agent))
        named = name_patterns([build_pattern(g) for g in groups])
        where = {o.id: i for i, g in enumerate(groups) for o in g}
        warnings: list[FailureWarning] = []
        seen: set[int] = set()
        for cand in cands:
            i = where.get(cand.id)
            if i is None or i in seen:
                continue
            seen.add(i)
            pattern = named[i]
            warnings.append(
                FailureWarning(pattern=pattern, similarity=round(float(cand.score), 4), message=_warning(pattern))
            )
            if len(warnings) >= limit:
                break
        return warnings

    def plan(self, pattern_id: str, task: str, *, agent: str | None = None) -> PatternPlan:
        """A plan for applying a known pattern to ``task``: a failure pattern's checks and fixes, or a memory's
        approach or code (``pattern_id`` is a failure pattern id or a memory id visible to ``agent``).

        Nothing is written: record how it went with ``mem.learning.record`` or :meth:`record`.
        """
        task = check.content(task, what="task")
        agent = check.agent_or_default(agent, self._settings)
        try:
            group = self._pattern_group(pattern_id, agent)
        except NotFound:
            memory = self._named_memory(pattern_id, agent)
            if memory is None:
                raise NotFound(f"no failure pattern or memory {pattern_id!r} visible to agent {agent!r}") from None
            warnings = [w for w in self.preflight(task, agent=agent, limit=2) if w.pattern.prevention]
            checks = [f"Check first: {w.pattern.prevention[0]}" for w in warnings]
            relevance = self._relevance(task, _description(memory))
            return apply_memory(memory, task, relevance, reader=agent, checks=checks)
        pattern = build_pattern(group)
        steps = pattern.prevention[:1]
        working = [s for s in pattern.solutions if s.successes > 0]
        if working:
            steps.append(f"If it happens anyway: {working[0].solution} (worked {working[0].successes:g} times).")
        steps += [c for c in pattern.prevention[1:] if c.startswith("Avoid")]
        # What the agent was doing when it failed says more about fit with a task than the error.
        contexts = list(dict.fromkeys(o.context for o in reversed(group) if o.context))[:3]
        return PatternPlan(
            task=task,
            pattern_id=pattern.id,
            kind="failure_pattern",
            title=f"{pattern.signature} (seen {pattern.occurrences} times)",
            relevance=self._relevance(task, pattern.example, *contexts),
            steps=steps,
            fixes=pattern.solutions,
        )

    def _named_memory(self, ref: str, agent: str) -> Memory | None:
        """The memory visible to ``agent`` that ``ref`` names: its id, a unique id prefix, or a slug of what it is
        about (seed 001's ``migration-rollback-strategy``: an action, a key, a tag or the words of its text)."""
        key = ref.strip()
        found = self._store.memories.get(key, Filter(agent=agent))
        if found is not None:
            return found
        if len(key) >= MIN_PREFIX and all(c in "0123456789abcdef" for c in key.lower()):
            page = self._store.memories.list(Filter(agent=agent), limit=check.MAX_LIMIT, offset=0)
            hits = [m for m in page if m.id.startswith(key.lower())]
            if len(hits) > 1:
                raise ValidationError(f"id prefix {ref!r} is ambiguous: {len(hits)} memories start with it")
            if hits:
                return hits[0]
        by_words = self._recall.search(key.replace("-", " "), agent=agent, limit=10, fold=False, bookkeep=False)
        near = [h.memory for h in by_words]
        for m in near:
            if key in (m.metadata.get("action"), m.metadata.get("key"), m.metadata.get("name")) or key in m.tags:
                return m
        best = nearest_by_words(key, [memory_words(m) for m in near])
        return near[best] if best is not None else None

    def _relevance(self, task: str, *texts: str) -> float:
        """How well ``task`` fits the closest of ``texts`` (cosine similarity)."""
        vectors = self._embedder.embed([task, *texts])
        return round(float(np.max(vectors[1:] @ vectors[0])), 4)

    # -- prevention checks -----------------------------------------------------------------------------------
    def add_check(
        self,
        pattern: str | None,
        check_text: str | None = None,
        *,
        stage: str = "development",
        agent: str | None = None,
        files: Iterable[str] = (),
        env: Iterable[str] = (),
        commands: Iterable[str] = (),
        modules: Iterable[str] = (),
    ) -> PreventionCheck:
        """Save a prevention check for a workflow ``stage``, attached to a failure ``pattern`` (id or name; None:
        a check of its own). ``check_text`` says what to verify (default: the pattern's first prevention
        line); ``files``/``env``/``commands``/``modules`` are predicates :meth:`run_checks` evaluates (see
        :mod:`engramdb.learning.checks`)."""
        agent = check.agent_or_default(agent, self._settings)
        found = self.pattern(pattern, agent=agent) if pattern is not None else None
        if check_text is None:
            if found is None or not found.prevention:
                raise ValidationError("say what to check (check_text), or name a failure pattern")
            check_text = found.prevention[0]
        text = check.content(check_text, what="check")
        meta = chk.check_metadata(stage=stage, pattern=found, files=files, env=env, commands=commands, modules=modules)
        tags = [chk.CHECK_TAG, chk.STAGE_TAG + meta[chk.CHECK_KEY]["stage"]]
        if found is not None:
            tags.append(chk.CHECK_TAG + ":" + found.id)
        memory = self._pipeline.remember(text, agent=agent, kind="knowledge", tags=tags, metadata=meta, force=True)
        parsed = chk.parse_check(memory)
        assert parsed is not None
        return parsed

    def generate_check(self, pattern: str, *, stage: str = "development", agent: str | None = None) -> PreventionCheck:
        """Save the check a failure pattern suggests: its first prevention line, with the predicates its own
        message names (the missing module, command, environment variable or file). Idempotent: when the same
        check is already saved for this pattern and stage, that one is returned."""
        agent = check.agent_or_default(agent, self._settings)
        found = self.pattern(pattern, agent=agent)
        preds = chk.predicates_for(found)
        if found.prevention:
            kinds = ("files", "env", "commands", "modules")
            wanted = (found.id, found.prevention[0], *(tuple(preds[k]) for k in kinds))
            for saved in self.checks(agent=agent, stage=stage):
                held = (saved.pattern_id, saved.description, saved.files, saved.env, saved.commands, saved.modules)
                if saved.agent == agent and held == wanted:
                    return saved
        return self.add_check(found.id, None, stage=stage, agent=agent, **preds)

    def checks(
        self, *, agent: str | None = None, stage: str | None = None, pattern: str | None = None
    ) -> list[PreventionCheck]:
        """The saved prevention checks visible to ``agent``, oldest first; ``stage`` and ``pattern`` filter."""
        agent = check.agent_or_default(agent, self._settings)
        tags = [chk.STAGE_TAG + chk.stage_name(stage)] if stage is not None else [chk.CHECK_TAG]
        pid = self.pattern(pattern, agent=agent).id if pattern is not None else None
        out = []
        for page in self._recall.pages(Filter(agent=agent, kinds=_KNOWLEDGE, tags=tuple(tags)), size=PAGE_SIZE):
            for m in page:
                c = chk.parse_check(m)
                if c is not None and (pid is None or c.pattern_id == pid):
                    out.append(c)
        out.sort(key=lambda c: (c.created_at, c.id))
        return out

    def run_checks(
        self,
        stage: str | None = None,
        *,
        agent: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[CheckResult]:
        """Run the checks of ``stage`` (all stages if None): evaluate their predicates here, in ``cwd`` (default
        the current directory) with ``env`` (default ``os.environ``). Nothing is executed; a check without
        predicates comes back as ``manual``."""
        if cwd is not None and not isinstance(cwd, str | os.PathLike):
            raise ValidationError(f"cwd must be a directory path, not {type(cwd).__name__}")
        if env is not None and (
            not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise ValidationError("env must map variable names to string values")
        return [chk.evaluate(c, cwd=cwd, env=env) for c in self.checks(agent=agent, stage=stage)]

    def remove_check(self, check_id: str, *, agent: str | None = None) -> None:
        """Delete a saved check of ``agent``'s (NotFound if there is none with that id)."""
        agent = check.agent_or_default(agent, self._settings)
        check_id = _args.label(check_id, "check id")
        memory = self._store.memories.get(check_id, Filter(agent=agent, kinds=_KNOWLEDGE))
        if memory is None or memory.agent != agent or chk.parse_check(memory) is None:
            raise NotFound(f"no prevention check {check_id!r} of agent {agent!r}")
        self._pipeline.forget(check_id, actor=agent, current=memory)

    # -- failure lookups -------------------------------------------------------------------------------------
    def _all_failures(self, agent: str) -> list[Occurrence]:
        flt = Filter(agent=agent, kinds=_FAILURE)
        return [occurrence_from_memory(m) for page in self._recall.pages(flt, size=PAGE_SIZE) for m in page]

    def _occurrences_by_tags(self, keys: Iterable[str], signatures: Iterable[str], agent: str) -> list[Occurrence]:
        """Every failure visible to ``agent`` in one of these patterns or with one of these signatures."""
        tags = [PATTERN_TAG + k for k in dict.fromkeys(keys)]
        tags += [SIG_TAG + signature_hash(s) for s in dict.fromkeys(signatures)]
        found: dict[str, Occurrence] = {}
        for tag in tags:
            for page in self._recall.pages(Filter(agent=agent, kinds=_FAILURE, tags=(tag,)), size=PAGE_SIZE):
                for m in page:
                    if m.id not in found:
                        found[m.id] = occurrence_from_memory(m)
        return list(found.values())

    def _similar_keys(self, text: str, signature: str, etype: str | None, agent: str) -> list[str]:
        """Pattern keys of past failures that are the same failure as ``text`` (identical or similar signature)."""
        flt = Filter(agent=agent, kinds=_FAILURE)
        query = self._embedder.embed([text])[0]
        cands = self._store.search.vector_candidates(query, flt, limit=_CANDIDATES)
        if not cands:
            return []
        memories = self._store.memories.get_many([c.id for c in cands], flt)
        past = [occurrence_from_memory(memories[c.id]) for c in cands if c.id in memories]
        if not past:
            return []
        signatures = list(dict.fromkeys(o.signature for o in past))
        vectors = self._embedder.embed([signature, *signatures])
        cosine = dict(zip(signatures, (float(x) for x in vectors[1:] @ vectors[0]), strict=True))
        match = best_match(
            signature,
            etype,
            (
                Candidate(key=o.key, signature=o.signature, error_type=o.error_type, similarity=cosine[o.signature])
                for o in past
            ),
            threshold=self.similarity,
        )
        return [] if match is None else [match.key]

    def _pattern_for(self, text: str, signature: str, etype: str | None, agent: str) -> str:
        """The pattern key a new occurrence joins (see the module docstring)."""
        same = self._store.memories.list(
            Filter(agent=agent, kinds=_FAILURE, tags=(SIG_TAG + signature_hash(signature),)), limit=50
        )
        same_sig = [o for o in (occurrence_from_memory(m) for m in same) if o.signature == signature]
        if same_sig:
            # Oldest first: the key the pattern has had longest (its id in ``patterns``).
            return min(same_sig, key=lambda o: (o.at, o.id)).key
        keys = self._similar_keys(text, signature, etype, agent)
        return keys[0] if keys else pattern_key(agent, signature)

    def _related_occurrences(
        self, text: str, signature: str, etype: str | None, agent: str
    ) -> tuple[list[Occurrence], str | None]:
        """The occurrences of the pattern ``text`` belongs to and its key (empty, None for a new failure)."""
        same = self._occurrences_by_tags([], [signature], agent)
        keys = [o.key for o in same] or self._similar_keys(text, signature, etype, agent)
        if not keys:
            return [], None
        return self._occurrences_by_tags(keys, [signature], agent), keys[0]


# -- helpers ---------------------------------------------------------------------------------------------------


def _main_group(occurrences: Sequence[Occurrence], signature: str, key: str | None = None) -> list[Occurrence]:
    """The pattern group holding ``signature`` (else ``key``, else the largest) among related occurrences."""
    groups = group_occurrences(occurrences)
    for g in groups:
        if any(o.signature == signature for o in g):
            return g
    for g in groups:
        if any(o.key == key for o in g):
            return g
    return max(groups, key=len)


def _description(memory: Memory) -> str:
    """What a memory is about: a code pattern's description lines (its code would dilute the meaning)."""
    header = memory.metadata.get("header_lines")
    if memory.kind == "code_pattern" and isinstance(header, int) and header > 0:
        return "\n".join(memory.content.splitlines()[:header])
    return memory.content


def _warning(p: FailurePattern) -> str:
    times = f"{p.occurrences} time{'s' if p.occurrences != 1 else ''}"
    first = p.prevention[0] if p.prevention else ""
    return f"Similar work failed {times} (last {p.last_seen.date().isoformat()}): {p.signature}. {first}".strip()
