"""Learned LLM routing: ``mem.routing``. The seed's routing table is the prior; recorded outcomes override it.

The model, in one paragraph. For a task of type ``t`` and a candidate model ``m``, the
probability that ``m`` does the task well has a Beta posterior built in three layers:

1. **The table.** Seed 002's "LLM routing strategy" says which tier of model suits
   which kind of task (strong cloud models for complex reasoning, code generation and
   long contexts; local models for classification, pattern matching, embeddings and
   cost-sensitive work). :func:`table_prior` turns it into a prior mean per (type,
   tier), worth :attr:`RoutingConfig.prior_strength` outcomes, so two or three
   contrary outcomes already outweigh it.
2. **Similar tasks.** The learning engine's neighbourhood (``mem.learning.suggest``
   over the task's description: relevance-weighted, recency-discounted outcomes of
   similar contexts) shapes that prior. Without a task type it counts in full. With
   one, only a model not yet tried on that type borrows (so no outcome counts twice),
   worth at most :attr:`RoutingConfig.borrow_cap` outcomes: a model that failed at
   similar tasks of another type starts lower.
3. **This task type.** Every recorded outcome of ``t`` (the newest
   :attr:`RoutingConfig.window`), discounted like the learning engine does
   (:func:`engramdb.learning.stats.posteriors`: half-life, horizon, change detection),
   is the evidence.

The pick maximises ``success - cost_weight * cost / max_cost - latency_weight *
latency / max_latency`` over the candidates, where cost and latency are the means
recorded for (type, model) (else the model's spec, else its tier's typical values),
normalised by the largest candidate's: ``cost_weight=0.2`` says the most expensive
candidate must be 20 points likelier to succeed than a free one to be worth it.
``success`` is a Thompson draw from the posterior, its spread scaled by the
``exploration`` setting (0: always the best posterior mean; see
:func:`engramdb.learning.stats.thompson_choice`), seeded by the ``learning_seed``
setting and the evidence, so the same data gives the same pick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from engramdb import _validate as check
from engramdb.brain.routing_table import (
    ROUTING_TABLE,
    TASK_TYPE_ALIASES,
    TIER_DEFAULTS,
    TableRule,
    guess_tier,
    normalise_complexity,
    normalise_task_type,
    rule_prior,
    table_prior,
    table_rule,
)
from engramdb.errors import ValidationError
from engramdb.learning.recommend import rng_for
from engramdb.learning.records import normalise_context, parse_decision
from engramdb.learning.stats import ChangeRule, Evidence, credible_intervals, posteriors
from engramdb.models import Memory, ModelSpec, ModelStats, ModelTier, RouteChoice
from engramdb.services._base import Service, ServiceContext
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.services.learning import LearningService

__all__ = [
    "ROUTING_TABLE",
    "TASK_TYPE_ALIASES",
    "TIER_DEFAULTS",
    "ModelsArg",
    "RoutingConfig",
    "RoutingService",
    "guess_tier",
    "normalise_task_type",
    "table_prior",
]

_TAG: Final = "llm-route"
_TYPE_TAG: Final = "llm-task:"
_DECISION: Final = ("decision",)

ModelsArg = Sequence[str | ModelSpec] | Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingConfig:
    """Tunables of the router; the defaults are the ones ``bench/routing.py`` measures."""

    #: How many outcomes the table's prior is worth.
    prior_strength: float = 2.0
    #: At most this many outcomes of similar tasks shape the prior when the task type is known.
    borrow_cap: float = 4.0
    #: Newest outcomes of a task type read per route.
    window: int = 2000
    #: Age at which an outcome counts half (None: never).
    half_life_days: float | None = 90.0
    #: Each newer outcome of the task type discounts older ones by 1 - 1/horizon (None: off).
    horizon: float | None = 200.0
    #: Detect a model whose recent outcomes contradict its record (None: off).
    change: ChangeRule | None = field(default_factory=ChangeRule)
    #: Default weights of cost and latency against success (see the module doc).
    cost_weight: float = 0.1
    latency_weight: float = 0.0
    #: Recorded costs and latencies averaged per (type, model): the newest this many.
    cost_window: int = 50
    #: The seed's table decides alone until this many (weighted) outcomes of the task type exist,
    #: unless they already contradict it; then outcomes decide (with exploration).
    table_trust: float = 5.0
    #: Latency weight a ``require_fast`` call uses when it gives none.
    fast_latency_weight: float = 0.3

    def __post_init__(self) -> None:
        if not (self.prior_strength > 0 and self.borrow_cap >= 0 and self.window >= 1 and self.cost_window >= 1):
            raise ValueError("prior_strength must be positive, borrow_cap non-negative, windows at least 1")
        if not (self.table_trust >= 0 and self.fast_latency_weight >= 0):
            raise ValueError("table_trust and fast_latency_weight must be non-negative")


@dataclass(frozen=True, slots=True)
class _Observed:
    """What the records of one task type say about one model."""

    evidence: list[Evidence]
    costs: list[float]
    latencies: list[float]


class RoutingService(Service):
    """Pick an LLM for a task by learned success, cost and latency; record how it went."""

    def __init__(self, ctx: ServiceContext, *, learning: LearningService, config: RoutingConfig | None = None) -> None:
        super().__init__(ctx)
        self._learning = learning
        #: The router's tunables; replace to tune this instance.
        self.config: RoutingConfig = config if config is not None else RoutingConfig()

    # -- routing ---------------------------------------------------------------------------------------------
    def decide(
        self,
        task: str,
        *,
        models: ModelsArg,
        task_type: str | None = None,
        agent: str | None = None,
        complexity: str | None = None,
        context_length: int = 0,
        require_fast: bool = False,
        require_cheap: bool = False,
        cost_weight: float | None = None,
        latency_weight: float | None = None,
        exploration: float | None = None,
        seed: int | None = None,
    ) -> RouteChoice:
        """The model to use for ``task``: ``choice.model`` (``str(choice)``), its ``fallback``, and why.

        ``models`` are the candidates: names, :class:`~engramdb.models.ModelSpec` values, or
        a mapping ``name -> {"tier": ..., "cost": ..., "latency_ms": ...}``. ``task_type``
        (e.g. ``reasoning``, ``code_generation``, ``classification``: see
        :data:`ROUTING_TABLE`; any other label works too, with a neutral prior) groups the
        outcomes. ``complexity`` (simple, medium, complex), ``context_length`` (tokens),
        ``require_fast`` and ``require_cheap`` are seed 002's inputs: with them the seed's
        router (:func:`~engramdb.brain.routing_table.table_rule`) names a tier, and its best
        candidate is the pick until :attr:`RoutingConfig.table_trust` outcomes of the task
        type exist or they contradict it; then outcomes decide. ``require_fast`` alone
        weighs latency (:attr:`RoutingConfig.fast_latency_weight`) unless ``latency_weight``
        is given. ``cost_weight`` and ``latency_weight`` (default: the config's, 0.1 and 0)
        say how many points of success probability the most expensive / slowest candidate
        costs. ``exploration`` (default: the ``exploration`` setting) 0 always takes the
        best estimate. Bad input raises ValidationError.
        """
        task = check.content(task, what="task")
        agent = check.agent_or_default(agent, self._settings)
        specs = _specs(models)
        ttype = normalise_task_type(task_type)
        level = normalise_complexity(complexity)
        tokens = _context_length(context_length)
        fast = _flag(require_fast, "require_fast")
        cheap = _flag(require_cheap, "require_cheap")
        rule = table_rule(ttype, complexity=level, context_length=tokens, require_fast=fast, require_cheap=cheap)
        cw = check.non_negative(self.config.cost_weight if cost_weight is None else cost_weight, what="cost_weight")
        default_lw = max(self.config.latency_weight, self.config.fast_latency_weight if fast else 0.0)
        lw = check.non_negative(default_lw if latency_weight is None else latency_weight, what="latency_weight")
        exp, chosen_seed = check.exploration_and_seed(exploration, seed, self._settings)

        names = [s.name for s in specs]
        records = self._records(agent, ttype) if ttype is not None else []
        observed = _observe(records, names, self.config.cost_window)
        borrowed = self._borrowed(task, agent, names)
        now = self._clock()
        cfg = self.config
        post = posteriors(
            [e for o in observed.values() for e in o.evidence],
            now=now,
            half_life_days=cfg.half_life_days,
            horizon=cfg.horizon,
            actions=names,
            change=cfg.change,
        )
        alphas, betas, priors, evidence, seen, tiers = [], [], [], [], [], []
        for spec in specs:
            tier = spec.tier or guess_tier(spec.name)
            p0 = rule_prior(rule, tier) if rule is not None else table_prior(ttype, tier)
            a0, b0 = cfg.prior_strength * p0, cfg.prior_strength * (1.0 - p0)
            bs, bn = borrowed.get(spec.name, (0.0, 0.0))
            used = 0.0
            # With a task type, only a model with no outcome of that type borrows (so nothing counts twice).
            if bn > 0 and not observed[spec.name].evidence:
                scale = min(1.0, cfg.borrow_cap / bn) if ttype is not None else 1.0
                a0, b0 = a0 + scale * bs, b0 + scale * max(0.0, bn - bs)
                used = scale * bn
            p = post[spec.name]
            alphas.append(a0 + p.successes)
            betas.append(b0 + max(0.0, p.attempts - p.successes))
            priors.append(a0 / (a0 + b0))
            evidence.append(p.attempts)
            seen.append(p.attempts + used)
            tiers.append(tier)
        a = np.array(alphas)
        b = np.array(betas)
        mean = a / (a + b)
        low, high = credible_intervals(a, b, level=0.95)
        costs = np.array(
            [_estimate(observed[s.name].costs, s.cost, TIER_DEFAULTS[t][0]) for s, t in zip(specs, tiers, strict=True)]
        )
        lats = np.array(
            [
                _estimate(observed[s.name].latencies, s.latency_ms, TIER_DEFAULTS[t][1])
                for s, t in zip(specs, tiers, strict=True)
            ]
        )
        penalty = cw * _relative(costs) + lw * _relative(lats)
        utility = mean - penalty
        rng = rng_for(
            chosen_seed,
            "route",
            normalise_context(task),
            ttype,
            tuple(names),
            len(records),
            records[0].id if records else "",
            tuple(round(x, 6) for x in a),
        )
        theta = rng.beta(a, b)
        drawn = mean + float(exp) * (theta - mean) - penalty
        best = int(np.lexsort((-mean, -utility))[0])
        table_pick, table_tier = _table_pick(rule, tiers, utility)
        by_table = table_pick is not None and _table_holds(table_pick, best, seen, cfg.table_trust)
        pick = table_pick if by_table and table_pick is not None else int(np.lexsort((-theta, -drawn))[0])
        stats = [
            ModelStats(
                model=spec.name,
                tier=tiers[i],
                expected_success=float(mean[i]),
                low=float(low[i]),
                high=float(high[i]),
                prior_success=float(priors[i]),
                evidence=round(float(evidence[i]), 6),
                expected_cost=float(costs[i]),
                expected_latency_ms=float(lats[i]),
                utility=float(utility[i]),
            )
            for i, spec in enumerate(specs)
        ]
        order = sorted(range(len(stats)), key=lambda i: (-stats[i].utility, -stats[i].evidence, stats[i].model))
        chosen = stats[pick]
        explored = not by_table and pick != best
        fallback = _fallback(pick, rule, tiers, order)
        table_name = stats[table_pick].model if table_pick is not None else None
        return RouteChoice(
            model=chosen.model,
            task=task,
            task_type=ttype,
            reason=_reason(
                chosen,
                rule,
                table_tier=table_tier,
                table_model=table_name,
                by_table=by_table,
                explored=explored,
                cost_weight=cw,
                ttype=ttype,
            ),
            candidates=tuple(stats[i] for i in order),
            explored=explored,
            cost_weight=cw,
            latency_weight=lw,
            fallback=stats[fallback].model if fallback is not None else None,
            decided_by="table" if by_table else ("exploration" if explored else "outcomes"),
            complexity=level,
            context_length=tokens,
            require_fast=fast,
            require_cheap=cheap,
        )

    def route(
        self,
        task: str,
        *,
        models: ModelsArg,
        task_type: str | None = None,
        agent: str | None = None,
        complexity: str | None = None,
        context_length: int = 0,
        require_fast: bool = False,
        require_cheap: bool = False,
        cost_weight: float | None = None,
        latency_weight: float | None = None,
        exploration: float | None = None,
        seed: int | None = None,
    ) -> str:
        """The name of the model to use for ``task`` (see :meth:`decide` for the arguments and the reasons)."""
        return self.decide(
            task,
            models=models,
            task_type=task_type,
            agent=agent,
            complexity=complexity,
            context_length=context_length,
            require_fast=require_fast,
            require_cheap=require_cheap,
            cost_weight=cost_weight,
            latency_weight=latency_weight,
            exploration=exploration,
            seed=seed,
        ).model

    def record(
        self,
        task: str,
        model: str,
        outcome: str | bool | float,
        *,
        task_type: str | None = None,
        latency_ms: float | None = None,
        cost: float | None = None,
        agent: str | None = None,
    ) -> Memory:
        """Record how ``model`` did on ``task``: an outcome record (``decision`` memory) the router learns from.

        ``outcome`` is success/failure/partial, a boolean or a reward in [-1, 1] (as for
        ``mem.learning.record``). ``latency_ms`` and ``cost`` (the unit of your choice,
        the same for every model) feed the cost and latency estimates. Bad input raises
        ValidationError and records nothing.
        """
        task = check.content(task, what="task")
        agent = check.agent_or_default(agent, self._settings)
        model = check.name(model, what="model")
        ttype = normalise_task_type(task_type)
        latency = _non_negative(latency_ms, "latency_ms")
        price = _non_negative(cost, "cost")
        routing: dict[str, Any] = {"task_type": ttype}
        if latency is not None:
            routing["latency_ms"] = latency
        if price is not None:
            routing["cost"] = price
        tags = [_TAG] + ([_TYPE_TAG + ttype] if ttype is not None else [])
        return self._learning.record(
            task,
            model,
            outcome,
            agent=agent,
            duration=latency / 1000.0 if latency is not None else None,
            category=ttype,
            metadata={"routing": routing},
            tags=tags,
        )

    # -- evidence ---------------------------------------------------------------------------------------------
    def _records(self, agent: str, ttype: str) -> list[Memory]:
        flt = Filter(agent=agent, kinds=_DECISION, tags=(_TAG, _TYPE_TAG + ttype))
        return self._store.memories.list(flt, limit=self.config.window, offset=0)

    def _borrowed(self, task: str, agent: str, names: Sequence[str]) -> dict[str, tuple[float, float]]:
        """(weighted successes, weighted attempts) of each model in the outcomes of tasks similar to ``task``."""
        suggestion = self._learning.suggest(task, agent=agent, options=list(names), limit=len(names))
        return {o.action: (o.successes, o.attempts) for o in suggestion.options if o.attempts > 0}


# -- helpers ---------------------------------------------------------------------------------------------------


def _specs(models: object) -> list[ModelSpec]:
    if models is None or isinstance(models, str) or not isinstance(models, Iterable):
        raise ValidationError("models must be a non-empty list of model names (or ModelSpec values, or a mapping)")
    out: list[ModelSpec] = []
    if isinstance(models, Mapping):
        for name, given in models.items():
            info = {} if given is None else given
            if not isinstance(info, Mapping):
                raise ValidationError(f"the details of model {name!r} must be a mapping (tier, cost, latency_ms)")
            unknown = set(info) - {"tier", "cost", "latency_ms"}
            if unknown:
                raise ValidationError(f"unknown detail(s) {', '.join(sorted(map(str, unknown)))} of model {name!r}")
            out.append(
                ModelSpec(name=name, tier=info.get("tier"), cost=info.get("cost"), latency_ms=info.get("latency_ms"))
            )
    else:
        for m in models:
            if isinstance(m, ModelSpec):
                out.append(m)
            elif isinstance(m, str):
                out.append(ModelSpec(name=m))
            else:
                raise ValidationError(f"each model must be a name or a ModelSpec, not {check.shown(m)}")
    for spec in out:
        check.name(spec.name, what="model")
    names = [s.name for s in out]
    if not names:
        raise ValidationError("models must not be empty")
    if len(set(names)) != len(names):
        raise ValidationError("models must be distinct")
    if len(names) > 100:
        raise ValidationError(f"too many models ({len(names)}; the limit is 100)")
    return out


def _non_negative(value: object, what: str) -> float | None:
    if value is None:
        return None
    return check.non_negative(value, what=what)


def _observe(records: Sequence[Memory], names: Sequence[str], cost_window: int) -> dict[str, _Observed]:
    out = {n: _Observed([], [], []) for n in names}
    for m in records:  # newest first
        rec = parse_decision(m)
        if rec is None or rec.action not in out:
            continue
        o = out[rec.action]
        o.evidence.append(Evidence(action=rec.action, success=rec.success, relevance=1.0, at=rec.at))
        info = m.metadata.get("routing")
        if isinstance(info, Mapping):
            for key, sink in (("cost", o.costs), ("latency_ms", o.latencies)):
                v = info.get(key)
                if (
                    isinstance(v, int | float)
                    and not isinstance(v, bool)
                    and math.isfinite(v)
                    and len(sink) < cost_window
                ):
                    sink.append(float(v))
    return out


def _estimate(observed: Sequence[float], spec: float | None, default: float) -> float:
    if observed:
        return float(sum(observed) / len(observed))
    return float(spec) if spec is not None else default


def _relative(values: np.ndarray[Any, np.dtype[np.float64]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    top = float(values.max()) if values.size else 0.0
    return values / top if top > 0 else np.zeros_like(values)


def _context_length(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"context_length must be a non-negative whole number of tokens, not {check.shown(value)}")
    return value


def _flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{what} must be true or false, not {check.shown(value)}")
    return value


def _table_pick(
    rule: TableRule | None, tiers: Sequence[ModelTier], utility: np.ndarray[Any, np.dtype[np.float64]]
) -> tuple[int | None, ModelTier | None]:
    """The candidate the seed's router would take (best utility in its tier, else in its fallback's), and that tier."""
    if rule is None:
        return None, None
    for tier in (rule.tier, rule.fallback):
        ids = [i for i, t in enumerate(tiers) if t == tier]
        if ids:
            return max(ids, key=lambda i: (float(utility[i]), -i)), tier
    return None, None


def _table_holds(table_pick: int, best: int, seen: Sequence[float], trust: float) -> bool:
    """The table decides while outcomes are few and none of them makes another candidate the better bet."""
    if sum(seen) >= trust:
        return False
    # Priors alone never overrule the table: an alternative wins only once outcomes are involved.
    return best == table_pick or (seen[best] < 1.0 and seen[table_pick] < 1.0)


def _fallback(pick: int, rule: TableRule | None, tiers: Sequence[ModelTier], order: Sequence[int]) -> int | None:
    """The seed's fallback tier's best other candidate, else the next best candidate; None when there is no other."""
    others = [i for i in order if i != pick]
    if rule is not None and rule.fallback is not None:
        for i in others:
            if tiers[i] == rule.fallback:
                return i
    return others[0] if others else None


def _reason(
    chosen: ModelStats,
    rule: TableRule | None,
    *,
    table_tier: ModelTier | None,
    table_model: str | None,
    by_table: bool,
    explored: bool,
    cost_weight: float,
    ttype: str | None,
) -> str:
    estimates = (
        f"expected success {chosen.expected_success:.0%} [{chosen.low:.0%}–{chosen.high:.0%}], "
        f"cost {chosen.expected_cost:.3g}, latency {chosen.expected_latency_ms:.0f} ms (cost weight {cost_weight:g})"
    )
    if by_table and rule is not None:
        alt = "" if table_tier == rule.tier else f"; no {rule.tier} candidate, so its fallback tier ({table_tier})"
        agree = (
            f"its {chosen.evidence:.1f} weighted outcomes of this task type agree"
            if chosen.evidence >= 1.0
            else "no outcomes of this task type yet"
        )
        return (
            f"{chosen.model} ({chosen.tier}): the routing table decides: a {rule.tier} model ({rule.why}){alt}; "
            f"{agree}; {estimates}"
        )
    what = "exploring" if explored else "best expected utility"
    if chosen.evidence >= 1.0:
        basis = f"outcomes decide ({chosen.evidence:.1f} weighted outcomes of this task type for {chosen.model})"
    elif ttype is None:
        basis = "outcomes of similar tasks and the prior decide"
    else:
        basis = f"outcomes decide (other candidates' record on this task type; none yet for {chosen.model})"
    if rule is None:
        table = "the routing table says nothing about this task"
    elif table_model is None:
        table = f"the routing table suggests a {rule.tier} model ({rule.why}) but no candidate is one"
    elif table_model == chosen.model:
        table = f"the routing table agrees ({rule.why})"
    else:
        table = f"the routing table would take {table_model} ({rule.why}), overruled by outcomes"
    return f"{chosen.model} ({chosen.tier}): {what}; {basis}; {estimates}; {table}"
