"""Fit learned fusion (``engramdb.retrieval.learned``) on three sets at once and judge it on their held parts.

    python bench/fit_ranker.py --dump            # each question's candidates and features -> a cache file (minutes)
    python bench/fit_ranker.py                   # fit on the train parts, print the weights, score the held parts
    python bench/fit_ranker.py --engine          # + the engine side by side on the held parts (learned, today's
                                                 #   rule, vector only, BM25), the whole search path
    python bench/fit_ranker.py --engine --confirm  # the recall set's confirmation split too (look once, at the end)

Splits, fixed and deterministic: a unit is held out when ``sha256(f"{set}:{key}") % 5 < 2`` (about 40%), else it
is trained on. Keys: the recall set's group (within its dev split; the confirmation split is never trained on),
LoCoMo's conversation (``sample_id``: whole conversations are held, so the model never saw their people or
words), LongMemEval's ``question_id``. Only the LongMemEval questions whose haystacks are in the bench's
embedding cache are used (as ``bench/recall.py --lme-cached-only``).

Candidates are gathered as the engine gathers them (``query_terms`` of the question, 50 per channel, the same
filter as ``bench/recall.py``'s rows: LoCoMo asked ``as_of`` its last session, LongMemEval without). Each
question's right candidates (the recall set's memory, LoCoMo's evidence turns, LongMemEval's answer turns) should
outscore each of its wrong ones: a pairwise logistic loss (RankNet) over :data:`FEATURES`, every question
weighing the same within its set and every set the same in all, plus ``--l2`` x |w|^2. Fitted with scipy's
L-BFGS from zero; the same cache and flags give the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pickle
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

import recall as rb
from _data import cached_positions, event_time, load_locomo, load_longmemeval
from _recall_data import load_recall_set
from _report import write_json
from _systems import recall_at_k, session_recall_at_k
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.retrieval.learned import FEATURES, LEARNED, LearnedScorer, candidate_features
from engramdb.retrieval.ranking import RankingWeights, fuse_by
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter

CACHE = Path("/tmp/ranker-features.pkl")
SETS = ("recall", "locomo", "longmemeval")


def held(dataset: str, key: str) -> bool:
    """The fixed split: about 40% of each set's units are held out."""
    return int(hashlib.sha256(f"{dataset}:{key}".encode()).hexdigest(), 16) % 5 < 2


@dataclass
class Question:
    """One question's candidates (doc ids, vector channel's first), their features and what is right."""

    dataset: str
    key: str
    held: bool
    docs: list[str]
    x: np.ndarray
    rule: list[str]  # today's rule (evidence fusion, default weights) over the same candidates, best first
    vector: list[str]
    gold: tuple[str, ...]
    sessions: dict[str, str] = field(default_factory=dict)
    gold_sessions: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


# -- dump ---------------------------------------------------------------------------------------------------


def _question(corpus: rb.Corpus, dataset: str, key: str, text: str, qvec: np.ndarray, asked: datetime | None) -> Any:
    flt = Filter(agent=rb.AGENT, as_of=asked)
    terms = query_terms(text)
    search = corpus.mem.store.search
    kw = search.keyword_candidates(terms, flt, limit=rb.DEPTH) if terms else []
    vec = search.vector_candidates(np.asarray(qvec, dtype=np.float32), flt, limit=rb.DEPTH)
    ids = list(dict.fromkeys([c.id for c in vec] + [c.id for c in kw]))
    texts = {m.id: m.content for m in corpus.mem.store.memories.get_many(ids, flt).values()}
    feats = candidate_features(kw, vec, texts, terms)
    rule = fuse_by(RankingWeights(), kw, vec, texts, terms)
    order = list(feats)
    doc = corpus.doc_of
    return (
        [doc[i] for i in order],
        np.array([feats[i] for i in order], dtype=np.float64),
        [doc[f.id] for f in rule],
        [doc[c.id] for c in vec],
    )


def dump(embedder: CachedEmbedder) -> list[Question]:
    out: list[Question] = []
    rs = load_recall_set()
    corpus = rb.recall_corpus(rs, embedder)
    try:
        questions = rs.split("all")
        for q, qvec in zip(questions, embedder.embed([q.text for q in questions]), strict=True):
            group = q.gold.rsplit("/", 1)[0]
            docs, x, rule, vec = _question(corpus, "recall", group, q.text, qvec, None)
            part = "confirm" if q.split == "confirm" else ("held" if held("recall", group) else "train")
            out.append(Question("recall", group, part != "train", docs, x, rule, vec, (q.gold,), extra={"part": part}))
    finally:
        corpus.close()
    print(f"recall: {len(out)} questions", flush=True)
    for conv in load_locomo():
        corpus = rb.make_corpus([rb._turn(d) for d in conv.docs], embedder)
        asked = max((t for d in conv.docs if (t := event_time(d.date)) is not None), default=None)
        h = held("locomo", conv.sample_id)
        try:
            qvecs = embedder.embed([q.text for q in conv.questions])
            for q, qvec in zip(conv.questions, qvecs, strict=True):
                docs, x, rule, vec = _question(corpus, "locomo", conv.sample_id, q.text, qvec, asked)
                out.append(Question("locomo", conv.sample_id, h, docs, x, rule, vec, q.evidence))
        finally:
            corpus.close()
        print(f"locomo {conv.sample_id}: held={h}", flush=True)
    assert embedder.path is not None
    positions = cached_positions(embedder.path, embedder.model_id)
    for item in load_longmemeval(positions=positions):
        corpus = rb.make_corpus([rb._turn(d) for d in item.docs], embedder)
        try:
            qvec = embedder.embed([item.text])[0]
            docs, x, rule, vec = _question(corpus, "longmemeval", item.question_id, item.text, qvec, None)
            out.append(
                Question(
                    "longmemeval",
                    item.question_id,
                    held("longmemeval", item.question_id),
                    docs,
                    x,
                    rule,
                    vec,
                    item.answer_turns,
                    sessions={d.id: d.session for d in item.docs},
                    gold_sessions=item.answer_sessions,
                    extra={"type": item.question_type},
                )
            )
        finally:
            corpus.close()
    print(f"longmemeval: {sum(q.dataset == 'longmemeval' for q in out)} questions", flush=True)
    return out


# -- fit ----------------------------------------------------------------------------------------------------


def _pairs(q: Question, x: np.ndarray, order: Sequence[str] | None, head: int) -> tuple[np.ndarray, np.ndarray]:
    """A question's (x_right - x_wrong) rows and LambdaRank weights: how much swapping the pair would move its
    reciprocal rank under ``order`` (the current ranking; None: every pair weighs the same). With ``head``, only
    wrong candidates ranked within the first ``head`` by ``order`` or by today's rule are paired."""
    right = [i for i, d in enumerate(q.docs) if d in q.gold]
    wrong = [i for i, d in enumerate(q.docs) if d not in q.gold]
    if not right or not wrong:
        return np.zeros((0, x.shape[1])), np.zeros(0)
    if head:
        near = set(q.rule[:head]) | (set(order[:head]) if order is not None else set())
        wrong = [i for i in wrong if q.docs[i] in near] or wrong[:1]
    d = (x[right][:, None, :] - x[wrong][None, :, :]).reshape(-1, x.shape[1])
    if order is None:
        return d, np.full(len(d), 1.0 / len(d))
    pos = {doc: r for r, doc in enumerate(order, start=1)}
    w = np.array([abs(1.0 / pos[q.docs[i]] - 1.0 / pos[q.docs[j]]) for i in right for j in wrong])
    total = w.sum()
    return d, (w / total if total > 0 else np.full(len(d), 1.0 / len(d)))


def pairs(
    questions: Sequence[Question], columns: Sequence[int], theta: np.ndarray | None, head: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every question's pairs; each set weighs 1 in all, each question 1 within its set."""
    per_set: dict[str, int] = {}
    usable = [q for q in questions if any(d in q.gold for d in q.docs)]
    for q in usable:
        per_set[q.dataset] = per_set.get(q.dataset, 0) + 1
    diffs, weights = [], []
    for q in usable:
        x = q.x[:, columns]
        order = learned_order(q, theta, columns) if theta is not None else None
        d, w = _pairs(q, x, order, head)
        diffs.append(d)
        weights.append(w / (per_set[q.dataset] * len(per_set)))
    return np.vstack(diffs), np.concatenate(weights)


def fit_listwise(questions: Sequence[Question], columns: Sequence[int], l2: float, *, prior: np.ndarray) -> np.ndarray:
    """Softmax cross-entropy over each question's candidates (ListNet with one-hot targets): the right candidates'
    share of ``exp(score)`` should be 1. Unlike pairs, every wrong candidate competes in proportion to how high it
    scores, so the head, which decides top-k recall, dominates the loss."""
    per_set: dict[str, int] = {}
    usable = [q for q in questions if any(d in q.gold for d in q.docs)]
    for q in usable:
        per_set[q.dataset] = per_set.get(q.dataset, 0) + 1
    data = [
        (q.x[:, columns], np.array([d in q.gold for d in q.docs]), 1.0 / (per_set[q.dataset] * len(per_set)))
        for q in usable
    ]

    def loss(t: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = l2 * float((t - prior) @ (t - prior)), 2 * l2 * (t - prior)
        for x, right, w in data:
            s = x @ t
            s = s - s.max()
            e = np.exp(s)
            p_all = e / e.sum()
            p_right = np.where(right, e, 0.0) / e[right].sum()
            value += w * float(np.log(e.sum()) - np.log(e[right].sum()))
            grad += w * (x.T @ (p_all - p_right))
        return value, grad

    res = minimize(loss, prior, jac=True, method="L-BFGS-B", options={"maxiter": 3000})
    return np.asarray(res.x)


def fit(
    questions: Sequence[Question], columns: Sequence[int], l2: float, *, head: int, rounds: int, prior: np.ndarray
) -> np.ndarray:
    """Pairwise logistic fit, pulled towards ``prior`` (today's rule, scaled) by ``l2``; then ``rounds`` LambdaRank
    refits, each weighing pairs by the reciprocal-rank change under the previous fit's ranking."""
    theta: np.ndarray | None = None
    for _ in range(rounds + 1):
        d, w = pairs(questions, columns, theta, head)

        def loss(t: np.ndarray, d: np.ndarray = d, w: np.ndarray = w) -> tuple[float, np.ndarray]:
            z = d @ t
            value = float(w @ np.logaddexp(0.0, -z)) + l2 * float((t - prior) @ (t - prior))
            grad = -(d.T @ (w / (1.0 + np.exp(np.clip(z, -50, 50))))) + 2 * l2 * (t - prior)
            return value, grad

        start = prior if theta is None else theta
        res = minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 3000})
        theta = np.asarray(res.x)
    assert theta is not None
    return theta


# -- evaluation over the dumped candidates ------------------------------------------------------------------


def measures(q: Question, ranking: Sequence[str]) -> dict[str, float]:
    if q.dataset == "recall":
        r = ranking.index(q.gold[0]) + 1 if q.gold[0] in ranking else None
        return {"top1": float(r == 1), "top3": float(r is not None and r <= 3), "mrr": 1.0 / r if r else 0.0}
    if q.dataset == "locomo":
        return {"R@5": recall_at_k(ranking, q.gold, 5), "R@10": recall_at_k(ranking, q.gold, 10)}
    return {
        "turn R@5": recall_at_k(ranking, q.gold, 5),
        "turn R@10": recall_at_k(ranking, q.gold, 10),
        "session R@5": session_recall_at_k(ranking, q.sessions, q.gold_sessions, 5),
    }


def learned_order(q: Question, theta: np.ndarray, columns: Sequence[int]) -> list[str]:
    s = q.x[:, columns] @ theta
    return [q.docs[i] for i in sorted(range(len(q.docs)), key=lambda i: (-s[i], q.docs[i]))]


def table(rows: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    return {
        name: {m: round(100 * statistics.fmean([v for v in vals if not math.isnan(v)]), 1) for m, vals in ms.items()}
        for name, ms in rows.items()
    }


def evaluate(questions: Sequence[Question], systems: dict[str, Any], part: str) -> dict[str, Any]:
    """Each set's measures on ``part`` ("train", "held", "confirm") for each system (a function of a question)."""
    out: dict[str, Any] = {}
    for dataset in SETS:
        qs = [q for q in questions if q.dataset == dataset and _part(q) == part]
        if not qs:
            continue
        rows: dict[str, dict[str, list[float]]] = {}
        for name, order in systems.items():
            for q in qs:
                for m, v in measures(q, order(q)).items():
                    rows.setdefault(name, {}).setdefault(m, []).append(v)
        out[dataset] = {"n": len(qs), **table(rows)}
    return out


def _part(q: Question) -> str:
    return str(q.extra.get("part")) if q.dataset == "recall" else ("held" if q.held else "train")


def print_tables(title: str, result: dict[str, Any]) -> None:
    for dataset, rows in result.items():
        print(f"\n== {title}: {dataset} (n={rows['n']})")
        for name, row in rows.items():
            if name != "n":
                print(f"  {name:44s} " + "  ".join(f"{m} {v:5.1f}" for m, v in row.items()))


# -- the engine on the held parts ---------------------------------------------------------------------------


def engine_rows(embedder: CachedEmbedder, scorers: dict[str, LearnedScorer], parts: Sequence[str]) -> dict[str, Any]:
    """The whole search path on the held units: today's rule and learned fusion as searcher variants of one store
    (no bookkeeping), vector only and BM25, via ``bench/recall.py``'s systems."""
    rb.VARIANTS.clear()
    rb.VARIANTS.append(("rule", {}))
    rb.VARIANTS.extend((name, {"fusion": "learned", "scorer": scorer}) for name, scorer in scorers.items())
    out: dict[str, Any] = {}
    keep = ("engramdb, rule", *(f"engramdb, {name}" for name in scorers), "vector only", "bm25")
    rs = load_recall_set()
    for part in parts:
        scores = rb.Scores()
        corpus = rb.recall_corpus(rs, embedder)
        try:
            qs = [
                q
                for q in rs.split("all")
                if (part == "confirm") == (q.split == "confirm")
                and (part == "confirm" or held("recall", q.gold.rsplit("/", 1)[0]))
            ]
            for q, qvec in zip(qs, embedder.embed([q.text for q in qs]), strict=True):
                rankings = rb.systems(corpus, q.text, qvec, 10, scores)
                for system in keep:
                    r = rb.rank_of(rankings[system], q.gold)
                    scores.add(system, "top1", float(r == 1))
                    scores.add(system, "top3", float(r is not None and r <= 3))
                    scores.add(system, "mrr", 1.0 / r if r else 0.0)
        finally:
            corpus.close()
        out[f"recall {part}"] = {s: v for s, v in scores.summary().items() if s in keep}
    if "held" not in parts:
        return out
    scores = rb.Scores()
    for conv in load_locomo():
        if not held("locomo", conv.sample_id):
            continue
        corpus = rb.make_corpus([rb._turn(d) for d in conv.docs], embedder)
        asked = max((t for d in conv.docs if (t := event_time(d.date)) is not None), default=None)
        try:
            for q, qvec in zip(conv.questions, embedder.embed([q.text for q in conv.questions]), strict=True):
                rankings = rb.systems(corpus, q.text, qvec, 10, scores, asked)
                for system in keep:
                    for k in (5, 10):
                        scores.add(system, f"R@{k}", recall_at_k(rankings[system], q.evidence, k))
        finally:
            corpus.close()
    out["locomo held"] = {s: v for s, v in scores.summary().items() if s in keep}
    scores = rb.Scores()
    assert embedder.path is not None
    for item in load_longmemeval(positions=cached_positions(embedder.path, embedder.model_id)):
        if not held("longmemeval", item.question_id):
            continue
        corpus = rb.make_corpus([rb._turn(d) for d in item.docs], embedder)
        session_of = {d.id: d.session for d in item.docs}
        try:
            qvec = embedder.embed([item.text])[0]
            rankings = rb.systems(
                corpus, item.text, qvec, 50, scores, event_time(item.question_date), variants_as_of=False
            )
            for system in keep:
                for k in (5, 10):
                    scores.add(system, f"turn R@{k}", recall_at_k(rankings[system], item.answer_turns, k))
                scores.add(
                    system, "session R@5", session_recall_at_k(rankings[system], session_of, item.answer_sessions, 5)
                )
        finally:
            corpus.close()
    out["longmemeval held"] = {s: v for s, v in scores.summary().items() if s in keep}
    return out


# -- speed --------------------------------------------------------------------------------------------------


def speed(store: Path, agent: str, queries: int) -> dict[str, Any]:
    """Evidence against learned fusion on an existing store (e.g. the 100k one of ``bench/scale_pg.py``'s embedded
    side): two searchers, interleaved question by question, the query vector given (embedding excluded), no
    bookkeeping; wall and CPU (every thread of the process) per search. Then ``mem.search`` (bookkeeping included)
    with the store's default fusion, for scale."""
    import os

    from _retrieval_speed import _latency, _load
    from engramdb import Engram
    from engramdb.retrieval.hybrid import HybridSearcher
    from scale import _unwrapped

    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    with Engram(store, create=False) as mem:
        vectors = mem.embedder.embed(questions)
        inner = _unwrapped(mem.store.search)
        inner.keyword_index.wait()
        inner._index.wait_for_index()
        searchers = {
            "evidence": HybridSearcher(mem.store, mem.embedder, weights=RankingWeights()),
            "learned": HybridSearcher(mem.store, mem.embedder, weights=RankingWeights(fusion="learned")),
        }
        flt = Filter(agent=agent)
        now = datetime.now(UTC)
        wall: dict[str, list[float]] = {k: [] for k in searchers}
        cpu: dict[str, list[float]] = {k: [] for k in searchers}
        for q, v in zip(questions[:20], vectors, strict=False):
            for s in searchers.values():
                s.search(q, flt, limit=10, now=now, touch=False, vector=v)
        load_before = _load()
        for n, (q, v) in enumerate(zip(questions, vectors, strict=True)):
            # Alternating which goes first: the second search of a question finds its rows in the caches.
            for name in sorted(searchers, reverse=n % 2 == 1):
                s = searchers[name]
                c0, t0 = time.process_time(), time.perf_counter()
                s.search(q, flt, limit=10, now=now, touch=False, vector=v)
                wall[name].append((time.perf_counter() - t0) * 1000)
                cpu[name].append((time.process_time() - c0) * 1000)
        whole = []
        for q in questions:
            c0 = time.process_time()
            mem.search(q, agent=agent, limit=10)
            whole.append((time.process_time() - c0) * 1000)
        for s in searchers.values():
            s.close()
        return {
            "store": str(store),
            "memories": mem.count(agent=agent),
            "uses_ann": bool(getattr(inner._index, "uses_ann", False)),
            **{f"searcher {k} wall": _latency(v) for k, v in wall.items()},
            **{f"searcher {k} cpu": _latency(v) for k, v in cpu.items()},
            "mem.search cpu (default fusion)": _latency(whole),
            "load_before": load_before,
            "load_after": _load(),
            "cpus": os.cpu_count(),
        }


# -- main ---------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", action="store_true", help="gather every question's candidates and features first")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--l2", type=float, default=1e-3, help="pull towards --prior-scale x today's rule")
    parser.add_argument("--prior-scale", type=float, default=20.0, help="0: pull towards zero")
    parser.add_argument("--head", type=int, default=20, help="pair only with wrong candidates this high (0: all)")
    parser.add_argument("--rounds", type=int, default=2, help="LambdaRank refits after the first fit")
    parser.add_argument("--loss", default="listwise", choices=("listwise", "pairwise"))
    parser.add_argument("--pairwise-too", action="store_true", help="with --engine: also the pairwise fit's rows")
    parser.add_argument("--features", default="", help="comma-separated subset of FEATURES (default: all)")
    parser.add_argument("--engine", action="store_true", help="also run the whole search path on the held parts")
    parser.add_argument("--confirm", action="store_true", help="with --engine: the recall confirmation split too")
    parser.add_argument("--shipped", action="store_true", help="judge the shipped LEARNED weights, do not fit")
    parser.add_argument("--speed", type=Path, default=None, help="an existing store: evidence vs learned fusion cost")
    parser.add_argument("--speed-agent", default="agent-3")
    parser.add_argument("--speed-queries", type=int, default=150)
    parser.add_argument("--embed-cache", default=str(Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.speed is not None:
        timing = speed(args.speed, args.speed_agent, args.speed_queries)
        print(timing)
        if args.out is not None:
            write_json(args.out, {"date": datetime.now(UTC).isoformat(timespec="seconds"), "speed": timing})
        return 0
    embedder = CachedEmbedder(make_embedder(load_settings()), size=200_000, path=Path(args.embed_cache).expanduser())
    if args.dump or not args.cache.exists():
        started = time.perf_counter()
        questions = dump(embedder)
        args.cache.write_bytes(pickle.dumps(questions))
        print(f"dumped {len(questions)} questions in {time.perf_counter() - started:.0f} s", flush=True)
    questions = pickle.loads(args.cache.read_bytes())
    names = [f.strip() for f in args.features.split(",") if f.strip()] or list(FEATURES)
    columns = [FEATURES.index(n) for n in names]
    if args.shipped:
        theta = np.array([LEARNED.weights[c] for c in columns])
    else:
        prior = np.zeros(len(columns))
        for j, c in enumerate(columns):
            prior[j] = args.prior_scale * {"cosine": 1.0, "coverage": 0.6, "weak_coverage": -0.3}.get(FEATURES[c], 0.0)
        train = [q for q in questions if _part(q) == "train"]
        if args.loss == "listwise":
            theta = fit_listwise(train, columns, args.l2, prior=prior)
        else:
            theta = fit(train, columns, args.l2, head=args.head, rounds=args.rounds, prior=prior)
    full = [0.0] * len(FEATURES)
    for c, v in zip(columns, theta, strict=True):
        full[c] = float(v)
    scale = max(abs(v) for v in full) or 1.0
    weights = tuple(round(v / scale, 4) for v in full)
    print("weights (largest = 1):")
    for n, v in zip(FEATURES, weights, strict=True):
        print(f"  {n:18s} {v:+.4f}")
    cos = FEATURES.index("cosine")
    systems = {
        "learned": lambda q: learned_order(q, theta, columns),
        "today's rule": lambda q: q.rule,
        "vector only": lambda q: q.vector,
        "cosine + 0.6 coverage": lambda q: learned_order(q, np.array([1.0, 0.6]), [cos, FEATURES.index("coverage")]),
    }
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "features": names,
        "l2": args.l2,
        "prior_scale": args.prior_scale,
        "head": args.head,
        "rounds": args.rounds,
        "loss": args.loss,
        "weights": dict(zip(FEATURES, weights, strict=True)),
    }
    other = None
    if args.pairwise_too and not args.shipped:
        # The RankNet / LambdaRank fit of the same features, beside the listwise one.
        other = fit(train, columns, args.l2, head=args.head, rounds=args.rounds, prior=prior)
        full_other = [0.0] * len(FEATURES)
        for c, v in zip(columns, other, strict=True):
            full_other[c] = float(v)
        top = max(abs(v) for v in full_other) or 1.0
        results["weights pairwise"] = {n: round(v / top, 4) for n, v in zip(FEATURES, full_other, strict=True)}
        systems["learned, pairwise"] = lambda q: learned_order(q, other, columns)
    for part in ("train", "held"):
        results[f"fused {part}"] = evaluate(questions, systems, part)
        print_tables(f"fused candidates, {part}", results[f"fused {part}"])
    if args.engine:
        scorers = {"learned": LearnedScorer(weights=weights, source="bench/fit_ranker.py")}
        if other is not None:
            scorers["learned, pairwise"] = LearnedScorer(weights=tuple(results["weights pairwise"].values()))
        results["engine"] = engine_rows(embedder, scorers, ["held", "confirm"] if args.confirm else ["held"])
        for name, rows in results["engine"].items():
            print(f"\n== engine, {name}")
            for system, row in rows.items():
                print(f"  {system:44s} " + "  ".join(f"{m} {v:5.1f}" for m, v in row.items()))
    if args.out is not None:
        write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
