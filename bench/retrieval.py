"""Retrieval benchmark: engramdb search against BM25 and vector-only, on the same data in the same run.

Quality (default): LoCoMo and LongMemEval dev data from ../shared/bench-data (see bench/README.md),
recall@5/10 of the evidence turns, overall and per category, for engramdb as it ranks now and as it
ranked before speaker weighting ("engramdb before", same store: assistant turns at full weight); plus a
fusion study over the store's own keyword and vector candidate lists, and a context study (neighbour
spreading, speaker weighting, session aggregation, contextual keyword keys, candidate depth: the options
tried, kept and rejected, side by side). LongMemEval splits its questions into the half the speaker
options were chosen on (positions < 41) and the confirmation half (``halves`` in the JSON).
Speed: batched ingest rate and search latency. Scale (``--scale``):
search latency at 10k and 100k memories against a plain numpy scan of the same vectors.

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
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from _data import LOCOMO_CATEGORIES, Doc, cached_positions, load_locomo, load_longmemeval
from _report import write_json
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
    percentile,
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
    weigh_speakers,
)
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter

AGENT = "bench"
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
    return out


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.fmean(finite) if finite else math.nan


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}"


# -- one corpus, every system ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    text: str
    group: str
    gold: tuple[str, ...]
    gold_sessions: tuple[str, ...] = ()


def _without_speaker_weight(store: Any, embedder: CachedEmbedder) -> HybridSearcher:
    """A searcher ranking as the engine did before speaker weighting (``assistant_weight=1`` where it has one)."""
    if "assistant_weight" in inspect.signature(HybridSearcher).parameters:
        return HybridSearcher(store, embedder, assistant_weight=1.0)  # type: ignore[call-arg]
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
        self._replicas: dict[str, FTS5Replica] = {}

    def close(self) -> None:
        self._before.close()
        self.mem.close()

    def ours(self, query: str, limit: int) -> list[str]:
        hits = self.mem.search(query, agent=AGENT, limit=limit)
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
    corpus: Corpus, query: str, kw: Ranked, vec: Ranked, deep: tuple[Ranked, Ranked]
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
            for name, ranking in context_variants(corpus, query.text, kw, vec, (deep_kw, deep_vec)):
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
    for conv in conversations:
        questions = conv.questions[: args.limit_questions]
        queries = [Query(text=q.text, group=LOCOMO_CATEGORIES[q.category], gold=q.evidence) for q in questions]
        corpus = Corpus(conv.docs, embedder)
        try:
            evaluate_corpus(corpus, queries, scores, fusion, sessions=False, consistency=consistency)
        finally:
            corpus.close()
        n_questions += len(queries)
        console.log(f"LoCoMo {conv.sample_id}: {len(conv.docs)} turns, {len(queries)} questions")
    return {
        "conversations": [c.sample_id for c in conversations],
        "questions": n_questions,
        "dropped_no_evidence": sum(c.dropped for c in conversations),
        "systems": scores.summary(),
        "fusion_study": fusion.summary() if fusion is not None else None,
        "differences": compare(scores, fusion, ["recall@5", "recall@10"]),
        "engramdb_limit5_is_prefix_of_limit10": _mean(consistency),
        "seconds": time.perf_counter() - started,
    }


#: LongMemEval questions (file positions) whose haystacks were cached before the 2026-11-24 fourth
#: session: the options of the speaker study were chosen on them; the rest confirm (or not).
CHOSEN_ON = 41
#: (label, measure) pairs compared per half: the shipped engine, and the proposed row against the engine.
HALF_PAIRS = (
    ("engramdb - engramdb before", ("scores", "engramdb"), ("scores", BEFORE)),
    ("proposed - engine (study rows)", ("fusion", f"context: {PROPOSED_ROW}"), ("fusion", f"context: {ENGINE_ROW}")),
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
    records: list[dict[str, Any]] = []
    scores, fusion = Scores(), (None if args.skip_fusion else Scores())
    consistency: list[float] = []
    started = time.perf_counter()
    for i, item in enumerate(questions, start=1):
        query = Query(
            text=item.text, group=item.question_type, gold=item.answer_turns, gold_sessions=item.answer_sessions
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
                    system: {m: groups[query.group][-1] for m, groups in measures.items()}
                    for system, measures in source.values.items()
                }
        records.append(record)
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
        "seconds": time.perf_counter() - started,
    }


# -- speed -----------------------------------------------------------------------------------------


def _ms(fn: Callable[[], object]) -> float:
    """Wall time of one call, in milliseconds."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def _latency(ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95), "mean_ms": statistics.fmean(ms)}


def _load() -> list[float]:
    """1/5/15-minute load averages: other engineers share the 2 cores, so each timing records them."""
    return [round(x, 2) for x in os.getloadavg()]


def _search_latency(mem: Engram, embedder: CachedEmbedder, questions: Sequence[str]) -> dict[str, Any]:
    """Interleaved per query: a search that embeds the query, then the same search with the vector cached.

    Interleaving exposes both variants to the same background load; their difference is
    the query embedding.
    """
    for q in questions[:10]:
        mem.search(q, agent=AGENT, limit=10)  # warm-up: model, page cache, vector matrix
    with_embed, without = [], []
    for q in questions:
        embedder.cache_clear()
        with_embed.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
        without.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
    return {
        "search_with_query_embedding": _latency(with_embed),
        "search_without_query_embedding": _latency(without),
    }


#: Ingest variants: (label, texts, kind, memories per remember_many call; 0 = all in one call).
#: "conversation" memories are never merged; "knowledge" (the default kind) runs the near-duplicate check.
#: "turns" are LoCoMo turns as indexed above; "sentences" their first sentences (one-line memories), because
#: the model's cost grows with text length and both lengths occur in agent memory.
INGEST_VARIANTS = (
    ("turns, one call, kind=conversation", "turns", "conversation", 0),
    ("turns, one call, kind=knowledge (dedupe on)", "turns", "knowledge", 0),
    ("turns, calls of 100, kind=knowledge (dedupe on)", "turns", "knowledge", 100),
    ("first sentences, one call, kind=knowledge (dedupe on)", "sentences", "knowledge", 0),
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def first_sentence(turn: str) -> str:
    """``"speaker: first sentence"`` of a LoCoMo turn."""
    return _SENTENCE_END.split(turn, maxsplit=1)[0]


def run_speed(args: argparse.Namespace, make_raw: Callable[[], CachedEmbedder]) -> dict[str, Any]:
    """Batched ingest of short texts into fresh on-disk stores; search latency on one of them."""
    conversations = load_locomo()
    turns = [d.content for c in conversations for d in c.docs][: args.ingest_count]
    texts = {"turns": turns, "sentences": [first_sentence(t) for t in turns]}
    questions = [q.text for c in conversations for q in c.questions][: args.latency_queries]
    out: dict[str, Any] = {
        "ingest_texts": len(turns),
        "mean_chars": {name: statistics.fmean(len(t) for t in group) for name, group in texts.items()},
        "load_before": _load(),
        "ingest": {},
        "embedding_only": {},
    }
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        # Every measurement gets a fresh embedder (empty cache), so every text is embedded for real.
        for name, group in texts.items():
            raw = make_raw()
            raw.embed(["warm up the model"])
            t0 = time.perf_counter()
            raw.embed(group)  # one call, as remember_many makes it
            embed_s = time.perf_counter() - t0
            out["embedding_only"][name] = {"seconds": embed_s, "texts_per_s": len(group) / embed_s}
        for n, (label, text_set, kind, per_call) in enumerate(INGEST_VARIANTS):
            items = [{"content": t, "agent": AGENT, "kind": kind} for t in texts[text_set]]
            chunk = per_call or len(items)
            embedder = make_raw()
            embedder.embed(["warm up the model"])
            with Engram(Path(tmp) / f"store{n}", embedder=embedder) as mem:
                t0 = time.perf_counter()
                for start in range(0, len(items), chunk):
                    mem.remember_many(items[start : start + chunk])
                seconds = time.perf_counter() - t0
                out["ingest"][label] = {
                    "seconds": seconds,
                    "memories_per_s": len(items) / seconds,
                    "stored": mem.count(agent=AGENT),
                }
                if n == 0:
                    out["search_store_size"] = mem.count(agent=AGENT)
                    out.update(_search_latency(mem, embedder, questions))
    out["neighbour_spreading_cost"] = _spreading_cost(make_raw, questions, args.ingest_count)
    out["load_after"] = _load()
    return out


def _spreading_cost(make_raw: Callable[[], CachedEmbedder], questions: Sequence[str], count: int) -> dict[str, Any]:
    """Search latency with and without neighbour spreading on linked LoCoMo turns (query vectors precomputed).

    Interleaved per query, read-only (no access bookkeeping), so both see the same load.
    """
    docs = [d for c in load_locomo() for d in c.docs][:count]
    embedder = make_raw()
    qvecs = embedder.embed(list(questions))
    flt = Filter(agent=AGENT)
    with Engram(":memory:", embedder=embedder) as mem:
        stored = mem.remember_many([{"content": d.content, "agent": AGENT, "kind": "conversation"} for d in docs])
        for (a, ma), (b, mb) in itertools.pairwise(zip(docs, stored, strict=True)):
            if a.session == b.session:
                mem.update(mb.id, metadata={FOLLOWS_KEY: ma.id})
        plain = HybridSearcher(mem.store, embedder, neighbour_weight=0.0)
        spread = HybridSearcher(mem.store, embedder)
        try:
            now = datetime.now(UTC)
            for q, v in list(zip(questions, qvecs, strict=True))[:10]:  # warm-up
                plain.search(q, flt, limit=10, now=now, touch=False, vector=v)
            load_before = _load()
            off, on = [], []
            for q, v in zip(questions, qvecs, strict=True):
                off.append(_ms(lambda q=q, v=v: plain.search(q, flt, limit=10, now=now, touch=False, vector=v)))
                on.append(_ms(lambda q=q, v=v: spread.search(q, flt, limit=10, now=now, touch=False, vector=v)))
        finally:
            plain.close()
            spread.close()
    return {
        "memories": len(docs),
        "search_spreading_off": _latency(off),
        "search_spreading_on": _latency(on),
        "load_before": load_before,
        "load_after": _load(),
    }


# -- scale -----------------------------------------------------------------------------------------


def _scale_texts(n: int, rng: np.random.Generator) -> list[str]:
    """Realistic short texts for the keyword index: LoCoMo turns and LongMemEval user turns, reused, shuffled."""
    pool = [d.content for c in load_locomo() for d in c.docs]
    for item in load_longmemeval(limit=20):
        pool.extend(d.content[:400] for d in item.docs if d.content.startswith("user: "))
    picks = rng.integers(0, len(pool), size=n)
    return [pool[i] for i in picks]


def _numpy_top(matrix: np.ndarray, vector: np.ndarray, k: int) -> np.ndarray:
    """The reference: a plain exact scan of the same matrix, top k best first."""
    sims = matrix @ vector
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top])]


def run_scale(args: argparse.Namespace, make_raw: Callable[[], CachedEmbedder]) -> dict[str, Any]:
    """Search latency at scale: store vector scan and full search against a plain numpy scan, same vectors.

    Memories go in through ``store.memories.add`` with synthetic unit vectors (embedding 100k texts would
    take minutes and does not change the cost of a scan); their texts are real turns, so the
    keyword channel of the full search has realistic postings.
    """
    from engramdb._util import new_id, utcnow
    from engramdb.models import Memory

    rng = np.random.default_rng(0)
    embedder = make_raw()
    questions = [q.text for c in load_locomo() for q in c.questions][: args.latency_queries]
    qvecs = embedder.embed(questions)
    results: dict[str, Any] = {
        "vectors": "synthetic unit vectors (Gaussian, normalised) added with store.memories.add; texts are real turns",
        "queries": len(questions),
        "candidates": 50,
    }
    flt = Filter(agent=AGENT)
    with (
        tempfile.TemporaryDirectory(prefix="engram-scale-") as tmp,
        Engram(Path(tmp) / "store", embedder=embedder) as mem,
    ):
        matrix = np.zeros((0, embedder.dim), dtype=np.float32)
        for size in args.scale_sizes:
            grow = size - matrix.shape[0]
            texts = _scale_texts(grow, rng)
            vecs = rng.standard_normal((grow, embedder.dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            t0 = time.perf_counter()
            for start in range(0, grow, 5000):
                now = utcnow()
                batch = [
                    Memory(id=new_id(), agent=AGENT, kind="conversation", content=t, created_at=now, updated_at=now)
                    for t in texts[start : start + 5000]
                ]
                mem.store.memories.add(batch, vecs[start : start + 5000], model_id=embedder.model_id, actor=AGENT)
            insert_s = time.perf_counter() - t0
            matrix = np.concatenate([matrix, vecs])
            console.log(f"scale: {size} memories ({grow} inserted in {insert_s:.1f} s)")
            load_before = _load()
            for v in qvecs[:10]:  # warm-up: the first search loads the store's vector matrix
                mem.store.search.vector_candidates(v, flt, limit=50)
                _numpy_top(matrix, v, 50)
            npy, vc, kw = [], [], []
            # Interleaved, so all see the same background load.
            for q, v in zip(questions, qvecs, strict=True):
                npy.append(_ms(lambda v=v, m=matrix: _numpy_top(m, v, 50)))
                vc.append(_ms(lambda v=v: mem.store.search.vector_candidates(v, flt, limit=50)))
                kw.append(_ms(lambda q=q: mem.store.search.keyword_candidates(query_terms(q), flt, limit=50)))
            results[str(size)] = {
                "insert_seconds": insert_s,
                "numpy_scan_top50": _latency(npy),
                "store_vector_candidates_top50": _latency(vc),
                "vector_candidates_over_numpy_p50": percentile(vc, 50) / percentile(npy, 50),
                "store_keyword_candidates_top50": _latency(kw),
                **_search_latency(mem, embedder, questions),
                "load_before": load_before,
                "load_after": _load(),
            }
    return results


# -- output ----------------------------------------------------------------------------------------


def _quality_table(title: str, systems: dict[str, Any], measures: Sequence[str], groups: Sequence[str]) -> Table:
    table = Table(title=title)
    table.add_column("system")
    for m in measures:
        table.add_column(m, justify="right")
    for g in groups:
        table.add_column(f"{g} @10", justify="right")
    for name, data in systems.items():
        row = [name]
        row += [_pct(data[m]["overall"]) for m in measures]
        at10 = data[measures[-1] if measures[-1].endswith("@10") else "recall@10"]["groups"]
        row += [_pct(at10.get(g, {"mean": math.nan})["mean"]) for g in groups]
        table.add_row(*row)
    return table


_FUSION_NOTE = f" ({FUSION_DEPTH} candidates per channel unless a depth is named)"


def _fusion_table(title: str, study: dict[str, Any]) -> Table:
    table = Table(title=title)
    table.add_column("channels: rule")
    table.add_column("recall@5", justify="right")
    table.add_column("recall@10", justify="right")
    for name, data in study.items():
        table.add_row(name, _pct(data["recall@5"]["overall"]), _pct(data["recall@10"]["overall"]))
    return table


def _diff_table(title: str, diffs: dict[str, Any]) -> Table:
    table = Table(title=title)
    table.add_column("measure: difference")
    table.add_column("mean (points)", justify="right")
    table.add_column("95% CI", justify="right")
    for name, d in diffs.items():
        table.add_row(
            name, f"{100 * d['mean_diff']:+.1f}", f"[{100 * d['ci95_low']:+.1f}, {100 * d['ci95_high']:+.1f}]"
        )
    return table


def report(results: dict[str, Any]) -> None:
    if "locomo" in results:
        lo = results["locomo"]
        groups = list(LOCOMO_CATEGORIES.values())
        console.print(
            _quality_table(
                f"LoCoMo dev: {lo['questions']} questions, recall of evidence turns (%)",
                lo["systems"],
                ["recall@5", "recall@10"],
                groups,
            )
        )
        if lo["fusion_study"]:
            console.print(_fusion_table(f"LoCoMo fusion study{_FUSION_NOTE}", lo["fusion_study"]))
        console.print(_diff_table("LoCoMo: engramdb minus reference, paired by question", lo["differences"]))
    if "longmemeval" in results:
        lme = results["longmemeval"]
        groups = sorted({g for s in lme["systems"].values() for g in s["recall@10"]["groups"]})
        console.print(
            _quality_table(
                f"LongMemEval_S dev: {lme['questions']} questions (turn recall; session recall; per type: turn @10)",
                lme["systems"],
                ["session_recall@5", "session_recall@10", "recall@5", "recall@10"],
                [],
            )
        )
        console.print(
            _quality_table("LongMemEval per question type, turn recall@10 (%)", lme["systems"], ["recall@10"], groups)
        )
        if lme["fusion_study"]:
            console.print(_fusion_table(f"LongMemEval fusion study, turn recall{_FUSION_NOTE}", lme["fusion_study"]))
        console.print(_diff_table("LongMemEval: engramdb minus reference, paired by question", lme["differences"]))
    if "speed" in results:
        sp = results["speed"]
        chars = sp["mean_chars"]
        table = Table(
            title=f"Speed ({sp['ingest_texts']} LoCoMo turns, mean {chars['turns']:.0f} chars; "
            f"first sentences, mean {chars['sentences']:.0f} chars)"
        )
        table.add_column("measure")
        table.add_column("value", justify="right")
        for label, data in sp["ingest"].items():
            table.add_row(f"ingest, {label}", f"{data['memories_per_s']:.0f} memories/s")
        for name, data in sp["embedding_only"].items():
            table.add_row(f"embedding alone, {name} (one call)", f"{data['texts_per_s']:.0f} texts/s")
        table.add_row("load average (1 min) before / after", f"{sp['load_before'][0]:.1f} / {sp['load_after'][0]:.1f}")
        for key, label in (
            ("search_with_query_embedding", "search limit=10 incl. query embedding"),
            ("search_without_query_embedding", "search limit=10 excl. query embedding"),
        ):
            table.add_row(f"{label}, p50 / p95", f"{sp[key]['p50_ms']:.2f} / {sp[key]['p95_ms']:.2f} ms")
        cost = sp.get("neighbour_spreading_cost")
        if cost:
            for key, label in (("search_spreading_off", "off"), ("search_spreading_on", "on")):
                d = cost[key]
                table.add_row(
                    f"linked turns ({cost['memories']}), excl. embedding, spreading {label}, p50 / p95",
                    f"{d['p50_ms']:.2f} / {d['p95_ms']:.2f} ms",
                )
            table.add_row("load average (1 min) around the spreading run", f"{cost['load_before'][0]:.1f}")
        console.print(table)
    if "scale" in results:
        sc = results["scale"]
        table = Table(title="Scale: latency p50 / p95 ms (top-50 candidates; search limit=10; synthetic vectors)")
        table.add_column("memories")
        columns = (
            ("numpy_scan_top50", "numpy scan"),
            ("store_vector_candidates_top50", "store vector"),
            ("store_keyword_candidates_top50", "store keyword"),
            ("search_without_query_embedding", "search excl. embed"),
            ("search_with_query_embedding", "search incl. embed"),
        )
        for _, label in columns:
            table.add_column(label, justify="right")
        table.add_column("load", justify="right")
        for size in (k for k in sc if k.isdigit()):
            d = sc[size]
            cells = [f"{d[k]['p50_ms']:.2f} / {d[k]['p95_ms']:.2f}" for k, _ in columns]
            table.add_row(size, *cells, f"{d['load_before'][0]:.1f}")
        console.print(table)


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
