"""Learning under drift (issue 25, item 11): the pure recommend core on decision streams whose world changes in
three shapes, with held-out descriptions asked along the way.

The situations and their descriptions are bench/_learning_data.py's (held-out templates are never seen while
learning); what is new is how the world changes, and the seeds:

* ``abrupt``: every situation's best action changes at once, midway (bench/learning.py's world);
* ``gradual``: the success probabilities blend linearly from the old to the new ones between 30% and 70% of the
  stream (the best action switches where the two lines cross);
* ``recurring``: the old and the new probabilities alternate every quarter of the stream (changes at 25%, 50%,
  75%: the old best action comes back).

Per step: ``recommend.choose`` over the close neighbourhood (the store's search: top ``candidates`` cosines above
the floor), the outcome drawn from the step's probabilities, a decision record added. Every 50 steps, two unseen
descriptions per held-out template of every situation are asked with ``recommend.suggest`` (the shipped rule:
calibration tables, thresholds, the ahead check). Measured:

* held-out **right and given**: recommended and the currently best action, over all questions asked where the best
  action has not changed for 200 steps (``settled``), and **precision**: right among recommended;
* **recovery**: the success rate over the ``steps // 4`` steps after each change of a best action (capped at the
  next change), beside the **oracle**'s (always the best action) on the same steps.

Dev seeds are 200...; ``--held-out`` runs the confirmation seeds 900... (kept for a final look). ``--config`` takes
bench/_learning_rec.py's overrides (``change_z=1.5``, ``recent_horizon=3``, ...) on the shipped tables.

    python bench/learning_drift.py --seeds 2 --steps 1200                 # dev, every shape
    python bench/learning_drift.py --seeds 2 --config change_z=1.5
    python bench/learning_drift.py --held-out --seeds 3                    # the confirmation split
    python bench/learning_drift.py --seeds 3 --config option_exponent=1,learned_horizons=25:10:60
    python bench/learning_drift.py --held-out --seeds 3 --config option_exponent=1 --given-at 0.685
    python bench/learning_drift.py --seeds 8 --config thin_evidence=1.5     # third round's options:
    python bench/learning_drift.py --seeds 8 --config change_cusum=1.5      # Page-Hinkley change test
    python bench/learning_drift.py --seeds 8 --config contrast=2            # soft contrast in suggest
    python bench/learning_drift.py --seeds 8 --config optimism=0.5,change_restore=1   # fourth round's finalist
    python bench/learning_drift.py --merge R1.json D1.json R2.json D2.json \
        --rescore results/learning_calibration_s6_learned_tables.json    # sixth round: dumps stated by other tables
    python bench/learning_drift.py --seeds 3 --config rl_scope=all      # seventh round: run lengths (a posterior)
    python bench/learning_drift.py --merge R1.json D1.json --given-at 0.7           # pooled, scored at a threshold
    python bench/learning_drift.py --seeds 3 --decompose --dump D.json --config change_clock=action  # eighth round
    python bench/_drift_buckets.py 0.685 dev D.json   # the eighth round's buckets: neighbourhood, evidence, stale
    python bench/learning_drift.py --seeds 8 --oracle --decompose --dump D.json    # ninth round: the ceilings
    python bench/learning_drift.py --seeds 8 --oracle --policy oracle-rate   # an oracle chooses (_drift_oracle.py)
    python bench/learning_drift.py --merge R.json D.json --oracle-at since=0.468,rate=0.457   # at dev thresholds

Each summary's ``given_at_95`` is the lowest stated confidence from which the settled recommendations are right 95%
of the time, with right and given / precision there (abstaining to reach the precision target): read it on dev and
score held-out at that threshold with ``--given-at``. ``given_at_95_match`` also abstains where the question's best
match (cosine) is under a floor, the floor that gives the most; ``--dump`` keeps every settled answer.
``--expand K,B`` scores the records against the question moved towards its K closest records (pseudo-relevance
feedback; measured in the bench only, the service has no vectors in ``suggest``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from _drift_losses import diagnose, losses, markdown
from _drift_oracle import ORACLES
from _drift_oracle import answer as oracle_answer
from _drift_oracle import evidence as oracle_evidence
from _drift_oracle import thompson as oracle_thompson
from _drift_rescore import as_table, rescore
from _drift_switch import one_change, switch_table
from _learning_data import SITUATIONS, Situation, fill
from _learning_rec import parse_config
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.learning import recommend as rc
from engramdb.learning.recommend import CALIBRATION, CALIBRATION_POOLED, RecommendConfig
from engramdb.learning.stats import prob_best
from engramdb.models import DecisionRecord

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = ("abrupt", "gradual", "recurring")
#: Steps a best action must have held for a question to count as settled.
SETTLED = 200
ASK_EVERY = 50


@dataclass(frozen=True)
class DriftStep:
    situation: Situation
    context: str
    draw: float
    #: The success probability of each action at this step.
    probs: dict[str, float]


def weight_after(shape: str, i: int, steps: int) -> float:
    """How much of the new world holds at step ``i`` (0: the old probabilities, 1: the new)."""
    if shape == "abrupt":
        return float(i >= steps // 2)
    if shape == "gradual":
        start, end = 0.3 * steps, 0.7 * steps
        return min(1.0, max(0.0, (i - start) / (end - start)))
    if shape == "recurring":
        return float((i * 4 // steps) % 2 == 1)
    raise ValueError(f"unknown shape {shape!r}")


def probs_at(s: Situation, shape: str, i: int, steps: int) -> dict[str, float]:
    t = weight_after(shape, i, steps)
    return {a: (1 - t) * s.before[a] + t * s.after[a] for a in s.before}


def best_of(probs: dict[str, float]) -> str:
    return max(probs, key=lambda a: probs[a])


def make_drift_stream(seed: int, steps: int, shape: str) -> list[DriftStep]:
    rng = random.Random(seed * 7919 + SHAPES.index(shape))
    out = []
    for i in range(steps):
        s = rng.choice(SITUATIONS)
        out.append(DriftStep(s, fill(rng.choice(s.train), rng), rng.random(), probs_at(s, shape, i, steps)))
    return out


def questions(seed: int, per_template: int = 2) -> list[tuple[Situation, str]]:
    rng = random.Random(seed + 50_000)
    return [(s, fill(t, rng)) for s in SITUATIONS for t in s.held_out for _ in range(per_template)]


def change_points(shape: str, steps: int, s: Situation) -> list[int]:
    """Steps at which ``s``'s best action changes."""
    bests = [best_of(probs_at(s, shape, i, steps)) for i in range(steps)]
    return [i for i in range(1, steps) if bests[i] != bests[i - 1]]


#: The newest assessment ``suggest`` made (kept by :func:`_keeping`, so the bench need not judge twice).
_KEPT: list[rc.Assessment] = []
_assess = rc.assess


def _keeping(*args: Any, **kwargs: Any) -> rc.Assessment:
    judged = _assess(*args, **kwargs)
    _KEPT[:] = [judged]
    return judged


rc.assess = _keeping  # suggest looks assess up in its module at each call


def run_stream(
    embedder: Embedder,
    seed: int,
    steps: int,
    shape: str,
    config: RecommendConfig,
    exploration: float,
    expand: tuple[int, float] | None = None,
    decompose: bool = False,
    choose_config: RecommendConfig | None = None,
    oracles: bool = False,
    policy: str = "shipped",
) -> dict[str, Any]:
    stream = make_drift_stream(seed, steps, shape)
    # Per situation, every (step, action, success, rates) so far: the oracles' evidence (bench/_drift_oracle.py).
    history: dict[str, list[tuple[int, str, bool, dict[str, float]]]] = {s.name: [] for s in SITUATIONS}
    oracle_rng = np.random.default_rng(seed * 7919 + SHAPES.index(shape))

    def last_change(sit: Situation, i: int) -> int:
        return max([0, *(c for c in changes[sit.name] if c <= i)])

    def held(sit: Situation, i: int, kind: str) -> dict[str, tuple[float, float]]:
        probs = probs_at(sit, shape, i, steps)
        return oracle_evidence(sit.options, history[sit.name], kind=kind, now_probs=probs, since=last_change(sit, i))

    asked = questions(seed)
    texts = list(dict.fromkeys([st.context for st in stream] + [t for _, t in asked]))
    vec = dict(zip(texts, embedder.embed(texts), strict=True))
    matrix = np.zeros((steps, len(vec[texts[0]])), dtype=np.float32)
    records: list[DecisionRecord] = []
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    floor = config.similarity_floor if config.pool_floor is None else min(config.similarity_floor, config.pool_floor)

    def neighbours(text: str, n: int) -> list[rc.Neighbour]:
        if n == 0:
            return []
        cos = matrix[:n] @ vec[text]
        if expand is not None:
            # Pseudo-relevance feedback (measured, needs the records' vectors): the query moved towards the mean of
            # its ``expand[0]`` closest records, by ``expand[1]``, and the records scored against that.
            top = np.argsort(-cos)[: expand[0]]
            q = vec[text] + expand[1] * matrix[top].mean(axis=0)
            cos = matrix[:n] @ (q / np.linalg.norm(q))
        k = min(config.candidates, n)
        idx = np.argpartition(-cos, k - 1)[:k]
        return [rc.Neighbour(records[i], float(cos[i])) for i in idx if cos[i] > floor]

    successes: list[bool] = []
    answers: list[dict[str, Any]] = []
    changes = {s.name: change_points(shape, steps, s) for s in SITUATIONS}
    # Each record's true situation (the decomposition's oracle matching reads it; the learner never does).
    owner: list[str] = []
    for i, step in enumerate(stream):
        now = t0 + timedelta(seconds=i)
        if i and i % ASK_EVERY == 0:
            told_by = {
                (sit.name, kind): oracle_answer(held(sit, i, kind), oracle_rng)
                for sit in SITUATIONS
                for kind in (ORACLES if oracles else ())
            }
            for sit, text in asked:
                probs = probs_at(sit, shape, i, steps)
                since = i - max([0, *(c for c in changes[sit.name] if c <= i)])
                nb_q = neighbours(text, i)
                s = rc.suggest(text, nb_q, now=now, config=config, seed=seed, options=sit.options)
                judged = _KEPT[-1]
                answer = {
                    "seed": seed,
                    "shape": shape,
                    "step": i,
                    "settled": since >= SETTLED,
                    "right": best_of(probs),
                    "given": s.recommended,
                    "confidence": s.confidence,
                    # The question's best match among the records (the situation-match margin's input).
                    "match": max((n.cosine for n in nb_q), default=0.0),
                    # What suggest judged on, so the answer can be scored again with other tables (--rescore).
                    "a_top": judged.ranked[0].action if judged.ranked else None,
                    "a_long": judged.long,
                    "a_recent": judged.recent,
                    "a_evidence": judged.evidence,
                    "a_pooled": judged.pooled,
                }
                for kind in ORACLES if oracles else ():
                    answer[f"o_{kind}_top"], answer[f"o_{kind}_conf"] = told_by[(sit.name, kind)]
                if oracles:
                    # The oracles' statistic on the rule's own posteriors: P(its top option is the best of all).
                    answer["a_pbest"] = (
                        float(prob_best(judged.ranked, rng=oracle_rng, draws=2000)[0]) if judged.ranked else 0.0
                    )
                if decompose and since >= SETTLED:
                    last = max([0, *(c for c in changes[sit.name] if c <= i)])
                    answer.update(
                        diagnose(
                            probs=probs,
                            top=s.options[0].action if s.options else None,
                            n_since=sum(owner[j] == sit.name for j in range(last, i)),
                            old_best=best_of(probs_at(sit, shape, last - 1, steps)) if last else None,
                        )
                    )
                    own = [n for n in nb_q if owner[int(n.record.id)] == sit.name]
                    told = rc.suggest(text, own, now=now, config=config, seed=seed, options=sit.options)
                    answer["own_top"] = told.options[0].action if told.options else None
                    answer["own_given"] = told.recommended
                    answer["own_confidence"] = told.confidence
                answers.append(answer)
        if policy == "shipped":
            action = rc.choose(
                step.context,
                step.situation.options,
                neighbours(step.context, i),
                now=now,
                config=config if choose_config is None else choose_config,
                seed=seed + i,
                exploration=exploration,
            )
        else:
            action = oracle_thompson(held(step.situation, i, policy.removeprefix("oracle-")), oracle_rng)
        successes.append(step.draw < step.probs[action])
        history[step.situation.name].append((i, action, successes[-1], step.probs))
        records.append(
            DecisionRecord(
                id=str(i),
                agent="bench",
                context=step.context,
                action=action,
                success=float(successes[-1]),
                at=now,
                alternatives=tuple(step.situation.options),
            )
        )
        matrix[i] = vec[step.context]
        owner.append(step.situation.name)
    # Recovery: per situation, the steps of that situation within steps // 4 after each of its changes.
    window = steps // 4
    got: list[float] = []
    oracle: list[float] = []
    switches = []
    for sit in SITUATIONS:
        cps = changes[sit.name]
        for k, c in enumerate(cps):
            end = min(c + window, cps[k + 1] if k + 1 < len(cps) else steps)
            visits = [i for i in range(c, end) if stream[i].situation is sit]
            for i in visits:
                got.append(float(successes[i]))
                oracle.append(max(stream[i].probs.values()))
            switches.append(
                one_change(
                    [records[i].action for i in visits],
                    [stream[i].probs for i in visits],
                    old=best_of(probs_at(sit, shape, c - 1, steps)),
                    new=best_of(probs_at(sit, shape, c, steps)),
                )
            )
    return {"successes": successes, "answers": answers, "recovery": got, "oracle": oracle, "switches": switches}


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    settled = [a for r in runs for a in r["answers"] if a["settled"]]
    given = [a for a in settled if a["given"] is not None]
    right = [a for a in given if a["given"] == a["right"]]
    every = [a for r in runs for a in r["answers"]]
    every_given = [a for a in every if a["given"] is not None]
    rec = [x for r in runs for x in r["recovery"]]
    orc = [x for r in runs for x in r["oracle"]]
    return {
        "questions": len(settled),
        "right_and_given": 100 * len(right) / max(1, len(settled)),
        "precision": 100 * len(right) / max(1, len(given)),
        "whole_right_and_given": 100 * sum(a["given"] == a["right"] for a in every_given) / max(1, len(every)),
        "whole_precision": 100 * sum(a["given"] == a["right"] for a in every_given) / max(1, len(every_given)),
        "recovery": 100 * statistics.fmean(rec) if rec else float("nan"),
        # Counts, so rows of several processes (seed groups, shapes) can be pooled (bench/_drift_losses.py's merge).
        "recovery_n": len(rec),
        "success_n": sum(len(r["successes"]) for r in runs),
        "oracle_recovery": 100 * statistics.fmean(orc) if orc else float("nan"),
        "success": 100 * statistics.fmean(x for r in runs for x in r["successes"]),
        # How the learner switches after a change, beside the oracle (bench/_drift_switch.py).
        "switch": switch_table([c for r in runs for c in r.get("switches", [])]),
        **{f"at_{t:g}": _at_threshold(settled, t) for t in THRESHOLDS},
        "given_at_95": _given_at_precision(settled, 0.95),
        "given_at_95_match": _given_at_precision_and_match(settled, 0.95),
        **(_losses(settled) if settled and "p1" in settled[0] else {}),
        **_oracle_rows(settled),
    }


def _oracle_rows(settled: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each oracle's right and given / precision (its top option always given) and at 95% precision (its P(best)
    as the stated confidence), on the same settled questions (bench/_drift_oracle.py)."""
    out: dict[str, Any] = {}
    if not settled or "o_since_top" not in settled[0]:
        return out
    for kind in [*ORACLES, "pbest"]:
        top, conf = ("a_top", "a_pbest") if kind == "pbest" else (f"o_{kind}_top", f"o_{kind}_conf")
        told = [{**a, "given": a[top], "confidence": a[conf]} for a in settled if conf in a]
        if not told:
            continue
        right = 100 * sum(a["given"] == a["right"] for a in told) / len(told)
        out[f"oracle_{kind}"] = f"{right:.1f} / {right:.1f}"
        out[f"oracle_{kind}_at_95"] = _given_at_precision(told, 0.95)
        if kind in ORACLE_AT:
            out[f"oracle_{kind}_at_{ORACLE_AT[kind]:g}"] = _at_threshold(told, ORACLE_AT[kind])
    return out


#: Thresholds read on dev at which the oracles' answers are scored too (``--oracle-at``; ``pbest``: P(best) on the
#: rule's own posteriors).
ORACLE_AT: dict[str, float] = {}


def _losses(settled: Sequence[dict[str, Any]], at95: float | None = None) -> dict[str, Any]:
    """The loss decomposition (bench/_drift_losses.py) at the shipped rule and at the 95%-precision threshold (of
    these answers, or ``at95``: the pooled row's, so the shapes' rows decompose the pooled figure)."""
    at95 = float(_given_at_precision(settled, 0.95).split(":")[0]) if at95 is None else at95
    return {"losses": losses(settled), "losses_at_95": losses(settled, at95)}


#: Stated confidences at which the settled questions are scored again (the shipped rule recommends from 0.5).
THRESHOLDS = [0.6, 0.7, 0.8, 0.9]


def _at_threshold(settled: Sequence[dict[str, Any]], t: float) -> str:
    """Right and given / precision (%) when only recommendations stated at ``t`` or more are given."""
    given = [a for a in settled if a["given"] is not None and a["confidence"] >= t]
    right = sum(a["given"] == a["right"] for a in given)
    return f"{100 * right / max(1, len(settled)):.1f} / {100 * right / max(1, len(given)):.1f}"


def _given_at_precision(settled: Sequence[dict[str, Any]], target: float) -> str:
    """The lowest stated confidence from which the settled recommendations are right ``target`` of the time, and
    right and given / precision (%) when only those are given: what abstaining buys (fitted on the answers scored:
    read it on dev, then apply the dev threshold to held-out with ``--given-at``)."""
    given = sorted((a for a in settled if a["given"] is not None), key=lambda a: -a["confidence"])
    best, right = 1.0, 0
    ok_right = 0
    for k, a in enumerate(given, 1):
        right += a["given"] == a["right"]
        if right / k >= target and (k == len(given) or given[k]["confidence"] < a["confidence"]):
            best, ok_right = a["confidence"], right
    n_given = sum(a["confidence"] >= best for a in given)
    return f"{best:.3f}: {100 * ok_right / max(1, len(settled)):.1f} / {100 * ok_right / max(1, n_given):.1f}"


#: Floors on the question's best match (cosine) tried beside the confidence threshold.
MATCH_FLOORS = [round(0.3 + 0.05 * k, 2) for k in range(11)]


def _given_at_precision_and_match(settled: Sequence[dict[str, Any]], target: float) -> str:
    """As :func:`_given_at_precision`, also abstaining where the question's best match is under a floor: the floor
    (of :data:`MATCH_FLOORS`) that gives the most right and given at ``target`` precision, with its confidence
    threshold (fitted on the answers scored, like ``given_at_95``)."""
    best = (-1.0, "")
    for floor in MATCH_FLOORS:
        kept = [a if a.get("match", 1.0) >= floor else {**a, "given": None} for a in settled]
        text = _given_at_precision(kept, target)
        score = float(text.split(": ")[1].split(" / ")[0])
        if score > best[0]:
            best = (score, f"match {floor:.2f}, {text}")
    return best[1]


def _rounded(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in summary.items()}


def merge(
    reports: Sequence[Path], dumps: Sequence[Path], tables: Path | None = None, seeds: set[int] | None = None
) -> dict[str, Any]:
    """Rows of several processes (seed groups or shapes run side by side) pooled: the settled answers from their
    ``--dump`` files, recovery and success weighted by their counts. ``tables``: a calibration report of
    ``bench/learning.py --calibrate`` whose fitted tables state the confidence instead (bench/_drift_rescore.py).
    ``seeds``: only these seeds' answers (recovery and success stay the reports')."""
    answers = [a for d in dumps for a in json.loads(d.read_text(encoding="utf-8"))]
    if seeds is not None:
        answers = [a for a in answers if a["seed"] in seeds]
    if tables is not None:
        fitted = json.loads(tables.read_text(encoding="utf-8"))
        answers = rescore(
            answers,
            close=as_table(fitted["fitted_table"]),
            pooled=as_table(fitted["fitted_pooled_table"]),
            config=RecommendConfig(),
        )
    parts = [(shape, row) for r in reports for shape, row in json.loads(r.read_text())["shapes"].items()]
    out: dict[str, Any] = {}
    for shape in [*dict.fromkeys(s for s, _ in parts), "all"]:
        rows = [row for s, row in parts if shape in (s, "all")]
        settled = [a for a in answers if shape in (a["shape"], "all")]
        pooled = summarise([{"answers": settled, "recovery": [], "oracle": [], "successes": [0.0]}])
        for key in ("whole_right_and_given", "whole_precision"):
            del pooled[key]  # the dumps keep settled answers only
        pooled["recovery_n"] = sum(r["recovery_n"] for r in rows)
        pooled["success_n"] = sum(r["success_n"] for r in rows)
        for key in ("recovery", "oracle_recovery"):
            pooled[key] = sum(r[key] * r["recovery_n"] for r in rows) / max(1, sum(r["recovery_n"] for r in rows))
        pooled["success"] = sum(r["success"] * r["success_n"] for r in rows) / max(1, sum(r["success_n"] for r in rows))
        pooled["seeds"] = sorted({a["seed"] for a in settled})
        out[shape] = _rounded(pooled)
    if "p1" in answers[0]:
        at95 = float(out["all"]["given_at_95"].split(":")[0])
        for shape, row in out.items():
            row.update(_losses([a for a in answers if shape in (a["shape"], "all")], at95))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--held-out", action="store_true", help="the confirmation seeds (900...), not dev (200...)")
    parser.add_argument("--first-seed", type=int, default=None, help="start the seeds here instead")
    parser.add_argument("--config", default="", help="RecommendConfig overrides (bench/_learning_rec.py's syntax)")
    parser.add_argument("--exploration", type=float, default=None, help="default: the exploration setting")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--expand", default=None, help="K,BETA: pseudo-relevance feedback on the neighbours")
    parser.add_argument("--given-at", type=float, default=None, help="also score giving only from this confidence")
    parser.add_argument("--dump", type=Path, default=None, help="write every settled answer here (JSON)")
    parser.add_argument(
        "--decompose", action="store_true", help="put every lost settled question in a bucket (bench/_drift_losses.py)"
    )
    parser.add_argument("--oracle", action="store_true", help="also answer by the ceilings' oracles")
    parser.add_argument("--oracle-at", default="", help="KIND=T,...: also score these oracles from these thresholds")
    parser.add_argument(
        "--policy", default="shipped", choices=["shipped", *(f"oracle-{k}" for k in ORACLES)], help="who chooses"
    )
    parser.add_argument("--suggest-only", action="store_true", help="--config for suggest only; choose as shipped")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, help="REPORT DUMP ...: pool rows, then stop")
    parser.add_argument("--rescore", type=Path, default=None, help="--merge: state confidence by these fitted tables")
    parser.add_argument("--only-seeds", default=None, help="--merge: only these seeds' answers (1,2,...)")
    args = parser.parse_args(argv)
    if args.given_at is not None:
        THRESHOLDS.append(args.given_at)
    ORACLE_AT.update({k: float(v) for k, v in (x.split("=") for x in args.oracle_at.split(",") if x)})
    if args.merge is not None:
        only = None if args.only_seeds is None else {int(x) for x in args.only_seeds.split(",")}
        pooled = merge(args.merge[0::2], args.merge[1::2], args.rescore, only)
        for shape, row in pooled.items():
            print(f"{shape:9s} {json.dumps({k: v for k, v in row.items() if not k.startswith('losses')})}")
        for key in ("losses", "losses_at_95"):
            print(f"\n{key}:\n{markdown([(k, v[key]) for k, v in pooled.items() if key in v])}")
        if args.output is not None:
            args.output.write_text(json.dumps(pooled, indent=2) + "\n", encoding="utf-8")
        return 0
    cfg = replace(parse_config(args.config), calibration=CALIBRATION, pooled_calibration=CALIBRATION_POOLED)
    # --suggest-only: the decisions (and so the records, recovery and success) are the shipped rule's; only what
    # suggest says follows --config.
    shipped = replace(parse_config(""), calibration=CALIBRATION, pooled_calibration=CALIBRATION_POOLED)
    choose_cfg = shipped if args.suggest_only else None
    exploration = load_settings({}).exploration if args.exploration is None else args.exploration
    embedder = make_embedder(load_settings({}))
    first = (900 if args.held_out else 200) if args.first_seed is None else args.first_seed
    seeds = range(first, first + args.seeds)
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "split": "held-out" if args.held_out else "dev",
        "seeds": list(seeds),
        "steps": args.steps,
        "config": args.config,
        "suggest_only": args.suggest_only,
        "policy": args.policy,
        "exploration": exploration,
        "shapes": {},
    }
    expand = None if args.expand is None else (int(args.expand.split(",")[0]), float(args.expand.split(",")[1]))
    report["expand"] = args.expand
    all_runs = []
    for shape in args.shapes.split(","):
        started = time.perf_counter()
        runs = [
            run_stream(
                embedder,
                seed,
                args.steps,
                shape,
                cfg,
                exploration,
                expand,
                decompose=args.decompose,
                choose_config=choose_cfg,
                oracles=args.oracle,
                policy=args.policy,
            )
            for seed in seeds
        ]
        all_runs += runs
        report["shapes"][shape] = summarise(runs)
        print(
            f"{shape:9s} {json.dumps(_rounded(report['shapes'][shape]))} ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    report["all"] = summarise(all_runs)
    if args.dump is not None:
        args.dump.write_text(json.dumps([a for r in all_runs for a in r["answers"] if a["settled"]]) + "\n")
    print(f"{'all':9s} {json.dumps(_rounded(report['all']))}")
    if args.decompose:
        for key in ("losses", "losses_at_95"):
            rows = [(k, v[key]) for k, v in [*report["shapes"].items(), ("all", report["all"])] if key in v]
            print(f"\n{key}:\n{markdown(rows)}")
    out = args.output or RESULTS / f"learning_drift_{report['split']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
