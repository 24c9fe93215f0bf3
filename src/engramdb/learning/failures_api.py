"""The failures, episodes, adaptive execution and code-pattern part of the :class:`~engramdb.Engram` facade.

Thin on purpose: every method validates its arguments, reads or writes memories
through the store (the agent is a hard filter there, and memories shared with the
agent count), and hands values to the pure modules next to it:
:mod:`~engramdb.learning.failures` (signatures, patterns, fixes, prevention),
:mod:`~engramdb.learning.episodes`, :mod:`~engramdb.learning.adaptive` and
:mod:`~engramdb.learning.code_patterns`.

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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import numpy as np

from engramdb import _validate as check
from engramdb._host import FacadeHost
from engramdb.errors import NotFound, ValidationError
from engramdb.learning import code_patterns as code
from engramdb.learning import episodes as ep
from engramdb.learning.adaptive import Adaptive, RecoveryHook
from engramdb.learning.failures import (
    SIMILARITY_THRESHOLD,
    Candidate,
    Occurrence,
    best_match,
    build_pattern,
    error_signature,
    error_text,
    exception_type,
    find_pattern,
    group_occurrences,
    occurrence_from_memory,
    pattern_dict,
    pattern_key,
    signature_hash,
    solution_dict,
)
from engramdb.models import FailurePattern, Hit, Memory, SolutionStats
from engramdb.storage.base import Filter

__all__ = ["FailureWarning", "FailuresAPI", "PatternPlan", "pattern_dict", "solution_dict"]

_FAILURE: tuple[str, ...] = ("failure",)
_EPISODE: tuple[str, ...] = ("episode",)
#: Page size when reading all of an agent's failures.
_PAGE = 5000
#: Past failures (nearest by meaning) whose signatures are compared with a new one's.
_CANDIDATES = 20
#: Tag prefixes that index failure memories by signature and by pattern.
SIG_TAG = "sig:"
PATTERN_TAG = "pattern:"


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureWarning:
    """A known failure pattern that a planned action resembles (see :meth:`FailuresAPI.check`)."""

    pattern: FailurePattern
    #: Cosine similarity between the planned action and the closest past occurrence, 0..1.
    similarity: float
    #: One line for the agent: what happened before and what to check first.
    message: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"pattern": pattern_dict(self.pattern), "similarity": self.similarity, "message": self.message}


@dataclass(frozen=True, slots=True, kw_only=True)
class PatternPlan:
    """How to apply a known pattern to a task (see :meth:`FailuresAPI.apply_pattern`)."""

    task: str
    pattern_id: str
    #: "failure_pattern", or the kind of the memory the id names ("code_pattern", "decision", ...).
    kind: str
    #: What the pattern is, in one line.
    title: str
    #: Cosine similarity of the task and the pattern, -1..1: low means the pattern may not fit the task.
    relevance: float
    #: What to do, in order: checks before starting, the approach or code to reuse.
    steps: list[str] = field(default_factory=list)
    #: For a failure pattern: its fixes, best first.
    fixes: list[SolutionStats] = field(default_factory=list)
    #: For a code pattern: the code to adapt.
    code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "task": self.task,
            "pattern_id": self.pattern_id,
            "kind": self.kind,
            "title": self.title,
            "relevance": self.relevance,
            "steps": list(self.steps),
            "fixes": [solution_dict(s) for s in self.fixes],
            "code": self.code,
        }


class FailuresAPI(FacadeHost):
    """Failure, episode, adaptive-execution and code-pattern methods of :class:`~engramdb.Engram`."""

    #: Signature similarity at or above which a reworded failure joins an existing pattern.
    failure_similarity: ClassVar[float] = SIMILARITY_THRESHOLD

    # -- failures --------------------------------------------------------------------------------------------
    def record_failure(
        self,
        error: BaseException | str,
        *,
        agent: str = "default",
        context: str = "",
        solution: str | None = None,
        failed_solutions: Iterable[str] = (),
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        visibility: str = "private",
    ) -> Memory:
        """Record one occurrence of a failure; returns the ``failure`` memory.

        ``error`` is an exception or its message. ``solution`` is the fix that worked
        (if one did), ``failed_solutions`` the fixes tried that did not. Call it once per
        occurrence: occurrences are what :meth:`failure_patterns` counts and what
        :meth:`solutions` learns from.
        """
        text, etype = _error(error)
        agent = check.agent_name(agent)
        if not isinstance(context, str):
            raise ValidationError(f"context must be text, not {type(context).__name__}")
        fix = _optional_text(solution, "solution")
        failed = _texts(failed_solutions, "failed_solutions")
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
        return self.remember(
            content,
            agent=agent,
            kind="failure",
            tags=[*user_tags, SIG_TAG + signature_hash(signature), PATTERN_TAG + key],
            metadata=meta,
            visibility=visibility,
        )

    def solutions(self, error: BaseException | str, *, agent: str = "default", limit: int = 3) -> list[SolutionStats]:
        """The fixes recorded for ``error``'s failure pattern, best first.

        The pattern is the one of earlier failures with the same signature, else of
        failures whose signature means the same. ``successes`` counts the times a fix
        was the one that worked, ``attempts`` the times it was tried. Empty when the
        failure is new or nothing was ever fixed.
        """
        text, etype = _error(error)
        agent = check.agent_name(agent)
        limit = check.limit(limit)
        signature = error_signature(text)
        occurrences, key = self._related_occurrences(text, signature, etype, agent)
        if not occurrences:
            return []
        return build_pattern(_main_group(occurrences, signature, key)).solutions[:limit]

    def failure_patterns(
        self, *, agent: str = "default", recurring: bool = False, since: datetime | None = None
    ) -> list[FailurePattern]:
        """The failure patterns ``agent`` has seen (its own failures and those shared with it).

        Most occurrences first, then most recent. ``recurring=True`` keeps patterns seen
        at least twice; ``since`` keeps patterns seen at or after that time (their
        statistics still cover their whole history).
        """
        agent = check.agent_name(agent)
        if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
            raise ValidationError("since must be a timezone-aware datetime")
        patterns = [build_pattern(g) for g in group_occurrences(self._all_failures(agent))]
        if recurring:
            patterns = [p for p in patterns if p.occurrences >= 2]
        if since is not None:
            patterns = [p for p in patterns if p.last_seen >= since]
        patterns.sort(key=lambda p: (-p.occurrences, -p.last_seen.timestamp(), p.id))
        return patterns

    def failure_pattern(self, pattern_id: str, *, agent: str = "default") -> FailurePattern:
        """One failure pattern by its id (or a unique prefix of it, at least 4 characters)."""
        return build_pattern(self._pattern_group(pattern_id, agent))

    def _pattern_group(self, pattern_id: str, agent: str) -> list[Occurrence]:
        agent = check.agent_name(agent)
        if not isinstance(pattern_id, str) or not pattern_id.strip():
            raise ValidationError("pattern id must be a non-empty string")
        wanted = pattern_id.strip()
        return find_pattern(group_occurrences(self._all_failures(agent)), wanted, agent=agent)

    def prevention(self, pattern_id: str, *, agent: str = "default") -> list[str]:
        """Checks to run before acting so that the failure pattern ``pattern_id`` does not happen again."""
        return self.failure_pattern(pattern_id, agent=agent).prevention

    def check(
        self,
        action: str,
        *,
        agent: str = "default",
        limit: int = 3,
        min_similarity: float = 0.35,
    ) -> list[FailureWarning]:
        """Before acting: the known failure patterns a planned ``action`` (or context) resembles, closest first.

        A pattern is reported when one of its occurrences (the error and what the agent
        was doing when it happened) is at least ``min_similarity`` alike in meaning.
        Empty when nothing similar ever failed.
        """
        action = check.content(action, what="action")
        agent = check.agent_name(agent)
        limit = check.limit(limit)
        if isinstance(min_similarity, bool) or not isinstance(min_similarity, int | float):
            raise ValidationError(f"min_similarity must be a number, not {min_similarity!r}")
        flt = Filter(agent=agent, kinds=_FAILURE)
        query = self.embedder.embed([action])[0]
        cands = [c for c in self.store.vector_candidates(query, flt, limit=50) if c.score >= min_similarity]
        if not cands:
            return []
        found = self.store.get_many([c.id for c in cands], flt)
        warnings: list[FailureWarning] = []
        seen: set[str] = set()
        for cand in cands:
            memory = found.get(cand.id)
            if memory is None:
                continue
            occ = occurrence_from_memory(memory)
            if occ.key in seen:
                continue
            group = _main_group(self._occurrences_by_tags([occ.key], [occ.signature], agent) or [occ], occ.signature)
            seen.update(o.key for o in group)
            pattern = build_pattern(group)
            warnings.append(
                FailureWarning(pattern=pattern, similarity=round(float(cand.score), 4), message=_warning(pattern))
            )
            if len(warnings) >= limit:
                break
        return warnings

    def apply_pattern(self, pattern_id: str, task: str, *, agent: str = "default") -> PatternPlan:
        """A plan for applying a known pattern to ``task``: a failure pattern's checks and fixes, or a memory's
        approach or code (``pattern_id`` is a failure pattern id or a memory id visible to ``agent``).

        Nothing is written: record how it went with :meth:`record` or :meth:`record_failure`.
        """
        task = check.content(task, what="task")
        agent = check.agent_name(agent)
        try:
            group = self._pattern_group(pattern_id, agent)
        except NotFound:
            memory = self.store.get(pattern_id.strip(), Filter(agent=agent))
            if memory is None:
                raise NotFound(f"no failure pattern or memory {pattern_id!r} visible to agent {agent!r}") from None
            return _memory_plan(memory, task, self._relevance(task, _description(memory)))
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

    def _relevance(self, task: str, *texts: str) -> float:
        """How well ``task`` fits the closest of ``texts`` (cosine similarity)."""
        vectors = self.embedder.embed([task, *texts])
        return round(float(np.max(vectors[1:] @ vectors[0])), 4)

    # -- failure lookups -------------------------------------------------------------------------------------
    def _all_failures(self, agent: str) -> list[Occurrence]:
        flt = Filter(agent=agent, kinds=_FAILURE)
        return [occurrence_from_memory(m) for page in self._pages(flt, size=_PAGE) for m in page]

    def _occurrences_by_tags(self, keys: Iterable[str], signatures: Iterable[str], agent: str) -> list[Occurrence]:
        """Every failure visible to ``agent`` in one of these patterns or with one of these signatures."""
        tags = [PATTERN_TAG + k for k in dict.fromkeys(keys)]
        tags += [SIG_TAG + signature_hash(s) for s in dict.fromkeys(signatures)]
        found: dict[str, Occurrence] = {}
        for tag in tags:
            for page in self._pages(Filter(agent=agent, kinds=_FAILURE, tags=(tag,)), size=_PAGE):
                for m in page:
                    if m.id not in found:
                        found[m.id] = occurrence_from_memory(m)
        return list(found.values())

    def _similar_keys(self, text: str, signature: str, etype: str | None, agent: str) -> list[str]:
        """Pattern keys of past failures that are the same failure as ``text`` (identical or similar signature)."""
        flt = Filter(agent=agent, kinds=_FAILURE)
        query = self.embedder.embed([text])[0]
        cands = self.store.vector_candidates(query, flt, limit=_CANDIDATES)
        if not cands:
            return []
        memories = self.store.get_many([c.id for c in cands], flt)
        past = [occurrence_from_memory(memories[c.id]) for c in cands if c.id in memories]
        if not past:
            return []
        signatures = list(dict.fromkeys(o.signature for o in past))
        vectors = self.embedder.embed([signature, *signatures])
        cosine = dict(zip(signatures, (float(x) for x in vectors[1:] @ vectors[0]), strict=True))
        match = best_match(
            signature,
            etype,
            (
                Candidate(key=o.key, signature=o.signature, error_type=o.error_type, similarity=cosine[o.signature])
                for o in past
            ),
            threshold=self.failure_similarity,
        )
        return [] if match is None else [match.key]

    def _pattern_for(self, text: str, signature: str, etype: str | None, agent: str) -> str:
        """The pattern key a new occurrence joins (see the module docstring)."""
        same = self.store.list(
            Filter(agent=agent, kinds=_FAILURE, tags=(SIG_TAG + signature_hash(signature),)), limit=50
        )
        same_sig = [o for o in (occurrence_from_memory(m) for m in same) if o.signature == signature]
        if same_sig:
            # Oldest first: the key the pattern has had longest (its id in failure_patterns).
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

    # -- episodes --------------------------------------------------------------------------------------------
    def episode(
        self,
        task: str,
        *,
        agent: str = "default",
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        record_failures: bool = True,
    ) -> ep.Episode:
        """A context manager that records a task as an ``episode`` memory with the events it went through.

        ``with mem.episode("deploy api", agent="ops") as e: e.event("build", {"ok": True})``.
        The episode ends as a success, or as a failure when an exception escapes (it
        is recorded with its error and re-raised) or :meth:`~engramdb.learning.episodes.Episode.fail`
        was called. With ``record_failures`` a failure is also recorded with
        :meth:`record_failure`, so failure patterns learn from episodes.
        """
        task = check.content(task, what="task")
        agent = check.agent_name(agent)
        user_tags = check.tags(tags if not isinstance(tags, str) else [tags])
        extra = check.metadata(metadata)

        def save(episode: ep.Episode) -> Memory:
            failure_id = None
            if record_failures and episode.outcome == "failure":
                reason = episode.error or episode.reason or "failed"
                failure = self.record_failure(
                    episode.exception if episode.exception is not None else reason,
                    agent=agent,
                    context=f"episode: {task}",
                    metadata={"episode_task": task},
                )
                failure_id = failure.id
            meta = ep.episode_metadata(episode, extra=extra, failure_id=failure_id)
            return self.remember(
                task,
                agent=agent,
                kind="episode",
                tags=[*user_tags, ep.OUTCOME_TAG + (episode.outcome or "aborted")],
                metadata=meta,
            )

        return ep.Episode(task, agent=agent, on_end=save)

    def episodes(
        self, task: str, *, agent: str = "default", outcome: str | None = None, limit: int = 5
    ) -> list[ep.EpisodeRecord]:
        """Past episodes most similar to ``task``, best first; ``outcome`` ("success"/"failure") filters."""
        task = check.content(task, what="task")
        if outcome is not None and outcome not in ep.OUTCOMES:
            raise ValidationError(f"outcome must be one of {', '.join(ep.OUTCOMES)}, not {outcome!r}")
        tags = [ep.OUTCOME_TAG + outcome] if outcome else None
        hits = self.search(task, agent=agent, kind="episode", tags=tags, limit=limit)
        out = []
        for h in hits:
            record = ep.parse_episode(h.memory, score=h.score)
            if record is not None:
                out.append(record)
        return out

    def analyze_episodes(
        self, *, agent: str = "default", task: str | None = None, limit: int = 500
    ) -> ep.EpisodeAnalysis:
        """What goes wrong in failed episodes: event kinds seen more often before failure than success.

        Over ``agent``'s episodes (the ``limit`` most similar to ``task`` if given, else
        the ``limit`` most recent): each event kind's failure rate when it occurs
        against the rate when it does not, with Fisher's exact test; the steps failures
        ended on; and their most common errors.
        """
        agent = check.agent_name(agent)
        limit = check.limit(limit)
        if task is not None:
            hits = self.search(check.content(task, what="task"), agent=agent, kind="episode", limit=limit)
            memories = [h.memory for h in hits]
        else:
            memories = self.store.list(Filter(agent=agent, kinds=_EPISODE), limit=limit)
        records = [r for r in (ep.parse_episode(m) for m in memories) if r is not None]
        return ep.analyze(records)

    # -- adaptive execution ----------------------------------------------------------------------------------
    def adaptive(
        self,
        task: str,
        options: Sequence[str] | None = None,
        *,
        agent: str = "default",
        recover: RecoveryHook | None = None,
        category: str | None = None,
    ) -> Adaptive:
        """Run a task adaptively: choose the approach, time it, record the outcome, recover from known failures.

        Use as a decorator (the chosen approach is passed as the first argument when
        ``options`` are given) or as a context manager (``run.approach``). See
        :mod:`engramdb.learning.adaptive`.
        """
        task = check.content(task, what="task")
        agent = check.agent_name(agent)
        opts = None
        if options is not None:
            if isinstance(options, str):
                raise ValidationError("options must be a list of approach names")
            opts = _texts(options, "options")
            if not opts:
                raise ValidationError("options must not be empty")
        if recover is not None and not callable(recover):
            raise ValidationError("recover must be callable")
        return Adaptive(self, task, options=opts, agent=agent, recover=recover, category=category)

    # -- code patterns ---------------------------------------------------------------------------------------
    #: Functions, classes and error handlers of Python source, with complexity estimates (pure; see module).
    extract_code_patterns: ClassVar[Callable[..., list[code.CodePattern]]] = staticmethod(code.extract)

    def remember_code(
        self,
        source: str,
        *,
        agent: str = "default",
        filename: str | None = None,
        tags: Iterable[str] = (),
        min_lines: int = 3,
        visibility: str = "private",
    ) -> list[Memory]:
        """Extract the functions, classes and error handlers of Python ``source`` and store them.

        Each becomes a ``code_pattern`` memory (tagged ``python`` and its pattern type)
        written in one batch; patterns shorter than ``min_lines`` are skipped.
        Returns the stored memories (a pattern already stored merges into it).
        Raises ValidationError if the source does not parse.
        """
        if not isinstance(source, str):
            raise ValidationError(f"source must be text, not {type(source).__name__}")
        agent = check.agent_name(agent)
        user_tags = list(check.tags(tags if not isinstance(tags, str) else [tags]))
        patterns = [p for p in code.extract(source, filename=filename) if p.lines >= min_lines]
        items = [
            {
                "content": p.content(),
                "agent": agent,
                "kind": "code_pattern",
                "tags": [*user_tags, "python", p.pattern_type],
                "metadata": p.metadata(),
                "visibility": visibility,
            }
            for p in patterns
        ]
        return self.remember_many(items) if items else []

    def suggest_patterns(
        self,
        task: str,
        *,
        agent: str = "default",
        pattern_type: str | None = None,
        limit: int = 5,
    ) -> list[Hit]:
        """Stored code patterns most relevant to a task description, best first.

        ``pattern_type`` ("function", "class", "error_handler") restricts the kind of pattern.
        """
        if pattern_type is not None and pattern_type not in code.PATTERN_TYPES:
            raise ValidationError(f"pattern_type must be one of {', '.join(code.PATTERN_TYPES)}, not {pattern_type!r}")
        tags = [pattern_type] if pattern_type else None
        return self.search(task, agent=agent, kind="code_pattern", tags=tags, limit=limit)


# -- helpers ---------------------------------------------------------------------------------------------------


def _error(error: object) -> tuple[str, str | None]:
    """An error argument as (message, exception type)."""
    if isinstance(error, BaseException):
        text = error_text(error)
        return check.content(text, what="error"), type(error).__name__
    if not isinstance(error, str):
        raise ValidationError(f"error must be an exception or a message, not {type(error).__name__}")
    text = check.content(error, what="error").strip()
    return text, exception_type(text)


def _optional_text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, not {type(value).__name__}")
    return value.strip() or None


def _texts(values: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ValidationError(f"{what} must be a list of strings, not a string")
    out: dict[str, None] = {}
    for v in values:
        if not isinstance(v, str) or not v.strip():
            raise ValidationError(f"each of {what} must be a non-empty string, not {v!r}")
        out[v.strip()] = None
    return tuple(out)


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


def _memory_plan(memory: Memory, task: str, relevance: float) -> PatternPlan:
    meta = memory.metadata
    first_line = memory.content.strip().splitlines()[0] if memory.content.strip() else memory.id
    if memory.kind == "code_pattern":
        name = str(meta.get("name") or first_line)
        signature = meta.get("signature")
        steps = [f"Reuse {name}" + (f" ({signature})" if signature else "") + f" for: {task}"]
        if meta.get("handled"):
            steps.append(f"It handles: {', '.join(str(h) for h in meta['handled'])}.")
        if meta.get("complexity_level"):
            steps.append(f"Complexity: {meta['complexity_level']} ({meta.get('complexity')}).")
        header = meta.get("header_lines")
        lines = memory.content.splitlines()
        code_text = (
            "\n".join(lines[header:]) if isinstance(header, int) and 0 <= header < len(lines) else memory.content
        )
        return PatternPlan(
            task=task,
            pattern_id=memory.id,
            kind="code_pattern",
            title=f"{meta.get('pattern_type', 'code')} {name}",
            relevance=relevance,
            steps=steps,
            code=code_text,
        )
    action = meta.get("action")
    steps = [f"Do: {action}" if isinstance(action, str) and action else f"Apply: {first_line}"]
    if memory.success_rate is not None:
        steps.append(f"It worked {memory.successes:g} of {memory.attempts:g} times it was used.")
    return PatternPlan(
        task=task, pattern_id=memory.id, kind=memory.kind, title=first_line, relevance=relevance, steps=steps
    )


def _warning(p: FailurePattern) -> str:
    times = f"{p.occurrences} time{'s' if p.occurrences != 1 else ''}"
    first = p.prevention[0] if p.prevention else ""
    return f"Similar work failed {times} (last {p.last_seen.date().isoformat()}): {p.signature}. {first}".strip()
