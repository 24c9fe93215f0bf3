"""Failure patterns: occurrences grouped by signature, fix statistics and prevention checks (pure).

Occurrences are grouped into patterns by signature (see :mod:`engramdb.learning.signatures`),
and signatures that differ only in wording are joined when their exception type is the
same and their meanings are close (cosine of their embeddings, computed by the caller).
For each pattern the fixes tried are counted (successes / attempts, ranked by a Beta
posterior mean) and prevention checks are written from templates.

Everything here takes values and returns values: no store, no clock, no model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Final

from engramdb.errors import NotFound, ValidationError
from engramdb.learning.pattern_names import nearest_by_words
from engramdb.learning.signatures import (
    error_signature,
    exception_type,
    pattern_key,
    solution_key,
    variable_parts,
)
from engramdb.models import FailurePattern, SolutionStats

if TYPE_CHECKING:
    from engramdb.models import Memory

__all__ = [
    "SIMILARITY_THRESHOLD",
    "Candidate",
    "Occurrence",
    "aggregate_solutions",
    "best_match",
    "build_pattern",
    "find_pattern",
    "group_occurrences",
    "name_patterns",
    "occurrence_from_memory",
    "occurrence_from_metadata",
    "pattern_slug",
    "prevention_checks",
]

#: Cosine similarity of two signatures' embeddings at or above which two signatures with the same
#: exception type are one pattern. Signatures are already stripped of details, so what is left
#: is wording. Measured with MiniLM: rewordings of one failure ("cannot reach <host>" / "unable
#: to reach host <host>") score 0.97-1.0, while different failures of one exception type that
#: share most words ("connection refused" / "connection timed out", "too many" / "not enough
#: values to unpack") reach 0.94. Merging two different failures would recommend the wrong fix,
#: missing a rewording only delays learning, so the threshold sits high.
SIMILARITY_THRESHOLD: Final = 0.955

_SPACE = re.compile(r"\s+")

# -- grouping ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Occurrence:
    """One recorded failure, as the pattern logic needs it."""

    id: str
    message: str
    signature: str
    #: The pattern this occurrence was assigned to when it was recorded.
    key: str
    error_type: str | None
    at: datetime
    solution: str | None = None
    failed_solutions: tuple[str, ...] = ()
    context: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A past signature considered for joining: its pattern key, type, and similarity to the new one."""

    key: str
    signature: str
    error_type: str | None
    similarity: float


def best_match(
    signature: str,
    error_type: str | None,
    candidates: Iterable[Candidate],
    *,
    threshold: float = SIMILARITY_THRESHOLD,
) -> Candidate | None:
    """The candidate a new signature belongs with: an identical signature, else the most similar one
    of the same exception type at or above ``threshold``; None if there is none.
    """
    best: Candidate | None = None
    for cand in candidates:
        if cand.signature == signature:
            return cand
        if cand.error_type != error_type or cand.similarity < threshold:
            continue
        if best is None or (cand.similarity, cand.key) > (best.similarity, best.key):
            best = cand
    return best


class _Union:
    """Union-find over strings (pattern keys and signatures)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent.setdefault(x, x)
        if parent != x:
            root = self.find(parent)
            self.parent[x] = root
            return root
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def group_occurrences(occurrences: Iterable[Occurrence]) -> list[list[Occurrence]]:
    """Occurrences grouped into patterns, each group oldest first, groups by first occurrence.

    Two occurrences are in one pattern when they share a signature or a pattern key
    (transitively): keys join reworded signatures decided at write time, signatures
    join occurrences recorded by different agents (whose keys differ) and shared.
    """
    items = sorted(occurrences, key=lambda o: (o.at, o.id))
    uf = _Union()
    for o in items:
        uf.union("k:" + o.key, "s:" + o.signature)
    groups: dict[str, list[Occurrence]] = {}
    for o in items:
        groups.setdefault(uf.find("k:" + o.key), []).append(o)
    return list(groups.values())


# -- fixes -----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tally:
    successes: float = 0.0
    attempts: float = 0.0
    last_success_text: str | None = None
    last_text: str = ""
    last_at: datetime | None = None
    texts: dict[str, int] = field(default_factory=dict)


def _clean(solution: str) -> str:
    return _SPACE.sub(" ", solution).strip()


def aggregate_solutions(
    occurrences: Iterable[Occurrence], weights: Mapping[str, float] | None = None
) -> list[SolutionStats]:
    """The fixes tried for these occurrences, best first.

    ``successes`` counts occurrences where the fix was the one that worked,
    ``attempts`` those where it was tried (worked or failed). The ranking uses the
    posterior mean of a Beta(1, 1) prior, (s + 1) / (a + 2), so one success is
    not certainty and a fix that failed ranks below one never contradicted; ties go to
    more evidence, then to the more recent fix. A fix is shown as its most recent
    working wording. ``weights`` (by occurrence id, default 1) count an occurrence partly:
    fixes of *similar* failures count by how similar they are.
    """
    tallies: dict[str, _Tally] = {}
    for o in sorted(occurrences, key=lambda o: (o.at, o.id)):
        tried: list[tuple[str, bool]] = [(s, False) for s in o.failed_solutions]
        if o.solution:
            tried.append((o.solution, True))
        seen: set[str] = set()
        w = 1.0 if weights is None else weights.get(o.id, 0.0)
        if w <= 0.0:
            continue
        for raw, worked in tried:
            text = _clean(raw)
            if not text:
                continue
            key = solution_key(text)
            if key in seen and not worked:
                continue  # the same fix listed twice in one occurrence is one attempt
            seen.add(key)
            t = tallies.setdefault(key, _Tally())
            t.attempts += w
            t.last_text = text
            t.last_at = o.at
            if worked:
                t.successes += w
                t.last_success_text = text
    ranked = sorted(
        tallies.values(),
        key=lambda t: (
            -(t.successes + 1) / (t.attempts + 2),
            -t.attempts,
            -(t.last_at.timestamp() if t.last_at else 0),
        ),
    )
    return [
        SolutionStats(
            solution=t.last_success_text or t.last_text,
            successes=round(t.successes, 6),
            attempts=round(t.attempts, 6),
            success_rate=(t.successes + 1.0) / (t.attempts + 2.0),
        )
        for t in ranked
    ]


# -- prevention --------------------------------------------------------------------------------------------

# (words that identify the kind of failure, the check to run before acting). The first that matches wins.
_CHECKS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(r"(?i)timed?\s*out|timeout|deadline exceeded"),
        "Before calling {resource}, set an explicit timeout and retry with backoff; check its latency first",
    ),
    (
        re.compile(
            r"(?i)connection (?:refused|reset|aborted|error)|unreachable|could not connect|cannot connect"
            r"|can't connect|failed to connect|no route to host|name or service not known|name resolution"
            r"|getaddrinfo|dns|econnrefused|econnreset|broken pipe|<host>|<url>"
        ),
        "Before connecting to {resource}, check that it is reachable (a health check or a ping)",
    ),
    (
        re.compile(r"(?i)\b(?:429|rate.?limit|too many requests|quota|throttl)"),
        "Before sending requests to {resource}, throttle them and respect the rate limit (honour Retry-After)",
    ),
    (
        re.compile(
            r"(?i)\b(?:401|403)\b|unauthori[sz]ed|forbidden|authenticat|credential|token (?:has )?expired"
            r"|invalid token|access denied|api key"
        ),
        "Before calling {resource}, check that the credentials are present and not expired",
    ),
    (
        re.compile(r"(?i)permission denied|not permitted|eacces|eperm|read-only file system"),
        "Before writing to {resource}, check the permissions of the account that runs the task",
    ),
    (
        re.compile(r"(?i)no such file|not found|does not exist|doesn't exist|enoent|missing|filenotfound"),
        "Before using {resource}, check that it exists",
    ),
    (
        re.compile(r"(?i)no space left|disk (?:is )?full|enospc|quota exceeded"),
        "Before writing, check the free disk space",
    ),
    (
        re.compile(r"(?i)out of memory|memoryerror|cannot allocate|oom|killed"),
        "Before running, check the memory limit and the size of the input",
    ),
    (
        re.compile(r"(?i)no module named|modulenotfound|importerror|cannot import|package .* not installed"),
        "Before running, check that the required packages are installed in this environment",
    ),
    (
        re.compile(r"(?i)keyerror|missing (?:required )?(?:key|field|argument)|required (?:field|property)"),
        "Before processing the input, validate that it has every required field",
    ),
    (
        re.compile(r"(?i)nonetype|null ?pointer|undefined is not|cannot read propert|is none|of none"),
        "Before using a value that may be missing, check that it is not None",
    ),
    (
        re.compile(r"(?i)json|decode|parse|unexpected token|invalid literal|malformed|syntax"),
        "Before parsing the input, check its format (and log a sample of it)",
    ),
    (
        re.compile(r"(?i)lock|deadlock|busy|in use|conflict|already exists|\b409\b"),
        "Before writing, check that no other process holds {resource} (or make the step idempotent)",
    ),
    (
        re.compile(r"(?i)\b5\d\d\b|internal server error|bad gateway|service unavailable"),
        "Before depending on {resource}, check its status; retry server errors with backoff",
    ),
)

_RESOURCE_ORDER: Final = ("url", "host", "path", "email", "str")


def _resource(example: str) -> str:
    parts = variable_parts(example)
    for name in _RESOURCE_ORDER:
        values = parts.get(name)
        if values:
            value = values[0]
            label = {"url": "the service", "host": "the host", "path": "the file", "email": "the account"}.get(
                name, "the resource"
            )
            return f"{label} (e.g. {value})"
    return "the resource it needs"


def prevention_checks(
    *,
    signature: str,
    example: str,
    occurrences: int,
    solutions: Sequence[SolutionStats],
    last_seen: datetime,
) -> list[str]:
    """Checks to run before acting, written from the pattern and its fixes by templates (deterministic).

    The first line is the check that fits the kind of failure (or a generic watch
    item), then one line for the fix to try first and one per fix that kept failing.
    """
    history = f"{occurrences} time{'s' if occurrences != 1 else ''}, last {last_seen.date().isoformat()}"
    text = f"{signature}\n{example}"
    template = next((t for words, t in _CHECKS if words.search(text)), None)
    if template is not None:
        first = f"{template.format(resource=_resource(example))}. Seen {history}: {signature}"
    else:
        first = f"Watch for this failure, seen {history}: {signature}"
    checks = [first]
    working = [s for s in solutions if s.successes > 0]
    if working:
        best = working[0]
        checks.append(
            f"If it happens, first try: {best.solution} (worked {best.successes:g} of {best.attempts:g} times)."
        )
        if best.successes >= 2 and best.successes / max(best.attempts, 1.0) >= 0.5:
            checks.append(f"Consider applying it up front: {best.solution}.")
    for s in solutions:
        if s.successes == 0 and s.attempts >= 2:
            checks.append(f"Avoid: {s.solution} (failed all {s.attempts:g} times it was tried).")
    return checks


def build_pattern(
    occurrences: Sequence[Occurrence],
    *,
    solutions_limit: int | None = None,
) -> FailurePattern:
    """A :class:`~engramdb.models.FailurePattern` from one group of :func:`group_occurrences` (oldest first)."""
    first, last = occurrences[0], occurrences[-1]
    solutions = aggregate_solutions(occurrences)
    if solutions_limit is not None:
        solutions = solutions[:solutions_limit]
    # The most common signature names the pattern; ties go to the first one seen.
    counts: dict[str, int] = {}
    for o in occurrences:
        counts[o.signature] = counts.get(o.signature, 0) + 1
    signature = max(counts, key=lambda s: (counts[s], -_first_index(occurrences, s)))
    seen_in = Counter(o.context.strip() for o in occurrences if o.context.strip())
    return FailurePattern(
        id=first.key,
        name=pattern_slug(signature),
        occurs_in=[c for c, _ in seen_in.most_common(3)],
        signature=signature,
        example=last.message,
        occurrences=len(occurrences),
        first_seen=first.at,
        last_seen=last.at,
        solutions=solutions,
        prevention=prevention_checks(
            signature=signature,
            example=last.message,
            occurrences=len(occurrences),
            solutions=solutions,
            last_seen=last.at,
        ),
    )


_SLUG_STOP: Final = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "for",
        "in",
        "on",
        "at",
        "is",
        "was",
        "be",
        "by",
        "with",
        "and",
        "or",
        "from",
        "into",
        "as",
        "it",
        "its",
        "this",
        "that",
        "error",
        "exception",
        "err",
        "errno",
        "fatal",
        "warning",
        "failed",
        "named",
        "while",
        "after",
        "before",
        "during",
        "has",
        "have",
        "had",
        "could",
        "no",
    ]
)
_SLUG_WORD = re.compile(r"<\w+>|[a-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
MAX_SLUG_WORDS: Final = 4
#: Words that start the circumstances of a failure (when, where); a name stops there once it has two words.
_SLUG_CIRCUMSTANCE: Final = frozenset(["after", "in", "during", "while", "when", "at", "on", "since", "within"])
#: Wordings of one idea that a name should spell one way ("timed out", "time-out" -> "timeout").
_SLUG_PHRASES: Final = ((re.compile(r"\btim(?:e|ed|es|ing)[\s_-]*out\b"), "timeout"),)


def pattern_slug(signature: str) -> str:
    """A readable name for a failure pattern: up to four telling words of its signature, hyphenated.

    ``"ModuleNotFoundError: No module named 'yaml'"`` gives ``module-not-found-yaml``; the exception
    type's words come first (without Error/Exception), then the message's, without placeholders,
    stop words or repeats, up to the circumstances ("after <n>s in CI"); "timed out" and its variants
    are spelled ``timeout`` (``"npm install timed out after <n> in CI"`` gives ``npm-install-timeout``).
    ``failure`` when no word is left.
    """
    words: list[str] = []
    etype = exception_type(signature)
    rest = signature
    if etype is not None:
        words += [w.lower() for w in _CAMEL.findall(etype) if w.lower() not in ("error", "exception")]
        rest = signature.split(":", 1)[1] if ":" in signature else ""
    rest = rest.lower()
    for phrase, canonical in _SLUG_PHRASES:
        rest = phrase.sub(canonical, rest)
    for w in _SLUG_WORD.findall(rest):
        if w in _SLUG_CIRCUMSTANCE and len(words) >= 2:
            break  # what failed comes first; when and where it failed ("after <n>s in CI") varies
        if w.startswith("<") or w in _SLUG_STOP or w in words or w.isdigit():
            continue
        words.append(w)
    kept = [w for w in words if w not in _SLUG_STOP][:MAX_SLUG_WORDS]
    return "-".join(kept) or "failure"


def name_patterns(patterns: Sequence[FailurePattern]) -> list[FailurePattern]:
    """The patterns (same order) with unique names: their slug, then ``-2``, ``-3``... by first occurrence."""
    taken: dict[str, int] = {}
    names: dict[str, str] = {}
    for p in sorted(patterns, key=lambda p: (p.first_seen, p.id)):
        base = pattern_slug(p.signature)
        taken[base] = taken.get(base, 0) + 1
        names[p.id] = base if taken[base] == 1 else f"{base}-{taken[base]}"
    return [replace(p, name=names[p.id]) for p in patterns]


def _first_index(occurrences: Sequence[Occurrence], signature: str) -> int:
    for i, o in enumerate(occurrences):
        if o.signature == signature:
            return i
    return len(occurrences)


def occurrence_from_metadata(
    *, memory_id: str, content: str, metadata: Mapping[str, object], created_at: datetime, agent: str
) -> Occurrence:
    """An :class:`Occurrence` from a stored ``failure`` memory; tolerates memories written by hand.

    A ``failure`` memory that ``mem.failures.record`` did not write (no signature in its
    metadata) is read as an error message of its own.
    """
    message = metadata.get("error")
    if not isinstance(message, str) or not message.strip():
        message = content
    signature = metadata.get("signature")
    if not isinstance(signature, str) or not signature:
        signature = error_signature(message)
    key = metadata.get("pattern")
    if not isinstance(key, str) or not key:
        key = pattern_key(agent, signature)
    etype = metadata.get("error_type")
    solution = metadata.get("solution")
    failed = metadata.get("failed_solutions")
    context = metadata.get("context")
    return Occurrence(
        id=memory_id,
        message=message,
        signature=signature,
        key=key,
        error_type=etype if isinstance(etype, str) else exception_type(message),
        at=created_at,
        solution=solution if isinstance(solution, str) and solution.strip() else None,
        failed_solutions=tuple(s for s in failed if isinstance(s, str)) if isinstance(failed, list) else (),
        context=context if isinstance(context, str) else "",
    )


def occurrence_from_memory(memory: Memory) -> Occurrence:
    """:func:`occurrence_from_metadata` of a stored ``failure`` memory."""
    return occurrence_from_metadata(
        memory_id=memory.id,
        content=memory.content,
        metadata=memory.metadata,
        created_at=memory.created_at,
        agent=memory.agent,
    )


def find_pattern(
    groups: Sequence[list[Occurrence]], pattern_id: str, *, agent: str, not_found_note: str = ""
) -> list[Occurrence]:
    """The group (from :func:`group_occurrences`) that ``pattern_id`` names, as ``agent`` sees the patterns.

    A pattern is named after its first occurrence's key; occurrences that joined it later
    (reworded, or recorded by another agent and shared) keep theirs, so any key names it.
    So does its readable name (see :func:`name_patterns`), and a unique prefix of at least 4
    characters of a key. Raises ValidationError when the
    id is ambiguous, NotFound (its message ending with ``not_found_note``) when it names none.
    """
    found = [g for g in groups if any(o.key == pattern_id for o in g)]
    if not found:
        named = name_patterns([build_pattern(g) for g in groups])
        found = [g for g, p in zip(groups, named, strict=True) if p.name == pattern_id.lower()]
    if not found and len(pattern_id) >= 4:
        found = [g for g in groups if any(o.key.startswith(pattern_id) for o in g)]
    if not found:
        # A slug of what the pattern is about (seed 001's "npm-install-timeout"): the one pattern whose name,
        # signature, messages and contexts hold most of its words.
        texts = [" ".join([p.name, p.signature, *p.occurs_in, *(o.message for o in g[-3:])]) for g, p in
                 zip(groups, name_patterns([build_pattern(g) for g in groups]), strict=True)]  # fmt: skip
        best = nearest_by_words(pattern_id, texts)
        found = [groups[best]] if best is not None else []
    if len(found) > 1:
        raise ValidationError(f"pattern id {pattern_id!r} is ambiguous: give more characters")
    if not found:
        raise NotFound(f"no failure pattern {pattern_id!r} visible to agent {agent!r}{not_found_note}")
    return found[0]
