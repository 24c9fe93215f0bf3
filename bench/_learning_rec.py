"""The pure simulation behind ``python bench/learning.py --calibrate``: the decision streams of bench/learning.py
through the recommend module alone (no store), to fit the calibration tables on the *dev* streams (seeds 100...)
and score the recommendation rules on the *test* streams (seeds 0...).

Every held-out question is kept with what each rule needs (:class:`SimAnswer`): the top option's lead on its whole
record and in the recent view, its weighted outcomes, and, where the close neighbourhood is thin, the wider
neighbourhood's answer. A rule is then a function of an answer: (confidence, recommended option) or nothing.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _learning_data import Situation, Step, held_out_queries, make_stream
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.learning.recommend import CALIBRATION, CALIBRATION_POOLED, RecommendConfig, calibrated
from engramdb.learning.stats import ChangePoints, ChangeRule, RunLengths

AGENT = "bench"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
Table = tuple[tuple[float, tuple[tuple[float, float], ...]], ...]

#: The calibration table and rule before H-REC (issue 12): the long-horizon lead of the top option, calibrated per
#: evidence band. Kept here so every run measures the old rule beside the new one on the same answers.
CALIBRATION_BEFORE: Table = (
    (
        0.0,
        ((0.0, 0.0), (0.49, 0.24), (0.52, 0.36), (0.53, 0.56), (0.55, 0.62), (0.58, 0.66), (0.62, 0.76), (0.68, 0.83)),
    ),
    (1.0, ((0.0, 0.0), (0.51, 0.30), (0.55, 0.63), (0.59, 0.75), (0.61, 0.85), (0.68, 0.90), (0.71, 0.93))),
    (3.0, ((0.0, 0.0), (0.54, 0.56), (0.66, 0.74), (0.73, 0.87), (0.76, 0.91), (0.83, 0.94))),
    (
        10.0,
        (
            (0.0, 0.0),
            (0.53, 0.04),
            (0.61, 0.15),
            (0.67, 0.19),
            (0.71, 0.35),
            (0.77, 0.56),
            (0.81, 0.69),
            (0.83, 0.77),
            (0.86, 0.90),
        ),
    ),
)
BEFORE_RULE = RecommendConfig(
    recent_horizon=None,
    calibration=CALIBRATION_BEFORE,
    min_evidence=1.0,
    pool_floor=None,
    min_confidence=0.7,
    ahead_margin=None,
)
#: The rule of H-REC session 2 (issue 12): today's tables, a threshold of 0.7 and no check that the top option is
#: ahead on its record. Measured beside the shipped rule (0.5 with the check) on the same answers.
PREVIOUS_RULE = RecommendConfig(min_confidence=0.7, ahead_margin=None)
#: The rule of issue 12's third session, shipped until the fifth: today's tables and threshold, ahead margin 0.025.
THIRD_RULE = RecommendConfig(ahead_margin=0.025)
#: The overrides that turn the shipped config into each older rule (for the store run's same-store A/B).
RULE_FIELDS = (
    "recent_horizon",
    "calibration",
    "min_evidence",
    "pool_floor",
    "min_confidence",
    "ahead_margin",
)


OPTION_CHANGE = "engramdb, change test with horizon 150, effective counts (option)"
#: The recovery A/B: issue 12's fifth session's candidate, the change test on weights with a longer memory of its
#: own and effective counts (``ChangeRule(horizon=150, effective_n=True)``), beside the default on the same stream
#: and on the multi-step episodes. (The fourth session's option, ``ChangeRule(undiscounted=True, effective_n=True)``,
#: is in bench/RESULTS.md.)
OPTION_CHANGE_RULE = ChangeRule(horizon=150.0, effective_n=True)


@dataclass
class SimAnswer:
    """One held-out question asked before step ``step``: the right action, and what the rules see."""

    step: int
    right: str
    changed: bool
    #: The close neighbourhood: top option, its weighted outcomes, its lead on the record and in the recent view.
    top: str
    evidence: float
    raw_long: float
    raw_recent: float
    #: The wider neighbourhood's answer (top, weighted outcomes, raw confidence) where the close one is thin.
    pooled: tuple[str, float, float] | None = None
    #: The wider neighbourhood's top option's lead on its whole record (for the ahead check).
    pooled_long: float | None = None

    @property
    def raw(self) -> float:
        """The raw confidence of the shipped rule's close view."""
        return min(self.raw_long, self.raw_recent)


@dataclass
class SimResult:
    successes: list[bool] = field(default_factory=list)
    answers: list[SimAnswer] = field(default_factory=list)


def _embed_all(embedder: Embedder, texts: Sequence[str]) -> dict[str, Any]:
    unique = list(dict.fromkeys(texts))
    vectors = embedder.embed(unique)
    return dict(zip(unique, vectors, strict=True))


def simulate(
    embedder: Embedder,
    stream: Sequence[Step],
    queries: Sequence[tuple[Situation, str]],
    *,
    config: RecommendConfig,
    seed: int,
    exploration: float,
    checkpoints: Sequence[int] = (),
    store_seeding: bool = False,
) -> SimResult:
    """The decision stream through the pure recommend module (no store): what ``choose`` and ``suggest`` do,
    with the same similarity search (top ``candidates`` cosines above the floor), in a fraction of the time.

    ``store_seeding``: ``choose`` gets ``seed`` itself, as the store run's ``learning_seed``, so the simulation
    makes the store run's choices, outcomes and answers exactly (issue 12, sixth session: checked on the test
    streams). Without it each step gets ``seed + i``: another realisation of the same stream, which the
    calibration tables were fitted on."""
    import numpy as np

    from engramdb.learning import recommend as rc
    from engramdb.models import DecisionRecord

    vec = _embed_all(embedder, [s.context for s in stream] + [t for _, t in queries])
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    records: list[DecisionRecord] = []
    matrix = np.zeros((len(stream), len(next(iter(vec.values())))), dtype=np.float32)
    out = SimResult()
    marks = set(checkpoints)
    floor = config.similarity_floor if config.pool_floor is None else min(config.similarity_floor, config.pool_floor)

    def neighbours(text: str, n: int) -> list[rc.Neighbour]:
        if n == 0:
            return []
        cos = matrix[:n] @ vec[text]
        k = min(config.candidates, n)
        idx = np.argpartition(-cos, k - 1)[:k]
        return [rc.Neighbour(records[i], float(cos[i])) for i in idx if cos[i] > floor]

    close = replace(config, pool_floor=None)

    def ask(i: int, now: datetime) -> None:
        # Asked before step i: the world has changed for questions after the midpoint (the benchmark asks its
        # "before the change" questions at the midpoint itself).
        changed = i > len(stream) // 2
        for sit, text in queries:
            nb = neighbours(text, i)
            local = rc.assess(text, nb, now=now, config=close, seed=seed, options=sit.options)
            answer = SimAnswer(
                i,
                sit.best(changed),
                changed,
                local.ranked[0].action,
                local.evidence,
                local.long,
                local.recent,
            )
            if config.pool_floor is not None and local.evidence < config.min_evidence - 1e-3:
                wide = rc.assess(text, nb, now=now, config=config, seed=seed, options=sit.options)
                if wide.pooled:
                    answer.pooled = (wide.ranked[0].action, wide.evidence, wide.raw)
                    answer.pooled_long = wide.long
            out.answers.append(answer)

    for i, step in enumerate(stream):
        now = t0 + timedelta(seconds=i)
        if i in marks:
            ask(i, now)
        nb = neighbours(step.context, i)
        opts = step.situation.options
        draw_seed = seed if store_seeding else seed + i
        action = rc.choose(step.context, opts, nb, now=now, config=config, seed=draw_seed, exploration=exploration)
        probs = step.situation.after if step.changed else step.situation.before
        success = step.draw < probs[action]
        out.successes.append(success)
        records.append(
            DecisionRecord(
                id=str(i),
                agent=AGENT,
                context=step.context,
                action=action,
                success=float(success),
                at=now,
                alternatives=tuple(opts),
            )
        )
        matrix[i] = vec[step.context]
    if len(stream) in marks:
        ask(len(stream), t0 + timedelta(seconds=len(stream)))
    return out


def _isotonic(points: Sequence[tuple[float, bool]], bins: int = 10) -> list[tuple[float, float]]:
    """Knots of a monotone map raw -> share right: equal-count bins, pooled adjacent violators."""
    pts = sorted(points)
    if not pts:
        return [(0.0, 0.0), (1.0, 1.0)]
    size = max(1, len(pts) // bins)
    blocks = [list(pts[i : i + size]) for i in range(0, len(pts), size)]
    stats = [[statistics.fmean(p[0] for p in b), sum(p[1] for p in b), len(b)] for b in blocks]
    merged: list[list[float]] = []
    for st in stats:
        merged.append(list(st))
        # Pooled on the smoothed rates, so that the knots rise after smoothing too (a tiny last bin cannot dip).
        while len(merged) > 1 and (merged[-2][1] + 1) / (merged[-2][2] + 2) > (merged[-1][1] + 1) / (merged[-1][2] + 2):
            b = merged.pop()
            a = merged.pop()
            n = a[2] + b[2]
            merged.append([(a[0] * a[2] + b[0] * b[2]) / n, a[1] + b[1], n])
    # Rates are Beta(1, 1)-smoothed so that no knot claims certainty from a finite sample.
    return [(0.0, 0.0)] + [(round(x, 3), round((s + 1) / (n + 2), 3)) for x, s, n in merged]


def calibration_points(steps: int) -> list[int]:
    """Where the simulation asks its held-out questions: early, every 50 steps, at the change and at the end."""
    return sorted({4, 8, 16, 32, *range(50, steps, 50), steps // 2, steps})


def run_simulations(
    embedder: Embedder,
    seeds: Sequence[int],
    steps: int,
    config: RecommendConfig,
    *,
    store_seeding: bool = False,
    exploration: float | None = None,
) -> tuple[list[dict[str, float]], list[SimAnswer]]:
    """The pure simulation on ``seeds``: each stream's success figures, and every held-out question's answer.
    ``store_seeding`` (see :func:`simulate`) also asks the store run's questions (six per template, not two).
    ``exploration``: ``choose``'s (None: the setting's default, as the store run)."""
    if exploration is None:
        exploration = load_settings().exploration  # the environment too, as the store run's Engram
    answers: list[SimAnswer] = []
    runs = []
    for seed in seeds:
        stream = make_stream(seed, steps)
        queries = held_out_queries(seed) if store_seeding else held_out_queries(seed, per_template=2)
        res = simulate(
            embedder,
            stream,
            queries,
            config=config,
            seed=seed,
            exploration=exploration,
            checkpoints=calibration_points(steps),
            store_seeding=store_seeding,
        )
        answers += res.answers
        half, window = steps // 2, steps // 4
        runs.append(
            {
                "success": statistics.fmean(res.successes),
                "recovery": statistics.fmean(res.successes[half : half + window]),
                "before": statistics.fmean(res.successes[:half]),
                "settled_before": statistics.fmean(res.successes[half // 2 : half]),
                "after": statistics.fmean(res.successes[half:]),
            }
        )
    return runs, answers


BANDS = (0.0, 0.5, 1.0, 3.0, 10.0)


def fit_table(points: Sequence[tuple[float, float, bool]], bands: Sequence[float] = BANDS) -> Table:
    """A calibration table (see ``CALIBRATION`` in learning/recommend.py) from (evidence, raw, right) points."""
    table = []
    for lo, hi in zip(bands, (*bands[1:], float("inf")), strict=True):
        pts = [(raw, right) for ev, raw, right in points if lo <= ev < hi]
        if len(pts) >= 50:
            table.append((lo, tuple(_isotonic(pts))))
    if not table and points:  # too few for bands: one table for all
        table.append((0.0, tuple(_isotonic([(raw, right) for _, raw, right in points]))))
    return tuple(table)


def fit_calibration(answers: Sequence[SimAnswer]) -> tuple[Table, Table]:
    """The close view's table (every question), and the pooled view's (questions the wider neighbourhood answers)."""
    close = fit_table([(a.evidence, a.raw, a.top == a.right) for a in answers])
    pooled = fit_table([(a.pooled[1], a.pooled[2], a.pooled[0] == a.right) for a in answers if a.pooled], (0.0,))
    return close, pooled


def not_ahead_report(answers: Sequence[SimAnswer], config: RecommendConfig) -> dict[str, Any]:
    """Top options (with at least ``min_evidence``) that their record does not put ahead (lead at most
    ``0.5 + ahead_margin``), which the shipped rule never recommends: how many, how often such a top option was the
    right action anyway, and the confidence stated for them (the lead-based table, and the shipped one: at most the
    lead less the margin)."""
    margin = config.ahead_margin or 0.0
    rows = [a for a in answers if a.evidence >= config.min_evidence - 1e-3 and a.raw_long <= 0.5 + margin]
    table = [calibrated(a.raw, a.evidence, config.calibration) for a in rows]
    return {
        "questions": len(rows),
        "right": statistics.fmean(a.top == a.right for a in rows) if rows else None,
        "stated_by_table": statistics.fmean(table) if rows else None,
        "stated": statistics.fmean(min(c, a.raw_long - margin) for c, a in zip(table, rows, strict=True))
        if rows
        else None,
    }


#: A rule: the confidence it states and the option it would recommend, or None when it stays silent.
Rule = Callable[[SimAnswer], tuple[float, str] | None]


def make_rule(close: Table | None, pooled: Table | None, config: RecommendConfig, *, long_only: bool = False) -> Rule:
    """The rule of :func:`engramdb.learning.recommend.suggest` with these tables and ``config``'s ahead check, on a
    kept answer."""
    slack = 1e-3
    margin = config.ahead_margin

    def rule(a: SimAnswer) -> tuple[float, str] | None:
        if a.evidence < config.min_evidence - slack or a.evidence <= 0.0:
            if config.pool_floor is None or a.pooled is None or a.pooled[1] < config.min_evidence - slack:
                return None
            if margin is not None and (a.pooled_long if a.pooled_long is not None else a.pooled[2]) <= 0.5 + margin:
                return None
            conf = calibrated(a.pooled[2], a.pooled[1], pooled)
            return (conf, a.pooled[0]) if conf >= config.pooled_min_confidence else None
        if margin is not None and a.raw_long <= 0.5 + margin:
            return None
        conf = calibrated(a.raw_long if long_only else a.raw, a.evidence, close)
        return (conf, a.top) if conf >= config.min_confidence else None

    return rule


def score_rule(answers: Sequence[SimAnswer], rule: Rule, *, steps: int) -> dict[str, Any]:
    """Coverage, precision and right recommendations of a rule at the benchmark's points (the change and the end:
    settled stretches, what the issue measures), over the whole stream, in the quarter after the change, and on
    the first questions (steps 4-32, where the wider neighbourhood answers most); and the calibration: stated
    confidence against the share right, by confidence bucket (whole stream)."""
    half = steps // 2
    parts = {
        "settled": lambda a: a.step in (half, steps),
        "whole": lambda a: True,
        "after_change": lambda a: half < a.step <= half + steps // 4,
        "early": lambda a: a.step <= 32,
    }
    decided = [(a, rule(a)) for a in answers]
    out: dict[str, Any] = {}
    for name, keep in parts.items():
        rows = [(a, r) for a, r in decided if keep(a)]
        made = [(a, r) for a, r in rows if r is not None]
        right = sum(r[1] == a.right for a, r in made)
        out[name] = {
            "questions": len(rows),
            "coverage": len(made) / max(1, len(rows)),
            "precision": right / len(made) if made else None,
            "right": right / max(1, len(rows)),
        }
    buckets = []
    for lo, hi in ((0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)):
        rows = [(a, r) for a, r in decided if r is not None and lo <= r[0] < hi]
        if rows:
            buckets.append(
                {
                    "bucket": f"{lo:.1f}-{min(hi, 1.0):.1f}",
                    "questions": len(rows),
                    "stated": statistics.fmean(r[0] for _, r in rows),
                    "right": statistics.fmean(r[1] == a.right for a, r in rows),
                }
            )
    out["calibration"] = buckets
    return out


def _rates(answers: Sequence[tuple[str | None, str, float, str]]) -> tuple[float, float | None, float, float | None]:
    """Coverage, precision, right recommendations (share of all questions) and mean stated confidence."""
    made = [(rec, conf, right) for rec, _, conf, right in answers if rec is not None]
    right = sum(rec == r for rec, _, r in made)
    precision = right / len(made) if made else None
    confidence = statistics.fmean(conf for _, conf, _ in made) if made else None
    return len(made) / len(answers), precision, right / len(answers), confidence


def _mean_of(dicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Numbers averaged over seeds; anything else kept per seed."""
    out: dict[str, Any] = {}
    for key in dicts[0]:
        values = [d[key] for d in dicts if d[key] is not None]
        if values and all(isinstance(v, int | float) for v in values):
            out[key] = statistics.fmean(values)
        else:
            out[key] = values or None
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def held_out_table(decisions: dict[str, Any], systems: Sequence[str], seeds: int, steps: int) -> Any:
    """The store run's held-out questions, every system side by side: how often it recommends, how often that is
    right (precision), and right recommendations as a share of all questions. The baselines always answer (their
    top-1); engramdb's ``suggest`` may stay silent, and its rule before H-REC answers the same questions."""
    from rich.table import Table as RichTable

    table = RichTable(
        title=f"Recommendations on held-out descriptions ({seeds} seeds; asked at the change and at step {steps})"
    )
    for col in ("system", "recommends %", "precision %", "right recommendation % (of all)", "mean stated %"):
        table.add_column(col, justify="right" if col != "system" else "left")
    for name in systems:
        r = decisions[name]
        if r.get("recommend_coverage") is not None:
            table.add_row(
                f"{name} suggest",
                _pct(r["recommend_coverage"]),
                _pct(r["recommend_precision"]),
                _pct(r["recommend_right"]),
                _pct(r["recommend_mean_confidence"]),
            )
            if name == "engramdb":
                for key, label in (
                    ("third_rule", "third session's rule (ahead margin 0.025)"),
                    ("previous_rule", "H-REC 2 rule (0.7, no ahead check)"),
                    ("before_rule", "rule before H-REC"),
                ):
                    if r.get(f"{key}_coverage") is not None:
                        table.add_row(
                            f"{name} suggest, {label}",
                            _pct(r[f"{key}_coverage"]),
                            _pct(r[f"{key}_precision"]),
                            _pct(r[f"{key}_right"]),
                            _pct(r[f"{key}_mean_confidence"]),
                        )
        else:
            top1 = (r["top1_unseen_before"] + r["top1_unseen_after"]) / 2
            table.add_row(f"{name} (always answers)", "100.0", _pct(top1), _pct(top1), "-")
    return table


def stated_vs_right(answers: Sequence[tuple[str | None, str, float, str]]) -> list[dict[str, Any]]:
    """Recommendations made, by stated-confidence bucket: how many, the mean stated confidence, the share right."""
    out = []
    for lo, hi in ((0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)):
        rows = [(conf, rec == right) for rec, _, conf, right in answers if rec is not None and lo <= conf < hi]
        if rows:
            out.append(
                {
                    "bucket": f"{lo:.1f}-{min(hi, 1.0):.1f}",
                    "questions": len(rows),
                    "stated": statistics.fmean(c for c, _ in rows),
                    "right": statistics.fmean(r for _, r in rows),
                }
            )
    return out


def merge_results(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Store runs of disjoint seeds (one-seed processes) as one: per-seed means weighted by each part's seeds, the
    stated-against-right buckets pooled by their question counts, every part's load kept."""
    weights = [len(p["seeds"]) for p in parts]
    out: dict[str, Any] = {**parts[0], "seeds": [s for p in parts for s in p["seeds"]]}
    out["load_average_1m_start_end"] = [p["load_average_1m_start_end"] for p in parts]
    out["when"] = [p["when"] for p in parts]
    for section in ("decisions", "failures", "multistep"):
        systems = dict.fromkeys(name for p in parts for name in p.get(section, {}))
        out[section] = {}
        for name in systems:
            rows = [(p[section][name], w) for p, w in zip(parts, weights, strict=True) if name in p.get(section, {})]
            merged: dict[str, Any] = {}
            for key in rows[0][0]:
                vals = [(r.get(key), w) for r, w in rows]
                nums = [(v, w) for v, w in vals if isinstance(v, int | float) and not isinstance(v, bool)]
                if nums and len(nums) == len([v for v, _ in vals if v is not None]):
                    merged[key] = sum(v * w for v, w in nums) / sum(w for _, w in nums)
                else:
                    merged[key] = [v for v, _ in vals]
            out[section][name] = merged
    buckets: dict[str, list[float]] = {}
    for p in parts:
        for b in p.get("held_out_calibration", []):
            acc = buckets.setdefault(b["bucket"], [0.0, 0.0, 0.0])
            acc[0] += b["questions"]
            acc[1] += b["stated"] * b["questions"]
            acc[2] += b["right"] * b["questions"]
    out["held_out_calibration"] = [
        {"bucket": k, "questions": int(n), "stated": st / n, "right": r / n}
        for k, (n, st, r) in sorted(buckets.items())
    ]
    return out


def parse_config(text: str) -> RecommendConfig:
    """``--config`` overrides (``k=v,...``; ``change_*`` for the change rule, ``cp_*`` for change points,
    ``rl`` / ``rl_*`` for run lengths, ``nochange``), on the shipped defaults with the calibration off (raw
    confidences are what is kept)."""
    overrides: dict[str, Any] = {}
    change: dict[str, Any] = {}
    points: dict[str, Any] = {}
    runs: dict[str, Any] = {}
    for kv in (x for x in text.split(",") if x):
        k, v = kv.split("=") if "=" in kv else (kv, "")
        if k.startswith("change_"):
            flag = k in ("change_scan", "change_undiscounted", "change_effective_n", "change_restore")
            change[k[7:]] = v if k in ("change_scope", "change_clock") else (v == "1" if flag else float(v))
        elif k.startswith("cp_"):  # Bayesian change points instead of the change rule
            points[k[3:]] = v if k == "cp_scope" else float(v)
        elif k == "rl":  # run lengths with their defaults
            pass
        elif k.startswith("rl_"):  # run lengths (a change posterior) instead of the change rule
            runs[k[3:]] = v if k == "rl_scope" else v == "1" if k == "rl_recent" else tuple(map(float, v.split(":")))
        elif k == "nochange":
            overrides["change"] = None
        elif k == "learned_in_choose":
            overrides[k] = v == "1"
        else:
            overrides[k] = None if v == "none" else tuple(map(float, v.split(":"))) if ":" in v else float(v)
    cfg = RecommendConfig(calibration=None, pooled_calibration=None, **overrides)
    if change:
        cfg = replace(cfg, change=ChangeRule(**change))
    if points:
        cfg = replace(cfg, change=ChangePoints(**points))
    if runs or "rl" in text.split(","):
        cfg = replace(cfg, change=RunLengths(**runs))
    return cfg


def calibrate_main(args: argparse.Namespace) -> int:
    """``--calibrate``: the pure simulation with the config overrides. The calibration tables are fitted on the
    *dev* streams (seeds 100...), and the rules are scored on the *test* streams (seeds 0..., other descriptions
    drawn, other outcomes): the shipped rule, the tables just fitted, and the rule before H-REC (long-horizon lead,
    its own table) on the same answers. ``--dump`` keeps every answer (pickle) for further study."""
    embedder = make_embedder(load_settings({}))
    cfg = parse_config(args.config)
    steps = args.steps
    dev_runs, dev = run_simulations(embedder, range(100, 100 + args.seeds), steps, cfg)
    close, pooled = fit_calibration(dev)
    shipped = replace(RecommendConfig(), pool_floor=cfg.pool_floor)
    print("dev streams:", json.dumps(_mean_of(dev_runs)), len(dev), "questions")
    for name, table in (("close", close), ("pooled", pooled)):
        for lo, knots in table:
            print(f"  {name} evidence >= {lo:g}: " + " ".join(f"({x}, {y})" for x, y in knots))

    # --store-seeding: the test streams make the store run's choices and ask its questions (see simulate).
    test_runs, test = run_simulations(embedder, range(args.seeds), steps, cfg, store_seeding=args.store_seeding)
    print("test streams:", json.dumps(_mean_of(test_runs)), len(test), "questions")
    if args.dump:
        args.dump.write_bytes(pickle.dumps({"dev": dev, "test": test, "dev_runs": dev_runs, "test_runs": test_runs}))
    rules: dict[str, Rule] = {
        "shipped": make_rule(CALIBRATION, CALIBRATION_POOLED, shipped),
        "fitted on dev": make_rule(close, pooled, shipped),
        "H-REC 2 (0.7, no ahead check)": make_rule(
            CALIBRATION, CALIBRATION_POOLED, replace(PREVIOUS_RULE, pool_floor=cfg.pool_floor)
        ),
        "before H-REC": make_rule(CALIBRATION_BEFORE, None, BEFORE_RULE, long_only=True),
    }
    # The threshold and the ahead margin, each alone (the shipped tables).
    for mc in (0.5, 0.6, 0.7):
        for margin in (None, 0.0, 0.025, 0.05):
            if (mc, margin) != (shipped.min_confidence, shipped.ahead_margin):
                variant = replace(shipped, min_confidence=mc, ahead_margin=margin)
                rules[f"min_confidence {mc:g}, ahead_margin {margin}"] = make_rule(
                    CALIBRATION, CALIBRATION_POOLED, variant
                )
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": args.config,
        "steps": steps,
        "dev_seeds": list(range(100, 100 + args.seeds)),
        "test_seeds": list(range(args.seeds)),
        "dev_runs": _mean_of(dev_runs),
        "test_runs": _mean_of(test_runs),
        "fitted_table": close,
        "fitted_pooled_table": pooled,
        "not_ahead": {"dev": not_ahead_report(dev, shipped), "test": not_ahead_report(test, shipped)},
        "rules": {},
    }
    print("top options not ahead (never recommended):", json.dumps(report["not_ahead"]))
    for name, rule in rules.items():
        for split, answers in (("dev", dev), ("test", test)):
            res = score_rule(answers, rule, steps=steps)
            report["rules"][f"{name} [{split}]"] = res
            print(
                f"{name:14s} [{split:4s}] "
                + "  ".join(
                    f"{part}: recommends {_pct(r['coverage'])}% precision {_pct(r['precision'])}% "
                    f"right {_pct(r['right'])}%"
                    for part, r in res.items()
                    if part != "calibration"
                )
            )
            if split == "test":
                print(
                    "    calibration (test, whole stream): "
                    + "; ".join(
                        f"{b['bucket']}: n {b['questions']} stated {_pct(b['stated'])} right {_pct(b['right'])}"
                        for b in res["calibration"]
                    )
                )
    out = args.output if args.output != RESULTS_DIR / "learning.json" else RESULTS_DIR / "learning_calibration.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


__all__ = [
    "BEFORE_RULE",
    "CALIBRATION_BEFORE",
    "OPTION_CHANGE",
    "OPTION_CHANGE_RULE",
    "PREVIOUS_RULE",
    "RULE_FIELDS",
    "THIRD_RULE",
    "calibrate_main",
    "merge_results",
    "not_ahead_report",
    "run_simulations",
    "score_rule",
]
