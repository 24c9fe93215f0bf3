"""Retrieval benchmark: engramdb search against BM25 and vector-only, on the same data in the same run.

Quality (default): LoCoMo and LongMemEval dev data from ../shared/bench-data (see bench/README.md),
recall@5/10 of the evidence turns, overall and per category, for engramdb as it ranks now and as it
ranked before speaker weighting ("engramdb before", same store: assistant turns at full weight); plus a
fusion study over the store's own keyword and vector candidate lists, and a context study (neighbour
spreading, speaker weighting, session aggregation, contextual keyword keys, candidate depth: the options
tried, kept and rejected, side by side; since session 5 also a named day from the question's relative time
expression, session diversity and a turn's best passage in the keyword channel). LongMemEval splits its
questions into the half the options were chosen on (positions < 41) and the confirmation half (``halves``).
Speed: batched ingest rate and search latency. Scale (``--scale``):
search latency at 10k and 100k memories against a plain numpy scan of the same vectors
(both in ``_retrieval_speed.py``; console tables in ``_retrieval_report.py``).

    python bench/retrieval.py                                  # full quality + speed run
    python bench/retrieval.py --limit-conversations 1 --limit-questions 40 --skip-speed   # quick
    python bench/retrieval.py --scale --skip-quality --skip-speed                          # scale only
    python bench/retrieval.py --lme-questions 40 --skip-speed      # LongMemEval: only its first 40 questions
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import math
import os
import platform
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from _data import LOCOMO_CATEGORIES, Doc, cached_positions, event_time, load_locomo, load_longmemeval
from _report import write_json
from _retrieval_report import report
from _retrieval_speed import (  # _latency, _load, _ms, _scale_texts: re-exported for bench/scale.py and others
    AGENT,
    _latency,  # noqa: F401
    _load,  # noqa: F401
    _ms,  # noqa: F401
    _scale_texts,  # noqa: F401
    run_scale,
    run_speed,
)
from _systems import (
    BM25Index,
    FTS5Replica,
    Ranked,
    VectorIndex,
    contextual_key,
    fuse_convex,
    fuse_rrf,
    fused_scores,
    paired_bootstrap,
    recall_at_k,
    session_recall_at_k,
    session_variant,
    spread_variant,
)
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.retrieval.context import (
    ASSISTANT_WEIGHT,
    FOLLOWS_KEY,
    NEIGHBOUR_WEIGHT,
    ROLE_KEY,
    SHORT_TURN_CHARS,
    spread_to_neighbours,
    weigh_speakers,
)
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.text import query_terms
from engramdb.retrieval.timeref import TIME_WEIGHT, find_time
from engramdb.storage.base import Filter

#: The engine as it ranked before speaker weighting (same store, assistant turns at full weight;
#: until 2026-11-24 this row was the engine before neighbour spreading, bench/RESULTS.md section 5).
BEFORE = "engramdb before"
KS = (5, 10)
#: Turn ranking depth used for LongMemEval session recall (walk down to k distinct sessions).
SESSION_DEPTH = 50
#: Candidates per channel in the fusion study: what the engine fetches for a limit-10 search.
FUSION_DEPTH = 50
FUSION_WEIGHTS = (0.3, 0.5, 0.7)
#: Candidates per channel for the depth sweep of the fusion study.
DEPTH_SWEEP = (10, 20, 50, 100, 250)
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# Wide enough for the tables when output goes to a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 150)


# -- bookkeeping ---------------------------------------------------------------------------------


@dataclass
class Scores:
    """Per-query measures of every system, grouped (LoCoMo category, LongMemEval question type)."""

    #: system -> measure ("recall@5", "session_recall@10", ...) -> group -> values
    values: dict[str, dict[str, dict[str, list[float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    )

    def add(self, system: str, measure: str, group: str, value: float) -> None:
        self.values[system][measure][group].append(value)

    def per_query(self, system: str, measure: str) -> list[float]:
        """Values in a fixed question order (groups sorted), so two systems' lists pair up."""
        groups = self.values[system][measure]
        return [v for g in sorted(groups) for v in groups[g]]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for system, measures in self.values.items():
            out[system] = {}
            for measure, groups in measures.items():
                every = [v for vals in groups.values() for v in vals]
                out[system][measure] = {
                    "overall": _mean(every),
                    "n": len(every),
                    "groups": {g: {"mean": _mean(v), "n": len(v)} for g, v in sorted(groups.items())},
                }
        return out


def compare(scores: Scores, fusion: Scores | None, measures: Sequence[str]) -> dict[str, Any]:
    """engramdb minus each reference, paired by question, with a 95% bootstrap interval.

    References: the two baselines and, from the fusion study, the engine's own channels alone
    (the hybrid must beat its best single channel).
    """
    refs: list[tuple[str, Scores, str]] = [
        ("engramdb before (assistant turns at full weight)", scores, BEFORE),
        ("bm25", scores, "bm25"),
        ("vector", scores, "vector"),
    ]
    time_refs = [(f"{name} - {TIME_NONE}", name) for name in TIME_ROWS if name != TIME_NONE]
    if fusion is not None:
        refs += [
            ("own keyword channel", fusion, "fts: keyword only"),
            ("own vector channel", fusion, "fts: vector only"),
        ]
    out: dict[str, Any] = {}
    for measure in measures:
        ours = scores.per_query("engramdb", measure)
        for label, source, system in refs:
            if measure in source.values[system]:
                out[f"{measure}: engramdb - {label}"] = paired_bootstrap(ours, source.per_query(system, measure))
        for label, system in time_refs:
            for scope in ("", "dated "):
                if scope + measure in scores.values[system]:
                    diff = paired_bootstrap(
                        scores.per_query(system, scope + measure), scores.per_query(TIME_NONE, scope + measure)
                    )
                    out[f"{scope}{measure}: {label}"] = diff
    return out


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.fmean(finite) if finite else math.nan


# -- one corpus, every system ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    text: str
    group: str
    gold: tuple[str, ...]
    gold_sessions: tuple[str, ...] = ()
    #: When the question is asked: LongMemEval's question date, LoCoMo's last session date (its questions were
    #: written after the conversation): the reference of "last Saturday" in the time study (``Corpus.timed``).
    asked: datetime | None = None


#: The time study (bench/RESULTS.md, "time in questions"): every row counts the question's time from its date
#: and differs only in how the time the question names is used:
#: (time weight, keep the time words in the keyword query).
TIME_ENGINE = f"time +{TIME_WEIGHT} x nearness (engine)"
TIME_NONE = "time not resolved"
#: name -> (weight, keep the time words in the keyword query, additive)
TIME_ROWS: dict[str, tuple[float, bool, bool]] = {
    TIME_NONE: (0.0, True, True),
    TIME_ENGINE: (TIME_WEIGHT, True, True),
    **{f"time +{w} x nearness": (w, True, True) for w in (0.1, 0.2, 0.5, 1.0) if w != TIME_WEIGHT},
    f"time +{TIME_WEIGHT}, time words out of the keyword query": (TIME_WEIGHT, False, True),
    "time: outside x0.5 (multiplicative)": (0.5, True, False),
    "time: outside x0 (multiplicative, a filter)": (1.0, True, False),
}


def _time_searcher(store: Any, embedder: CachedEmbedder, weight: float, words: bool, additive: bool) -> HybridSearcher:
    searcher = HybridSearcher(store, embedder, time_weight=weight)
    searcher.time_words = words
    searcher.time_additive = additive
    return searcher


def _without_speaker_weight(store: Any, embedder: CachedEmbedder) -> HybridSearcher:
    """A searcher ranking as the engine did before speaker weighting (``assistant_weight=1`` where it has one)."""
    if "assistant_weight" in inspect.signature(HybridSearcher).parameters:
        return HybridSearcher(store, embedder, assistant_weight=1.0)
    return HybridSearcher(store, embedder)


class Corpus:
    """One indexed corpus (a LoCoMo conversation or a LongMemEval haystack) under every system.

    Turns are written as an application records a conversation: each turn after the first of its
    session carries ``metadata["follows"]`` = the id of the turn before it, which lets search
    spread relevance between neighbours (``engramdb.retrieval.context``).
    """

    def __init__(self, docs: Sequence[Doc], embedder: CachedEmbedder) -> None:
        self.docs = docs
        self.session_of = {d.id: d.session for d in docs}
        self.embedder = embedder
        ids = [d.id for d in docs]
        texts = [d.content for d in docs]
        self.bm25 = BM25Index(ids, texts)
        # Embedded once here; the engine's remember_many below gets the same vectors from the cache.
        self.vectors = VectorIndex(ids, embedder.embed(texts))
        self.mem = Engram(":memory:", embedder=embedder)
        items = [
            {
                "content": d.content,
                "agent": AGENT,
                "kind": "conversation",
                "metadata": {"turn": d.id, "session": d.session, "date": d.date, ROLE_KEY: d.role},
                # The session's date is when the turn happened (its event time, ``Memory.occurred_at``).
                **({"at": when} if (when := event_time(d.date)) is not None else {}),
            }
            for d in docs
        ]
        stored = self.mem.remember_many(items)
        self.doc_of_memory = {m.id: str(m.metadata["turn"]) for m in stored}
        # Neighbours within a session, in conversation order.
        self.prev: dict[str, str] = {}
        self.next: dict[str, str] = {}
        for a, b in itertools.pairwise(docs):
            if a.session == b.session:
                self.prev[b.id], self.next[a.id] = a.id, b.id
        memory_of_doc = {d: m for m, d in self.doc_of_memory.items()}
        # The write pipeline does not link turns yet (see the report): the bench adds the links.
        for m in stored:
            doc = self.doc_of_memory[m.id]
            if doc in self.prev:
                self.mem.update(m.id, metadata={**m.metadata, FOLLOWS_KEY: memory_of_doc[self.prev[doc]]})
        self.lengths = {d.id: len(d.content) for d in docs}
        self.roles = {d.id: d.role for d in docs}
        self._before = _without_speaker_weight(self.mem.store, embedder)
        self._timed = {name: _time_searcher(self.mem.store, embedder, *how) for name, how in TIME_ROWS.items()}
        self._replicas: dict[str, FTS5Replica] = {}
        self._owners: dict[str, list[str]] = {}
        self.when = {d.id: event_time(d.date) for d in docs}

    def close(self) -> None:
        self._before.close()
        for searcher in self._timed.values():
            searcher.close()
        self.mem.close()

    def ours(self, query: str, limit: int) -> list[str]:
        hits = self.mem.search(query, agent=AGENT, limit=limit)
        return [str(h.memory.metadata["turn"]) for h in hits]

    def timed(self, name: str, query: str, limit: int, asked: datetime | None) -> list[str]:
        """A row of the time study (:data:`TIME_ROWS`): the same store, the question's time counted from
        ``asked`` (read-only). ``asked`` is the searcher's ``now``, not ``as_of``: as_of would also leave out
        what happened after it, and 10 of LongMemEval_S's 27 temporal haystacks hold sessions dated after
        their question (6 of them answer sessions), a quirk of the data that is not what is measured here."""
        hits = self._timed[name].search(
            query, Filter(agent=AGENT), limit=limit, now=asked or datetime.now(UTC), touch=False
        )
        return [str(h.memory.metadata["turn"]) for h in hits]

    def before(self, query: str, limit: int) -> list[str]:
        """The same store ranked with assistant turns at full weight (read-only: no access bookkeeping)."""
        hits = self._before.search(query, Filter(agent=AGENT), limit=limit, now=datetime.now(UTC), touch=False)
        return [str(h.memory.metadata["turn"]) for h in hits]

    def channels(self, query: str, qvec: np.ndarray, depth: int) -> tuple[Ranked, Ranked]:
        """The store's own keyword (FTS) and vector candidate lists, as doc ids."""
        flt = Filter(agent=AGENT)
        terms = query_terms(query)
        kw = self.mem.store.search.keyword_candidates(terms, flt, limit=depth) if terms else []
        vec = self.mem.store.search.vector_candidates(qvec, flt, limit=depth)
        return (
            [(self.doc_of_memory[c.id], c.score) for c in kw],
            [(self.doc_of_memory[c.id], c.score) for c in vec],
        )

    def passage_keyword(self, sentences: int, query: str, depth: int) -> Ranked:
        """Keyword candidates scored by a turn's best passage of ``sentences`` sentences (study only)."""
        key = f"passages of {sentences}"
        if key not in self._replicas:
            texts, self._owners[key] = [], []
            for d in self.docs:
                for passage in _passages(d.content, sentences):
                    texts.append(passage)
                    self._owners[key].append(d.id)
            self._replicas[key] = FTS5Replica(texts)
        best: dict[str, float] = {}
        for i, score in self._replicas[key].search(query_terms(query), 40 * depth):
            best.setdefault(self._owners[key][i], score)
            if len(best) == depth:
                break
        return list(best.items())

    def keyed_keyword(self, key: str, query: str, depth: int) -> Ranked:
        """Keyword candidates from an FTS5 replica that indexes each turn under another key (study only)."""
        if key not in self._replicas:
            by_id = {d.id: d for d in self.docs}
            texts = []
            for d in self.docs:
                prev = by_id[self.prev[d.id]].content if d.id in self.prev else None
                nxt = by_id[self.next[d.id]].content if d.id in self.next else None
                if key == "previous + turn":
                    texts.append(contextual_key(d.content, prev))
                elif key == "previous + turn + next":
                    texts.append(contextual_key(d.content, prev) + (f"\n{nxt}" if nxt else ""))
                else:  # "date + turn"
                    texts.append(f"{d.date}. {d.content}")
            self._replicas[key] = FTS5Replica(texts)
        return [(self.docs[i].id, score) for i, score in self._replicas[key].search(query_terms(query), depth)]


def fusion_variants(kw: Ranked, vec: Ranked) -> Iterator[tuple[str, list[str]]]:
    """Every fusion rule of the study, applied to one pair of candidate lists."""
    yield "keyword only", [d for d, _ in kw]
    yield "vector only", [d for d, _ in vec]
    for w in FUSION_WEIGHTS:
        yield f"rrf k=60 w={w}", fuse_rrf(kw, vec, keyword_weight=w)
    for norm in ("minmax", "zscore", "dbsf"):
        for w in FUSION_WEIGHTS:
            yield f"{norm} w={w}", fuse_convex(kw, vec, keyword_weight=w, norm=norm)


#: Neighbour weights and short-turn lengths of the context study (the engine's pair is marked "engine").
SPREAD_WEIGHTS = (0.1, 0.3, 0.5)
#: Fused candidates the engine spreads over (``engramdb.retrieval.hybrid._SPREAD``); the other rows use all.
SPREAD_REACH = 60
SHORT_LENGTHS = (100, 200, 400)
SESSION_WEIGHTS = (0.1, 0.3)
CONTEXT_KEYS = ("previous + turn", "previous + turn + next", "date + turn")


#: Assistant-turn weights of the speaker study, and whether a query about the assistant is exempt.
SPEAKER_VARIANTS = ((ASSISTANT_WEIGHT, True), (ASSISTANT_WEIGHT, False), (0.3, True), (0.7, True))
ENGINE_ROW = f"spread w={NEIGHBOUR_WEIGHT} short={SHORT_TURN_CHARS}, fused top {SPREAD_REACH} (engine)"
PROPOSED_ROW = f"assistant turns x{ASSISTANT_WEIGHT} + engine spread (proposed)"


def _weigh(scores: dict[str, float], roles: dict[str, str], query: str, weight: float) -> dict[str, float]:
    """:func:`weigh_speakers` on a ``{doc: relevance}`` map (the study's form)."""
    fused = [Fused(d, s, None, None) for d, s in scores.items()]
    return {f.id: f.relevance for f in weigh_speakers(fused, roles, query=query, weight=weight)}


def context_variants(
    corpus: Corpus, query: str, kw: Ranked, vec: Ranked, deep: tuple[Ranked, Ranked], asked: datetime | None = None
) -> Iterator[tuple[str, list[str]]]:
    """The context study: neighbour spreading, session aggregation, contextual keys, candidate depth.

    Every variant starts from the store's own candidate lists (50 per channel unless named),
    fused as the engine fuses them (min-max, equal weights).
    """
    base = fused_scores(kw, vec)
    args = (corpus.prev, corpus.next, corpus.lengths)
    yield "fused, no context (before)", sorted(base, key=lambda d: (-base[d], d))
    reach = dict(sorted(base.items(), key=lambda t: (-t[1], t[0]))[:SPREAD_REACH])
    engine = spread_variant(reach, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS)
    yield ENGINE_ROW, engine
    yield from _session5_variants(corpus, query, kw, vec, deep, asked)
    # Who said it (engramdb.retrieval.context.weigh_speakers): assistant turns weighed before spreading.
    for w, aware in SPEAKER_VARIANTS:
        weighed = _weigh(reach, corpus.roles, query if aware else "", w)
        name = f"assistant turns x{w}{'' if aware else ', every query'} + engine spread"
        yield (
            name + (" (proposed)" if (w, aware) == (ASSISTANT_WEIGHT, True) else ""),
            spread_variant(weighed, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS),
        )
    every = spread_variant(base, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS)
    yield f"spread w={NEIGHBOUR_WEIGHT} short={SHORT_TURN_CHARS}, all fused candidates", every
    for w in SPREAD_WEIGHTS:
        yield f"spread w={w}, every turn full weight", spread_variant(base, *args, weight=w, short=None)
        for short in SHORT_LENGTHS:
            if (w, short) != (NEIGHBOUR_WEIGHT, SHORT_TURN_CHARS):
                yield f"spread w={w} short={short}", spread_variant(base, *args, weight=w, short=short)
    for direction in ("from previous", "from next"):
        name = f"spread w={NEIGHBOUR_WEIGHT} short={SHORT_TURN_CHARS}, {direction} only"
        yield name, spread_variant(base, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS, direction=direction)
    for w in SESSION_WEIGHTS:
        yield f"session aggregation w={w}", session_variant(base, corpus.session_of, weight=w)
        both = spread_variant(base, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS)
        top = {d: 1.0 - i / len(both) for i, d in enumerate(both)}
        yield f"engine spread + session aggregation w={w} (on ranks)", session_variant(top, corpus.session_of, weight=w)
    for depth in (100, 200):
        deep_base = fused_scores(deep[0][:depth], deep[1][:depth])
        yield f"depth {depth}, no context", sorted(deep_base, key=lambda d: (-deep_base[d], d))
        spread = spread_variant(deep_base, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS)
        yield f"depth {depth} + engine spread", spread
    for key in CONTEXT_KEYS:
        keyed = fused_scores(corpus.keyed_keyword(key, query, FUSION_DEPTH), vec)
        yield f"keyword key: {key}", sorted(keyed, key=lambda d: (-keyed[d], d))
        spread = spread_variant(keyed, *args, weight=NEIGHBOUR_WEIGHT, short=SHORT_TURN_CHARS)
        yield f"keyword key: {key} + engine spread", spread


# -- session 5 study (2026-11-24): dates in the query, session diversity, a turn's best passage -------------

_COUNT = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}
_AGO = re.compile(r"\b(\d{1,3}|an?|one|two|three|four|five|six|seven|ten) (day|week|month|year)s? ago\b", re.I)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_LAST = re.compile(r"\blast (week|month|year|" + "|".join(_WEEKDAYS) + r")\b", re.I)
#: Days per unit, and how far from the named day a turn may lie and still count as "then" (the unit's
#: own granularity: "two weeks ago" is rarely exactly 14 days).
_UNIT_DAYS = {"day": (1, 1), "week": (7, 3), "month": (30, 15), "year": (365, 182)}
#: A candidate outside the named window counts at half its relevance (as an assistant turn does).
OUT_OF_WINDOW = 0.5
DIVERSITY = (0.5, 0.7, 0.85)
PASSAGE_SENTENCES = (2, 3)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
TIME_ROW = f"time window: outside x{OUT_OF_WINDOW} + engine spread"
TIME_DEEP_ROW = f"{TIME_ROW}, dated questions fused at depth 200 (chosen after seeing B)"
SESSION5_ROWS = (
    TIME_ROW,
    TIME_DEEP_ROW,
    *(f"session diversity d={d} on the engine's order" for d in DIVERSITY),
    *(f"keyword channel: best passage of {n} sentences + engine" for n in PASSAGE_SENTENCES),
)


def query_window(query: str, asked: datetime) -> tuple[date, date] | None:
    """The days a relative time expression names ("10 days ago", "last Saturday"), seen from ``asked``.

    A question that asks to compute an interval ("how many days ago did I ...") names no count: no window.
    """
    ago, last = _AGO.search(query), _LAST.search(query)
    if ago is not None:
        count = int(ago.group(1)) if ago.group(1).isdigit() else _COUNT[ago.group(1).lower()]
        per, slack = _UNIT_DAYS[ago.group(2).lower()]
        back = count * per
    elif last is not None:
        what = last.group(1).lower()
        if what in _UNIT_DAYS:
            back, slack = _UNIT_DAYS[what]
        else:  # the weekday before today
            back, slack = (asked.weekday() - _WEEKDAYS.index(what)) % 7 or 7, 1
    else:
        return None
    centre = (asked - timedelta(days=back)).date()
    return centre - timedelta(days=slack), centre + timedelta(days=slack)


def _diversify(ranking: Sequence[str], scores: dict[str, float], session_of: dict[str, str], d: float) -> list[str]:
    """Greedy re-rank: each turn's score times ``d`` per turn of its session already placed above it."""
    left, out = list(ranking), []
    placed: defaultdict[str, int] = defaultdict(int)
    while left:
        best = max(left, key=lambda x: (scores.get(x, 0.0) * d ** placed[session_of[x]], -ranking.index(x)))
        out.append(best)
        placed[session_of[best]] += 1
        left.remove(best)
    return out


def _passages(text: str, sentences: int) -> list[str]:
    """Windows of ``sentences`` consecutive sentences (stride 1); a shorter turn is one passage."""
    parts = [p for p in _SENTENCE.split(text) if p.strip()]
    if len(parts) <= sentences:
        return [text]
    return [" ".join(parts[i : i + sentences]) for i in range(len(parts) - sentences + 1)]


def _session5_variants(
    corpus: Corpus, query: str, kw: Ranked, vec: Ranked, deep: tuple[Ranked, Ranked], asked: datetime | None
) -> Iterator[tuple[str, list[str]]]:
    """The three options of the session-5 study, each beside the engine row (see :data:`SESSION5_ROWS`)."""

    def engine(k: Ranked, v: Ranked, window: tuple[date, date] | None = None) -> list[Fused]:
        fused = fused_scores(k, v)
        top = dict(sorted(fused.items(), key=lambda t: (-t[1], t[0]))[:SPREAD_REACH])
        reach = _weigh(top, corpus.roles, query, ASSISTANT_WEIGHT)
        inside = {d for d in reach if window and (w := corpus.when.get(d)) and window[0] <= w.date() <= window[1]}
        if inside:  # no candidate on the named days: the date says nothing
            reach = {d: s if d in inside else s * OUT_OF_WINDOW for d, s in reach.items()}
        cands = [Fused(d, s, None, None) for d, s in reach.items()]
        return spread_to_neighbours(cands, corpus.prev, corpus.lengths)

    window = query_window(query, asked) if asked is not None else None
    yield TIME_ROW, [f.id for f in engine(kw, vec, window)]
    deeper = engine(deep[0][:200], deep[1][:200], window) if window else engine(kw, vec)
    yield TIME_DEEP_ROW, [f.id for f in deeper]
    plain = engine(kw, vec)
    scores = {f.id: f.relevance for f in plain}
    for d in DIVERSITY:
        name = f"session diversity d={d} on the engine's order"
        yield name, _diversify([f.id for f in plain][:50], scores, corpus.session_of, d)
    for n in PASSAGE_SENTENCES:
        passages = corpus.passage_keyword(n, query, len(kw))
        yield f"keyword channel: best passage of {n} sentences + engine", [f.id for f in engine(passages, vec)]


def _time_rows(corpus: Corpus, query: Query, scores: Scores, *, sessions: bool) -> None:
    """The time study's rows for one question. A question naming no time ranks the same in every row (the
    rows differ only in what they do with a named time), so only those naming one are searched again."""
    named = query.asked is not None and find_time(query.text, reference=query.asked) is not None
    depth = SESSION_DEPTH if sessions else max(KS)
    base = {k: corpus.timed(TIME_NONE, query.text, k, query.asked) for k in KS}
    deep = corpus.timed(TIME_NONE, query.text, depth, query.asked) if sessions else []
    for name in TIME_ROWS:
        again = named and name != TIME_NONE
        for k in KS:
            ranking = corpus.timed(name, query.text, k, query.asked) if again else base[k]
            scores.add(name, f"recall@{k}", query.group, recall_at_k(ranking, query.gold, k))
            # The same measure over the questions that name a time only.
            if named:
                scores.add(name, f"dated recall@{k}", query.group, recall_at_k(ranking, query.gold, k))
        if sessions:
            ranking = corpus.timed(name, query.text, depth, query.asked) if again else deep
            for k in KS:
                value = session_recall_at_k(ranking, corpus.session_of, query.gold_sessions, k)
                scores.add(name, f"session_recall@{k}", query.group, value)
                if named:
                    scores.add(name, f"dated session_recall@{k}", query.group, value)


def evaluate_corpus(
    corpus: Corpus,
    queries: Sequence[Query],
    scores: Scores,
    fusion: Scores | None,
    *,
    sessions: bool,
    consistency: list[float],
) -> None:
    """Run every query of one corpus through every system and record the measures."""
    qvecs = corpus.embedder.embed([q.text for q in queries])
    depth = max(*KS, SESSION_DEPTH if sessions else 0)
    for query, qvec in zip(queries, qvecs, strict=True):
        rankings: dict[str, list[str]] = {
            "bm25": [d for d, _ in corpus.bm25.search(query.text, depth)],
            "vector": [d for d, _ in corpus.vectors.search(qvec, depth)],
        }
        # The time rows first: they read the store before this question's own search counts its accesses.
        _time_rows(corpus, query, scores, sessions=sessions)
        # Ours is asked exactly as a user would: limit=k for recall@k.
        ours_by_k = {k: corpus.ours(query.text, k) for k in KS}
        before_by_k = {k: corpus.before(query.text, k) for k in KS}
        top10 = ours_by_k[10]
        consistency.append(float(ours_by_k[5] == top10[:5]))
        for system, ranking in rankings.items():
            for k in KS:
                scores.add(system, f"recall@{k}", query.group, recall_at_k(ranking, query.gold, k))
        for k in KS:
            scores.add("engramdb", f"recall@{k}", query.group, recall_at_k(ours_by_k[k], query.gold, k))
            scores.add(BEFORE, f"recall@{k}", query.group, recall_at_k(before_by_k[k], query.gold, k))
        if sessions:
            rankings["engramdb"] = corpus.ours(query.text, SESSION_DEPTH)
            rankings[BEFORE] = corpus.before(query.text, SESSION_DEPTH)
            for system, ranking in rankings.items():
                for k in KS:
                    value = session_recall_at_k(ranking, corpus.session_of, query.gold_sessions, k)
                    scores.add(system, f"session_recall@{k}", query.group, value)
        if fusion is not None:
            kw, vec = corpus.channels(query.text, qvec, FUSION_DEPTH)
            bm25 = corpus.bm25.search(query.text, FUSION_DEPTH)
            vec_np = corpus.vectors.search(qvec, FUSION_DEPTH)
            for source, pair in (("fts", (kw, vec)), ("bm25", (bm25, vec_np))):
                for name, ranking in fusion_variants(*pair):
                    if source == "bm25" and name == "vector only":
                        continue  # identical to the fts row's vector channel
                    for k in KS:
                        fusion.add(f"{source}: {name}", f"recall@{k}", query.group, recall_at_k(ranking, query.gold, k))
            # Candidate depth: the store returns best first, so a deeper list cut short is a shallower fetch.
            deep_kw, deep_vec = corpus.channels(query.text, qvec, max(DEPTH_SWEEP))
            for name, ranking in context_variants(corpus, query.text, kw, vec, (deep_kw, deep_vec), query.asked):
                for k in KS:
                    fusion.add(f"context: {name}", f"recall@{k}", query.group, recall_at_k(ranking, query.gold, k))
                if sessions:
                    for k in KS:
                        value = session_recall_at_k(ranking, corpus.session_of, query.gold_sessions, k)
                        fusion.add(f"context: {name}", f"session_recall@{k}", query.group, value)
            for cut in DEPTH_SWEEP:
                pair = (deep_kw[:cut], deep_vec[:cut])
                for name, ranking in (
                    ("minmax w=0.5", fuse_convex(*pair, keyword_weight=0.5, norm="minmax")),
                    ("rrf k=60 w=0.5", fuse_rrf(*pair, keyword_weight=0.5)),
                ):
                    for k in KS:
                        value = recall_at_k(ranking, query.gold, k)
                        fusion.add(f"fts depth {cut}: {name}", f"recall@{k}", query.group, value)


# -- data sets -------------------------------------------------------------------------------------


def run_locomo(args: argparse.Namespace, embedder: CachedEmbedder) -> dict[str, Any]:
    conversations = load_locomo()[: args.limit_conversations]
    scores, fusion = Scores(), (None if args.skip_fusion else Scores())
    consistency: list[float] = []
    started = time.perf_counter()
    n_questions = 0
    asked: list[Query] = []
    for conv in conversations:
        questions = conv.questions[: args.limit_questions]
        # LoCoMo has no question dates: its questions were written after the conversation's last session.
        last = max((t for d in conv.docs if (t := event_time(d.date)) is not None), default=None)
        queries = [
            Query(text=q.text, group=LOCOMO_CATEGORIES[q.category], gold=q.evidence, asked=last) for q in questions
        ]
        corpus = Corpus(conv.docs, embedder)
        try:
            evaluate_corpus(corpus, queries, scores, fusion, sessions=False, consistency=consistency)
        finally:
            corpus.close()
        n_questions += len(queries)
        asked.extend(queries)
        console.log(f"LoCoMo {conv.sample_id}: {len(conv.docs)} turns, {len(queries)} questions")
    return {
        "conversations": [c.sample_id for c in conversations],
        "questions": n_questions,
        "dropped_no_evidence": sum(c.dropped for c in conversations),
        "systems": scores.summary(),
        "fusion_study": fusion.summary() if fusion is not None else None,
        "differences": compare(scores, fusion, ["recall@5", "recall@10"]),
        "engramdb_limit5_is_prefix_of_limit10": _mean(consistency),
        "time_named": time_named(asked),
        "seconds": time.perf_counter() - started,
    }


#: LongMemEval questions (file positions) whose haystacks were cached before the 2026-11-24 fourth
#: session: the options of the speaker study were chosen on them; the rest confirm (or not).
CHOSEN_ON = 41
#: (label, measure) pairs compared per half: the shipped engine, and the proposed row against the engine.
HALF_PAIRS = (
    ("engramdb - engramdb before", ("scores", "engramdb"), ("scores", BEFORE)),
    ("proposed - engine (study rows)", ("fusion", f"context: {PROPOSED_ROW}"), ("fusion", f"context: {ENGINE_ROW}")),
    *(
        (f"{row} - engine as committed", ("fusion", f"context: {row}"), ("fusion", f"context: {PROPOSED_ROW}"))
        for row in SESSION5_ROWS
    ),
)


def _by_half(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per half (chosen-on / confirmation): means and paired differences of :data:`HALF_PAIRS`."""
    out: dict[str, Any] = {}
    halves = (("A: chosen on", lambda p: p < CHOSEN_ON), ("B: confirmation", lambda p: p >= CHOSEN_ON))
    for half, member in (*halves, ("all", lambda p: True)):
        rows = [r for r in records if member(r["position"])]
        if not rows:
            continue
        part: dict[str, Any] = {"n": len(rows)}
        for label, a, b in HALF_PAIRS:
            for measure in ("recall@5", "recall@10", "session_recall@5"):
                ours, ref = [r[a[0]][a[1]][measure] for r in rows], [r[b[0]][b[1]][measure] for r in rows]
                part[f"{label}: {measure}"] = {"a": _mean(ours), "b": _mean(ref), **paired_bootstrap(ours, ref)}
        out[half] = part
    return out


def run_longmemeval(args: argparse.Namespace, embedder: CachedEmbedder) -> dict[str, Any]:
    lme_limit = getattr(args, "lme_questions", None)  # bench/embedders.py passes its own Namespace
    positions = None
    if getattr(args, "lme_cached_only", False):
        if embedder.path is None:
            raise SystemExit("--lme-cached-only needs an --embed-cache file")
        positions = cached_positions(embedder.path, embedder.model_id)
    limit = lme_limit if lme_limit is not None else args.limit_questions
    questions = load_longmemeval(limit=limit, positions=positions)
    if getattr(args, "lme_type", None):
        questions = [q for q in questions if q.question_type == args.lme_type]
    records: list[dict[str, Any]] = []
    asked: list[Query] = []
    scores, fusion = Scores(), (None if args.skip_fusion else Scores())
    consistency: list[float] = []
    started = time.perf_counter()
    for i, item in enumerate(questions, start=1):
        query = Query(
            text=item.text,
            group=item.question_type,
            gold=item.answer_turns,
            gold_sessions=item.answer_sessions,
            asked=event_time(item.question_date),
        )
        corpus = Corpus(item.docs, embedder)
        try:
            evaluate_corpus(corpus, [query], scores, fusion, sessions=True, consistency=consistency)
        finally:
            corpus.close()
        # This question's values are the last of its group in every list: keep them by position for the halves.
        record: dict[str, Any] = {"position": item.position, "question_id": item.question_id}
        record["type"] = item.question_type
        for source_name, source in (("scores", scores), ("fusion", fusion)):
            if source is not None:
                record[source_name] = {
                    # "dated ..." measures have a value only for questions naming a time: not per question.
                    system: {m: groups[query.group][-1] for m, groups in measures.items() if not m.startswith("dated ")}
                    for system, measures in source.values.items()
                }
        records.append(record)
        asked.append(query)
        embedder.cache_clear()  # haystacks barely overlap: bound memory (the cache file keeps them)
        if i % 10 == 0 or i == len(questions):
            console.log(f"LongMemEval: {i}/{len(questions)} questions ({time.perf_counter() - started:.0f} s)")
    return {
        "questions": len(questions),
        "positions": [q.position for q in questions],
        "halves": _by_half(records) if fusion is not None else None,
        "per_question": [
            {"position": r["position"], "question_id": r["question_id"], "type": r["type"], **r["scores"]["engramdb"]}
            for r in records
        ],
        "systems": scores.summary(),
        "fusion_study": fusion.summary() if fusion is not None else None,
        "differences": compare(scores, fusion, ["recall@5", "recall@10", "session_recall@5", "session_recall@10"]),
        "engramdb_limit5_is_prefix_of_limit10": _mean(consistency),
        "time_named": time_named(asked),
        "seconds": time.perf_counter() - started,
    }


def time_named(queries: Sequence[Query]) -> dict[str, Any]:
    """How many questions name a time the resolver reads, which ones, and what reading one costs (µs)."""
    named: dict[str, Any] = {}
    costs = []
    for q in queries:
        if q.asked is None:
            continue
        started = time.perf_counter()
        window = find_time(q.text, reference=q.asked)
        costs.append((time.perf_counter() - started) * 1e6)
        if window is not None:
            named[q.text] = {"group": q.group, **window.to_dict()}
    costs.sort()
    return {
        "questions": len(costs),
        "named": len(named),
        "by_group": {g: sum(1 for w in named.values() if w["group"] == g) for g in sorted({q.group for q in queries})},
        "p50_us": costs[len(costs) // 2] if costs else None,
        "max_us": costs[-1] if costs else None,
        "windows": named,
    }


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform()}


def _write(path: Path, data: dict[str, Any]) -> None:
    console.print(f"wrote {write_json(path, data)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="locomo,longmemeval", help="comma-separated: locomo, longmemeval")
    parser.add_argument("--limit-conversations", type=int, default=None, help="LoCoMo: first N conversations")
    parser.add_argument(
        "--limit-questions", type=int, default=None, help="LoCoMo: first N per conversation; LongMemEval: first N"
    )
    parser.add_argument("--lme-questions", type=int, default=None, help="LongMemEval: first N (overrides the above)")
    parser.add_argument("--lme-type", default=None, help="LongMemEval: only questions of this type")
    parser.add_argument(
        "--lme-cached-only", action="store_true", help="LongMemEval: only questions whose texts are all cached"
    )
    parser.add_argument("--skip-quality", action="store_true", help="no LoCoMo/LongMemEval recall run")
    parser.add_argument("--skip-fusion", action="store_true", help="no fusion study")
    parser.add_argument("--skip-speed", action="store_true", help="no ingest/latency run")
    parser.add_argument("--ingest-count", type=int, default=2000, help="texts for the ingest measurement")
    parser.add_argument("--latency-queries", type=int, default=210, help="queries for latency measurements")
    parser.add_argument("--scale", action="store_true", help="also run the 10k/100k scale run")
    parser.add_argument("--scale-sizes", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument(
        "--embed-cache",
        default=str(Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"),
        help="SQLite file keeping quality-run vectors across runs ('none': no file)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "retrieval.json", help="quality JSON")
    parser.add_argument("--speed-out", type=Path, default=RESULTS_DIR / "retrieval_speed.json", help="speed JSON")
    parser.add_argument("--scale-out", type=Path, default=RESULTS_DIR / "retrieval_scale.json", help="scale-run JSON")
    args = parser.parse_args(argv)
    args.scale_sizes = sorted(int(s) for s in args.scale_sizes.split(","))

    settings = load_settings()

    def make_raw() -> CachedEmbedder:
        """A fresh embedder as Engram() would make it (the model behind an empty in-memory cache)."""
        emb = make_embedder(settings)
        assert isinstance(emb, CachedEmbedder)
        return emb

    header: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    base = make_raw()
    header["embedder"] = base.model_id
    # Quality runs embed every text once (the engine and the vector-only baseline share vectors);
    # an optional cache file keeps them across runs. Speed and scale runs use fresh embedders.
    cache_path = None if args.embed_cache == "none" else Path(args.embed_cache).expanduser()
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(base, size=200_000, path=cache_path)
    header["embed_cache"] = str(cache_path) if cache_path else None
    datasets = {d.strip() for d in args.datasets.split(",") if d.strip()}
    # Each part writes its own file, so speed can be re-measured on a quiet machine without the rest.
    if not args.skip_quality:
        results: dict[str, Any] = dict(header)
        if "locomo" in datasets:
            results["locomo"] = run_locomo(args, embedder)
            embedder.cache_clear()
        if "longmemeval" in datasets:
            results["longmemeval"] = run_longmemeval(args, embedder)
        report(results)
        _write(args.out, results)
    if not args.skip_speed:
        speed = {**header, "speed": run_speed(args, make_raw)}
        report(speed)
        _write(args.speed_out, speed)
    if args.scale:
        scale = {**header, "scale": run_scale(args, make_raw)}
        report(scale)
        _write(args.scale_out, scale)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
