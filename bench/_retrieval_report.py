"""Console tables of ``bench/retrieval.py`` (quality, fusion study, differences, speed, scale)."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from _data import LOCOMO_CATEGORIES

#: Candidates per channel in the fusion study (``bench/retrieval.py``'s ``FUSION_DEPTH``).
FUSION_DEPTH = 50
console = Console(width=None if sys.stdout.isatty() else 150)


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}"


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


def _time_table(title: str, part: dict[str, Any], group: str) -> Table:
    """The time study: rows that measured questions naming a time (``dated ...``), overall and dated only."""
    named = part.get("time_named") or {}
    table = Table(title=f"{title} ({named.get('named', 0)} of {named.get('questions', 0)} questions name a time)")
    table.add_column("row")
    columns = [
        (m, scope)
        for m in ("recall@5", "recall@10", "session_recall@5")
        for scope in ("", "dated ")
        if any(scope + m in data for data in part["systems"].values())
    ]
    for m, scope in columns:
        table.add_column(f"{scope}{m}", justify="right")
    table.add_column(f"{group} @10", justify="right")
    for name, data in part["systems"].items():
        if not any(k.startswith("dated ") for k in data) and "time" not in name:
            continue
        row = [name] + [_pct(data[scope + m]["overall"]) if scope + m in data else "-" for m, scope in columns]
        row.append(_pct(data["recall@10"]["groups"].get(group, {"mean": math.nan})["mean"]))
        table.add_row(*row)
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
        console.print(_time_table("LoCoMo: time in questions", lo, "temporal"))
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
        console.print(_time_table("LongMemEval: time in questions", lme, "temporal-reasoning"))
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
