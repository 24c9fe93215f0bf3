"""Recall that finds the memory a person means (issue 21): the recall dev set, LoCoMo and LongMemEval side by side.

Systems, in one run on the same vectors: engramdb as a user calls it (``mem.search``), vector-only with the
same model (a numpy scan: what a Chroma user gets), BM25 (rank_bm25), and, with ``--lance``, LanceDB's hybrid
search (the ``bench`` extra). A fusion study ranks each question's own keyword and vector candidate lists
(the store's, as the engine fetches them) under every fusion rule measured, before boosts and conversation
context, so rules compare on equal footing.

    python bench/recall.py                                   # dev split of the recall set only (seconds)
    python bench/recall.py --split confirm                   # the confirmation split (look rarely)
    python bench/recall.py --datasets recall,locomo,longmemeval --lme-questions 40
    python bench/recall.py --calibrate                       # fit relevance on the dev split's labelled pairs
    python bench/recall.py --datasets none --speed /tmp/s100k  # 100k search latency, evidence vs min-max fusion

Speed (``--speed DIR``): a 100k store as ``bench/scale.py`` builds it (real turn texts, synthetic vectors; built
in DIR if missing), then per LoCoMo question, interleaved: ``mem.search`` with the query's vector cached (what the
issue's "excluding the query embedding" means: bookkeeping included), and the searcher alone (no bookkeeping)
under evidence fusion and under the min-max fusion it replaced.

Conversations (LoCoMo, LongMemEval) are recorded as a user records them: each turn with its session and ``at=``
its session's date, and each question asked ``as_of`` when it was asked (LoCoMo: the last session; LongMemEval:
the question date; the row "engramdb, no as_of" asks without it, since some LongMemEval haystacks hold answer
sessions dated after their question). ``--turns undated`` / ``one-thread`` record them as earlier rounds did.

Measures: recall set top-1 / top-3 / MRR (one right memory per question) and how often a decoy of the question's
own group ranks above the right memory; LoCoMo recall@5/10 of the evidence turns; LongMemEval_S turn recall@5/10
and session recall@5.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from _clauses import clause_store
from _data import LOCOMO_CATEGORIES, Doc, cached_positions, event_time, load_locomo, load_longmemeval
from _recall_data import RecallSet, load_recall_set
from _report import write_json
from _systems import BM25Index, Ranked, VectorIndex, fuse_convex, recall_at_k, session_recall_at_k
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.embeddings.profile import DEFAULT_PROFILE, FusionProfile, profile_of
from engramdb.retrieval.evidence import Calibration, coverage, relevance, term_weight
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights, weights_for
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter

AGENT = "bench"
DEPTH = 50
#: The engine with the fusion it had before issue 21 (min-max, 0.5/0.5), same store, no bookkeeping.
BEFORE = "engramdb before (min-max fusion)"
RESULTS = Path(__file__).resolve().parent / "results"


# -- corpora ------------------------------------------------------------------------------------------------


class Corpus:
    """One store under every system: docs by id, their vectors, BM25, and the engine's store."""

    def __init__(self, docs: Sequence[tuple[str, str, str, dict[str, Any]]], embedder: CachedEmbedder) -> None:
        """``docs``: (doc id, kind, content, extra metadata) in write order."""
        self.ids = [d[0] for d in docs]
        self.text = {d[0]: d[2] for d in docs}
        self.embedder = embedder
        matrix = embedder.embed([d[2] for d in docs])
        self.matrix = np.asarray(matrix, dtype=np.float32)
        self.row = {d: i for i, d in enumerate(self.ids)}
        self.bm25 = BM25Index(self.ids, [d[2] for d in docs])
        self.vectors = VectorIndex(self.ids, self.matrix)
        self.mem = Engram(":memory:", embedder=embedder)
        # ``extra["at"]``: when the turn was said (its session's date), passed as ``at=`` the way a user
        # records a conversation; the rest is metadata.
        stored = self.mem.remember_many(
            [
                {
                    "content": c,
                    "agent": AGENT,
                    "kind": k,
                    "metadata": {**{key: v for key, v in extra.items() if key != "at"}, "doc": d},
                    **({"at": extra["at"]} if extra.get("at") is not None else {}),
                }
                for d, k, c, extra in docs
            ]
        )
        self.doc_of = {m.id: str(m.metadata["doc"]) for m in stored}
        self.memory_of = {d: m for m, d in self.doc_of.items()}
        self._searchers: dict[str, HybridSearcher] = {}
        self.lance: Any = None
        self._lance_dir: tempfile.TemporaryDirectory[str] | None = None

    def with_lance(self) -> None:
        """The same rows and vectors in LanceDB (``bench/compare.py``'s adapter), for its hybrid search."""
        from compare import Corpus as LanceRows
        from compare import LanceSystem

        self._lance_dir = tempfile.TemporaryDirectory(prefix="recall-lance-")
        self.lance = LanceSystem(Path(self._lance_dir.name), self.embedder)
        self.lance.add(LanceRows(name="c", ids=self.ids, texts=list(self.text.values()), vectors=self.matrix), None)

    def lance_hybrid(self, query: str, qvec: np.ndarray, k: int) -> list[str]:
        return list(self.lance.search("c", "hybrid", query, qvec, k))

    def close(self) -> None:
        for s in self._searchers.values():
            s.close()
        self.mem.close()
        if self.lance is not None:
            self.lance.close()
        if self._lance_dir is not None:
            self._lance_dir.cleanup()

    def ours(self, query: str, limit: int, as_of: datetime | None = None) -> list[str]:
        hits = self.mem.search(query, agent=AGENT, limit=limit, as_of=as_of)
        return self._docs(hits)

    def _docs(self, hits: Sequence[Any]) -> list[str]:
        """The docs of ``hits``, best first; with ``--count-folded`` each hit's folded near-identical memories
        (``Hit.duplicates``, what the hit stands for) right after it."""
        out = []
        for h in hits:
            out.append(self.doc_of[h.memory.id])
            if COUNT_FOLDED:
                out.extend(self.doc_of[d] for d in h.duplicates)
        return out

    def engine(
        self,
        name: str,
        weights: RankingWeights,
        query: str,
        limit: int,
        *,
        other_speaker: float = 1.0,
        asked: datetime | None = None,
        attrs: dict[str, Any] | None = None,
        filter_as_of: bool = True,
    ) -> list[str]:
        """The engine's searcher with other ranking weights, on the same store (no bookkeeping); ``asked`` as
        ``as_of`` (with ``filter_as_of``); ``attrs``: searcher attributes set on it (``session_weight``, ...),
        and ``ask_now``: the question asked at ``asked`` (its time words count from then) without the
        ``as_of`` filter, which drops the sessions some LongMemEval haystacks date after their question."""
        if name not in self._searchers:
            store = self.mem.store
            if (attrs or {}).get("clause_head"):
                store = clause_store(
                    store, lambda i: self.text[self.doc_of[i]], self.embedder.embed, int(attrs["clause_head"])
                )
            self._searchers[name] = HybridSearcher(store, self.embedder, weights=weights)
            self._searchers[name].other_speaker_weight = other_speaker
            for attr, value in (attrs or {}).items():
                if attr not in RankingWeights.__dataclass_fields__ and attr not in BENCH_ATTRS:
                    setattr(self._searchers[name], attr, int(value) if attr in INT_ATTRS else value)
        ask_now = bool((attrs or {}).get("ask_now")) and asked is not None
        flt = Filter(agent=AGENT, as_of=asked if filter_as_of and not ask_now else None)
        now = asked if ask_now and asked is not None else datetime.now(UTC)
        fold = bool((attrs or {}).get("fold", 1))
        hits = self._searchers[name].search(query, flt, limit=limit, now=now, touch=False, fold=fold)
        return self._docs(hits)

    def channels(self, query: str, qvec: np.ndarray, depth: int = DEPTH) -> tuple[Ranked, Ranked]:
        flt = Filter(agent=AGENT)
        terms = query_terms(query)
        search = self.mem.store.search
        kw = search.keyword_candidates(terms, flt, limit=depth) if terms else []
        vec = search.vector_candidates(qvec, flt, limit=depth)
        return [(self.doc_of[c.id], c.score) for c in kw], [(self.doc_of[c.id], c.score) for c in vec]

    def cosines(self, qvec: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        rows = self.matrix[[self.row[i] for i in ids]] if ids else np.zeros((0, self.matrix.shape[1]))
        return dict(zip(ids, (rows @ np.asarray(qvec, dtype=np.float32)).tolist(), strict=True))


#: ``--variant`` names that are no searcher attribute: ``ask_now`` (see ``Corpus.engine``), ``fold=0`` (near-
#: identical turns not folded into one hit) and ``clause_head=N`` (``_clauses.py``).
BENCH_ATTRS = frozenset({"ask_now", "fold", "clause_head"})

#: Searcher attributes that are counts (``--variant`` reads every value as a float).
INT_ATTRS = frozenset(
    {"relative_counted", "told_times", "session_free", "depth", "keyword_depth", "related_depth", "related_most"}
)

#: Weights of turns by a speaker the question does not name, measured as extra engramdb rows (``--speaker``).
SPEAKER: tuple[float, ...] = ()

#: Extra engramdb rows: (row name, searcher attributes), e.g. session evidence weights (``--variant``).
VARIANTS: list[tuple[str, dict[str, Any]]] = []


def variant_weights(attrs: dict[str, Any]) -> RankingWeights:
    """A variant's ranking weights: the run's embedder's (its fusion profile) with those of ``attrs`` that name a
    ``RankingWeights`` field."""
    fields = set(RankingWeights.__dataclass_fields__)
    return dataclasses.replace(weights_for(PROFILE[0]), **{k: v for k, v in attrs.items() if k in fields})


#: The run's embedder's fusion constants and calibration (set in ``main``).
PROFILE: list[FusionProfile] = [DEFAULT_PROFILE]


#: How conversation turns are recorded: "dated" (session and ``at=``), "undated" (session only), "one-thread".
TURNS = "dated"

#: A hit's folded near-identical memories count at its place (``--count-folded``): a turn told twice in a
#: session comes as one hit standing for both, and either may be the one a data set names as evidence.
COUNT_FOLDED = False

#: Also index every corpus in LanceDB (``--lance``; the ``bench`` extra).
LANCE = False

#: Per-question rows for reading misses one by one (``--per-question FILE``): dataset, question, its type,
#: and each system's ranks of the gold turns.
PER_QUESTION: list[dict[str, Any]] = []


def _note(dataset: str, qid: str, qtype: str, text: str, rankings: dict[str, list[str]], gold: Sequence[str]) -> None:
    PER_QUESTION.append(
        {
            "dataset": dataset,
            "id": qid,
            "type": qtype,
            "question": text,
            "gold": list(gold),
            "ranks": {s: [r.index(g) + 1 if g in r else None for g in gold] for s, r in rankings.items()},
            "top": {s: r[:15] for s, r in rankings.items() if not s.startswith("study")},
        }
    )


def make_corpus(docs: Sequence[tuple[str, str, str, dict[str, Any]]], embedder: CachedEmbedder) -> Corpus:
    corpus = Corpus(docs, embedder)
    if LANCE:
        corpus.with_lance()
    return corpus


def recall_corpus(rs: RecallSet, embedder: CachedEmbedder) -> Corpus:
    return make_corpus([(it.id, it.kind, it.content, {}) for it in rs.items], embedder)


# -- fusion rules of the study ----------------------------------------------------------------------------


def _minmax(ranked: Ranked) -> dict[str, float]:
    if not ranked:
        return {}
    hi, lo = ranked[0][1], min(s for _, s in ranked)
    span = hi - lo
    return {d: (s - lo) / span if span > 1e-12 else 1.0 for d, s in ranked}


def _order(scores: dict[str, float]) -> list[str]:
    return [d for d, _ in sorted(scores.items(), key=lambda t: (-t[1], t[0]))]


Rule = Callable[[Ranked, Ranked, dict[str, float], dict[str, float]], list[str]]


def study_rules() -> Iterator[tuple[str, Rule]]:
    """(name, rule): a rule ranks the union of the candidate lists from (kw, vec, cosine, coverage)."""

    def minmax(w: float) -> Rule:
        def rule(kw: Ranked, vec: Ranked, cos: dict[str, float], cov: dict[str, float]) -> list[str]:
            return fuse_convex(kw, vec, keyword_weight=w, norm="minmax")

        return rule

    yield "vector only", lambda kw, vec, cos, cov: [d for d, _ in vec]
    yield "keyword only", lambda kw, vec, cos, cov: [d for d, _ in kw]
    for w in (0.3, 0.5):
        yield f"minmax w={w}", minmax(w)

    def kw_times_cov(w: float) -> Rule:
        def rule(kw: Ranked, vec: Ranked, cos: dict[str, float], cov: dict[str, float]) -> list[str]:
            k, v = _minmax(kw), _minmax(vec)
            return _order({d: w * k.get(d, 0.0) * cov[d] + (1 - w) * v.get(d, 0.0) for d in cos})

        return rule

    for w in (0.5,):
        yield f"minmax, keyword x coverage w={w}", kw_times_cov(w)

    def linear(lam: float, mu: float) -> Rule:
        def rule(kw: Ranked, vec: Ranked, cos: dict[str, float], cov: dict[str, float]) -> list[str]:
            k = _minmax(kw)
            return _order({d: cos[d] + lam * cov[d] + mu * k.get(d, 0.0) for d in cos})

        return rule

    for lam in (0.1, 0.2, 0.3, 0.5):
        for mu in (0.0, 0.1, 0.2):
            yield f"cosine + {lam} coverage + {mu} bm25-minmax", linear(lam, mu)

    def adaptive(base: float) -> Rule:
        # Keyword weight follows how much of the query the best keyword match covers.
        def rule(kw: Ranked, vec: Ranked, cos: dict[str, float], cov: dict[str, float]) -> list[str]:
            best = max((cov[d] for d, _ in kw), default=0.0)
            return fuse_convex(kw, vec, keyword_weight=base * best, norm="minmax") if kw else [d for d, _ in vec]

        return rule

    for base in (0.5, 0.7):
        yield f"minmax, keyword weight {base} x best coverage", adaptive(base)


# -- evaluation -------------------------------------------------------------------------------------------


class Scores:
    """Per-question measures of each system (percent in the summary) and each system's search times."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.ms: dict[str, list[float]] = defaultdict(list)

    def add(self, system: str, measure: str, value: float) -> None:
        self.values[system][measure].append(value)

    def add_ms(self, system: str, ms: float) -> None:
        self.ms[system].append(ms)

    def summary(self) -> dict[str, dict[str, float]]:
        out = {s: {m: round(100 * statistics.fmean(v), 1) for m, v in ms.items()} for s, ms in self.values.items()}
        for system, ms in self.values.items():
            # Questions scored: LongMemEval's cached set grows as haystacks get embedded.
            out[system]["n"] = float(len(next(iter(ms.values()))))
        for system, row in out.items():
            if self.ms.get(system):
                row["p50 ms"] = round(statistics.median(self.ms[system]), 2)
        return out


def rank_of(ranking: Sequence[str], gold: str) -> int | None:
    try:
        return ranking.index(gold) + 1
    except ValueError:
        return None


#: engramdb searched without the question's date (its time words then count from the day the bench runs).
UNDATED = "engramdb, no as_of"


def systems(
    corpus: Corpus,
    query: str,
    qvec: np.ndarray,
    depth: int,
    scores: Scores,
    asked: datetime | None = None,
    *,
    variants_as_of: bool = True,
) -> dict[str, list[str]]:
    """Each system's ranking of one question, ``depth`` deep, each call timed (the query's vector is given,
    or cached for engramdb: no system's time includes embedding the query). ``asked``: when the question is
    asked, passed to engramdb as ``as_of`` as a user would (``UNDATED`` is the same search without it)."""
    calls: dict[str, Callable[[], list[str]]] = {
        "engramdb": lambda: corpus.ours(query, depth, as_of=asked),
        BEFORE: lambda: corpus.engine(BEFORE, RankingWeights(fusion="minmax"), query, depth),
        "vector only": lambda: [d for d, _ in corpus.vectors.search(qvec, depth)],
        "bm25": lambda: [d for d, _ in corpus.bm25.search(query, depth)],
    }
    for w in SPEAKER:
        calls[f"engramdb, other speaker x{w}"] = lambda w=w: corpus.engine(  # type: ignore[misc]
            f"speaker {w}", weights_for(PROFILE[0]), query, depth, other_speaker=w, asked=asked
        )
    for label, attrs in VARIANTS:
        calls[f"engramdb, {label}"] = lambda label=label, attrs=attrs: corpus.engine(  # type: ignore[misc]
            label, variant_weights(attrs), query, depth, asked=asked, attrs=attrs, filter_as_of=variants_as_of
        )
    if asked is not None:
        calls[UNDATED] = lambda: corpus.ours(query, depth)
    if corpus.lance is not None:
        calls["lancedb hybrid"] = lambda: corpus.lance_hybrid(query, qvec, depth)
    out = {}
    for name, call in calls.items():
        t0 = time.perf_counter()
        out[name] = call()
        scores.add_ms(name, (time.perf_counter() - t0) * 1000)
    return out


def _study(corpus: Corpus, query: str, qvec: np.ndarray) -> Iterator[tuple[str, list[str]]]:
    kw, vec = corpus.channels(query, qvec)
    union = list(dict.fromkeys([d for d, _ in kw] + [d for d, _ in vec]))
    cos = corpus.cosines(qvec, union)
    terms = query_terms(query)
    weights = [term_weight(t) for t in terms]
    cov = {d: coverage(terms, corpus.text[d], weights=weights) for d in union}
    for name, rule in study_rules():
        yield f"study: {name}", rule(kw, vec, cos, cov)


def evaluate_recall(rs: RecallSet, split: str, embedder: CachedEmbedder, scores: Scores, study: bool) -> None:
    corpus = recall_corpus(rs, embedder)
    try:
        questions = rs.split(split)
        qvecs = embedder.embed([q.text for q in questions])
        for q, qvec in zip(questions, qvecs, strict=True):
            rankings = systems(corpus, q.text, qvec, 10, scores)
            if study:
                rankings.update(_study(corpus, q.text, qvec))
            _note("recall", q.gold, "", q.text, rankings, [q.gold])
            for system, ranking in rankings.items():
                r = rank_of(ranking, q.gold)
                scores.add(system, "top1", float(r == 1))
                scores.add(system, "top3", float(r is not None and r <= 3))
                scores.add(system, "top5", float(r is not None and r <= 5))
                scores.add(system, "top10", float(r is not None and r <= 10))
                scores.add(system, "mrr", 1.0 / r if r else 0.0)
                first_decoy = min((rank_of(ranking, d) or 99 for d in q.decoys), default=99)
                scores.add(system, "decoy first", float(first_decoy < (r or 98)))
    finally:
        corpus.close()


def _turn(d: Doc) -> tuple[str, str, str, dict[str, Any]]:
    """A conversation turn as a user records it: who said it, its session, when it was said (``at=``; not with
    ``--undated``); with ``--one-thread`` as the bench recorded turns before: no session, no date."""
    if TURNS == "one-thread":
        return (d.id, "conversation", d.content, {"role": d.role})
    when = event_time(d.date) if TURNS == "dated" else None
    return (d.id, "conversation", d.content, {"role": d.role, "session": d.session, "at": when})


def evaluate_locomo(embedder: CachedEmbedder, scores: Scores, study: bool, conversations: slice) -> None:
    for conv in load_locomo()[conversations]:
        corpus = make_corpus([_turn(d) for d in conv.docs], embedder)
        # LoCoMo's questions were written after the conversation: they are asked as of its last session.
        dates = [t for d in conv.docs if (t := event_time(d.date)) is not None] if TURNS == "dated" else []
        asked = max(dates, default=None)
        try:
            qvecs = embedder.embed([q.text for q in conv.questions])
            for q, qvec in zip(conv.questions, qvecs, strict=True):
                rankings = systems(corpus, q.text, qvec, 10, scores, asked)
                if study:
                    rankings.update(_study(corpus, q.text, qvec))
                _note("locomo", conv.sample_id, LOCOMO_CATEGORIES[q.category], q.text, rankings, q.evidence)
                for system, ranking in rankings.items():
                    for k in (5, 10):
                        scores.add(system, f"R@{k}", recall_at_k(ranking, q.evidence, k))
                    scores.add(system, f"R@10 {LOCOMO_CATEGORIES[q.category]}", recall_at_k(ranking, q.evidence, 10))
        finally:
            corpus.close()


def evaluate_lme(embedder: CachedEmbedder, scores: Scores, study: bool, limit: int | None, cached: bool) -> None:
    positions = None
    if cached:
        assert embedder.path is not None
        positions = cached_positions(embedder.path, embedder.model_id)
    for item in load_longmemeval(limit=None if cached else limit, positions=positions):
        corpus = make_corpus([_turn(d) for d in item.docs], embedder)
        session_of = {d.id: d.session for d in item.docs}
        try:
            qvec = embedder.embed([item.text])[0]
            asked = event_time(item.question_date) if TURNS == "dated" else None
            # Variants compare with the row without ``as_of`` (some answer sessions postdate their question).
            rankings = systems(corpus, item.text, qvec, 50, scores, asked, variants_as_of=False)
            if study:
                rankings.update(_study(corpus, item.text, qvec))
            _note("longmemeval", item.question_id, item.question_type, item.text, rankings, item.answer_turns)
            PER_QUESTION[-1]["sessions"] = {
                s: [session_of[d] for d in r] for s, r in rankings.items() if not s.startswith("study")
            }
            PER_QUESTION[-1]["answer_sessions"] = list(item.answer_sessions)
            for system, ranking in rankings.items():
                for k in (5, 10):
                    scores.add(system, f"turn R@{k}", recall_at_k(ranking, item.answer_turns, k))
                scores.add(system, "session R@5", session_recall_at_k(ranking, session_of, item.answer_sessions, 5))
        finally:
            corpus.close()


# -- calibration ------------------------------------------------------------------------------------------


def labelled_pairs(
    rs: RecallSet, split: str, embedder: CachedEmbedder, seed: int = 0
) -> list[tuple[float, float, int]]:
    """(cosine, coverage, label): paraphrases and right memories 1; decoys and unrelated memories 0."""
    rng = random.Random(seed)
    text = {it.id: it.content for it in rs.items}
    memories = [it.id for it in rs.items if it.role == "memory"]
    pairs: list[tuple[str, str, int]] = []
    for q in rs.split(split):
        pairs.append((q.text, text[q.gold], 1))
        pairs.extend((q.text, text[d], 0) for d in q.decoys)
        pairs.extend((q.text, text[m], 0) for m in rng.sample(memories, 3) if m != q.gold)
    paraphrases = list(rs.paraphrases)
    # Paraphrase pairs are split like the groups: every fourth is kept for confirmation.
    for i, (a, b) in enumerate(paraphrases):
        if (i % 4 == 3) == (split == "confirm") or split == "all":
            pairs.append((a, b, 1))
            other = paraphrases[(i + 7) % len(paraphrases)][1]
            pairs.append((a, other, 0))
    vecs = embedder.embed(sorted({p[0] for p in pairs} | {p[1] for p in pairs}))
    by_text = dict(zip(sorted({p[0] for p in pairs} | {p[1] for p in pairs}), vecs, strict=True))
    out = []
    for a, b, label in pairs:
        cos = float(np.dot(by_text[a], by_text[b]))
        out.append((cos, coverage(query_terms(a), b), label))
    return out


def fit_logistic(data: Sequence[tuple[float, float, int]], *, steps: int = 4000) -> Calibration:
    """Class-balanced logistic regression on (cosine, coverage), weights kept >= 0 (monotone)."""
    x = np.array([[1.0, c, k] for c, k, _ in data])
    y = np.array([lab for _, _, lab in data], dtype=np.float64)
    pos = y.sum()
    sample_w = np.where(y == 1, 0.5 / pos, 0.5 / (len(y) - pos))
    theta = np.zeros(3)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-x @ theta))
        grad = x.T @ (sample_w * (p - y)) + 1e-3 * np.r_[0.0, theta[1:]]
        hess = (x * (sample_w * p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(3)
        theta -= np.linalg.solve(hess, grad)
        theta[1:] = np.maximum(theta[1:], 0.0)
    return Calibration(
        bias=round(float(theta[0]), 2),
        cosine_weight=round(float(theta[1]), 2),
        coverage_weight=round(float(theta[2]), 2),
    )


def calibration_report(rs: RecallSet, embedder: CachedEmbedder) -> dict[str, Any]:
    """The fit on the dev split's pairs, and how the embedder's shipped calibration (its fusion profile's; MiniLM's
    ``CALIBRATION``) scores both splits."""
    dev = labelled_pairs(rs, "dev", embedder)
    fitted = fit_logistic(dev)
    used = profile_of(embedder).calibration
    out: dict[str, Any] = {}
    out["fitted_on_dev"] = {
        "bias": fitted.bias,
        "cosine_weight": fitted.cosine_weight,
        "coverage_weight": fitted.coverage_weight,
    }
    for split in ("dev", "confirm"):
        data = labelled_pairs(rs, split, embedder)
        rel = [(relevance(c, k, calibration=used), lab) for c, k, lab in data]
        pos = sorted(r for r, lab in rel if lab == 1)
        neg = sorted(r for r, lab in rel if lab == 0)
        out[split] = {
            "pairs": len(rel),
            "right above 0.5": round(sum(r > 0.5 for r in pos) / len(pos), 3),
            "right above 0.7": round(sum(r > 0.7 for r in pos) / len(pos), 3),
            "wrong below 0.5": round(sum(r < 0.5 for r in neg) / len(neg), 3),
            "wrong below 0.3": round(sum(r < 0.3 for r in neg) / len(neg), 3),
            "right median": round(statistics.median(pos), 3),
            "wrong median": round(statistics.median(neg), 3),
        }
    seed = [
        ("Sign into FB", "Login to Facebook"),
        ("Go to FB", "Login to Facebook"),
        ("Post on timeline", "Login to Facebook"),
        ("Book a flight to Paris", "Login to Facebook"),
        ("order pizza", "Login to Facebook"),
    ]
    vecs = embedder.embed([t for p in seed for t in p])
    out["seed 004"] = {
        f"{a} -> {b}": round(
            relevance(float(np.dot(vecs[2 * i], vecs[2 * i + 1])), coverage(query_terms(a), b), calibration=used), 3
        )
        for i, (a, b) in enumerate(seed)
    }
    return out


# -- speed ------------------------------------------------------------------------------------------------


def _gathering_questions() -> list[str]:
    """LongMemEval_S questions that gather facts across conversations (the questions related words are for)."""
    from _data import iter_longmemeval
    from engramdb.retrieval.sessions import asks_across_sessions

    return [q.text for q in iter_longmemeval(None) if asks_across_sessions(q.text)]


def _counted_back_questions() -> list[str]:
    """LongMemEval_S's and LoCoMo's questions whose time phrase counts back ("a week ago"): the searches that read
    their candidates' texts for a dated event (issue 21, eighth round)."""
    from _data import iter_longmemeval
    from engramdb.retrieval.timeref import counted_back, find_time

    texts = [q.text for q in iter_longmemeval(None)] + [q.text for c in load_locomo() for q in c.questions]
    now = datetime.now(UTC)
    return [t for t in texts if (w := find_time(t, reference=now)) is not None and any(map(counted_back, w.spans))]


def run_speed(
    directory: Path, size: int, queries: int, *, gathering: bool = False, temporal: bool = False
) -> dict[str, Any]:
    import os

    import scale
    from _retrieval_speed import _latency, _load, _ms

    if not (directory / "engram.db").exists():
        directory.mkdir(parents=True, exist_ok=True)
        seconds = scale.build(directory, size, np.random.default_rng(0))
        print(f"built {size} memories in {seconds:.0f} s")
    emb = scale._embedder()
    # ``--speed-gathering``: questions that count or list ("how many ... in total"), else LoCoMo's.
    # ``--speed-temporal``: the few questions that count back, taken in turn until there are ``queries``.
    every = _gathering_questions() if gathering else [q.text for c in load_locomo() for q in c.questions]
    if temporal:
        few = _counted_back_questions()
        every = [few[i % len(few)] for i in range(queries)]
    questions = every[:queries]
    qvecs = emb.embed(questions)
    mem = Engram(directory, embedder=emb, vectors="sync")
    flt = Filter(agent=scale.AGENT)
    evidence = HybridSearcher(mem.store, emb, weights=RankingWeights())
    minmax = HybridSearcher(mem.store, emb, weights=RankingWeights(fusion="minmax"))
    # ``--variant`` rows: the searcher alone with those attributes, interleaved with the others.
    variants = {}
    for label, attrs in VARIANTS:
        variants[label] = HybridSearcher(mem.store, emb, weights=variant_weights(attrs))
        for attr, value in attrs.items():
            if attr not in RankingWeights.__dataclass_fields__ and attr not in BENCH_ATTRS:
                setattr(variants[label], attr, int(value) if attr in INT_ATTRS else value)
    timed: dict[str, list[float]] = {label: [] for label in variants}
    walls: dict[str, list[float]] = {label: [] for label in variants}
    now = datetime.now(UTC)
    for q in questions[:10]:
        mem.search(q, agent=scale.AGENT, limit=10)
    # The steady state: the keyword postings and the HNSW sidecar built (FTS5's own bm25() and an exact scan of
    # every vector until then). Without the second wait the first run measured the exact scan: 31 ms p50.
    inner = scale._unwrapped(mem.store.search)
    inner.keyword_index.wait()
    inner._index.wait_for_index()
    for q in questions[:10]:
        mem.search(q, agent=scale.AGENT, limit=10)
    load_before = _load()
    whole, ev, mm, cpu = [], [], [], []
    for q, v in zip(questions, qvecs, strict=True):
        whole.append(_ms(lambda q=q: mem.search(q, agent=scale.AGENT, limit=10)))
        c0 = time.process_time()
        mem.search(q, agent=scale.AGENT, limit=10)
        cpu.append((time.process_time() - c0) * 1000)
        ev.append(_ms(lambda q=q, v=v: evidence.search(q, flt, limit=10, now=now, touch=False, vector=v)))
        mm.append(_ms(lambda q=q, v=v: minmax.search(q, flt, limit=10, now=now, touch=False, vector=v)))
        for label, searcher in variants.items():
            c0, w0 = time.process_time(), time.perf_counter()
            searcher.search(q, flt, limit=10, now=now, touch=False, vector=v)
            timed[label].append((time.process_time() - c0) * 1000)
            walls[label].append((time.perf_counter() - w0) * 1000)
    out = {
        "memories": mem.count(agent=scale.AGENT),
        "search_without_query_embedding": _latency(whole),
        # CPU time of the same search (every thread of the process): what it costs when no one else runs,
        # since on this shared machine the wall time mostly measures waiting for a core.
        "search_without_query_embedding_cpu": _latency(cpu),
        "searcher_evidence_fusion": _latency(ev),
        "searcher_minmax_fusion": _latency(mm),
        **{f"searcher_cpu {label}": _latency(t) for label, t in timed.items()},
        **{f"searcher_wall {label}": _latency(t) for label, t in walls.items()},
        "load_before": load_before,
        "load_after": _load(),
        "cpus": os.cpu_count(),
        "uses_ann": bool(getattr(inner._index, "uses_ann", False)),
    }
    evidence.close()
    minmax.close()
    for searcher in variants.values():
        searcher.close()
    mem.close()
    return out


def _value(text: str) -> float | str:
    """A ``--variant`` value: a number, else a word (``fusion=learned``)."""
    try:
        return float(text)
    except ValueError:
        return text.strip()


# -- main -------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="recall", help="comma-separated: recall, locomo, longmemeval")
    parser.add_argument("--split", default="dev", choices=("dev", "confirm", "all"), help="recall set split")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--conversations", default="", help="LoCoMo conversations as START:END (e.g. 0:3)")
    parser.add_argument("--lme-questions", type=int, default=40)
    parser.add_argument(
        "--lme-cached-only", action="store_true", help="LongMemEval: only the questions whose turns are all cached"
    )
    parser.add_argument("--no-study", action="store_true", help="systems only, no fusion study")
    parser.add_argument("--speaker", default="", help="comma-separated other-speaker weights (extra rows)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="an extra engramdb row: searcher attributes as NAME=VALUE,... (e.g. session_weight=0.3, fusion=learned)",
    )
    parser.add_argument("--turns", default="dated", choices=("dated", "undated", "one-thread"), help="see _turn")
    parser.add_argument("--lance", action="store_true", help="add LanceDB hybrid search (the bench extra)")
    parser.add_argument("--count-folded", action="store_true", help="a hit's folded memories count at its place")
    parser.add_argument("--calibrate", action="store_true", help="fit and report the relevance calibration")
    parser.add_argument("--embed-cache", default=str(Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"))
    parser.add_argument("--speed", type=Path, default=None, help="100k store directory (built if missing)")
    parser.add_argument("--speed-size", type=int, default=100_000)
    parser.add_argument("--speed-queries", type=int, default=300)
    parser.add_argument(
        "--speed-gathering", action="store_true", help="time questions that gather across sessions, not LoCoMo's"
    )
    parser.add_argument(
        "--speed-temporal", action="store_true", help="time questions that count back ('a week ago'), taken in turn"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--per-question", type=Path, default=None, help="write each question's gold ranks here")
    args = parser.parse_args(argv)
    global LANCE  # noqa: PLW0603 - a run-wide switch, set once before any corpus is built
    LANCE = args.lance
    global COUNT_FOLDED  # noqa: PLW0603 - as LANCE
    COUNT_FOLDED = args.count_folded
    global TURNS  # noqa: PLW0603 - as LANCE
    TURNS = args.turns
    global SPEAKER  # noqa: PLW0603 - as LANCE
    SPEAKER = tuple(float(b) for b in args.speaker.split(",") if b.strip())
    for spec in args.variant:
        attrs = {k.strip(): _value(v) for k, _, v in (p.partition("=") for p in spec.split(",")) if k.strip()}
        VARIANTS.append((spec, attrs))
    cache = Path(args.embed_cache).expanduser()
    cache.parent.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(make_embedder(load_settings()), size=200_000, path=cache)
    PROFILE[0] = profile_of(embedder)
    rs = load_recall_set()
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "split": args.split}
    if args.calibrate:
        results["calibration"] = calibration_report(rs, embedder)
        print(results["calibration"])
    if args.speed is not None:
        results["speed"] = run_speed(
            args.speed,
            args.speed_size,
            args.speed_queries,
            gathering=args.speed_gathering,
            temporal=args.speed_temporal,
        )
        print(results["speed"])
    for name in [d.strip() for d in args.datasets.split(",") if d.strip() and d.strip() != "none"]:
        scores = Scores()
        started = time.perf_counter()
        if name == "recall":
            evaluate_recall(rs, args.split, embedder, scores, not args.no_study)
        elif name == "locomo":
            start, _, end = args.conversations.partition(":")
            part = slice(int(start) if start else None, int(end) if end else args.limit_conversations)
            evaluate_locomo(embedder, scores, not args.no_study, part)
        elif name == "longmemeval":
            evaluate_lme(embedder, scores, not args.no_study, args.lme_questions, args.lme_cached_only)
        results[name] = scores.summary()
        print(f"\n== {name} ({time.perf_counter() - started:.0f} s)")
        table = results[name]
        measures = list(next(iter(table.values())).keys())
        print(f"{'system':58s} " + " ".join(f"{m[:12]:>12s}" for m in measures))
        for system, row in table.items():
            print(f"{system[:58]:58s} " + " ".join(f"{row.get(m, math.nan):12.1f}" for m in measures))
    if args.out is not None:
        write_json(args.out, results)
    if args.per_question is not None:
        write_json(args.per_question, {"questions": PER_QUESTION})
    return 0


if __name__ == "__main__":
    sys.exit(main())
