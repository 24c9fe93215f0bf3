"""What dating a memory's event from its own words costs the write path (issue 21 ninth round).

``remember`` / ``remember_many`` run :func:`engramdb.retrieval.timeref.with_told_time` on every memory they write
("yesterday" said on the 15th: the 14th). This times that step alone, in CPU seconds, over every LoCoMo turn and
the turns of the first ``--lme`` LongMemEval haystacks, each with its session's date as the time it was said, and
the library's first use in a process (dateparser's load, paid once, by the first memory that names a day).

    python bench/told_cost.py                  # -> bench/results/recall_issue21_r9_told_cost.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import datetime
from pathlib import Path

from _data import event_time, iter_longmemeval, load_locomo
from _report import write_json
from engramdb.retrieval.timeref import TOLD_KEY, with_told_time

RESULTS = Path(__file__).parent / "results" / "recall_issue21_r9_told_cost.json"


def _turns(lme: int) -> dict[str, list[tuple[str, datetime]]]:
    out: dict[str, list[tuple[str, datetime]]] = {"locomo": [], "longmemeval": []}
    for conv in load_locomo():
        out["locomo"] += [(d.content, t) for d in conv.docs if (t := event_time(d.date)) is not None]
    for i, item in enumerate(iter_longmemeval()):
        if i >= lme:
            break
        out["longmemeval"] += [(d.content, t) for d in item.docs if (t := event_time(d.date)) is not None]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lme", type=int, default=20, help="LongMemEval haystacks (about 500 turns each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    turns = _turns(args.lme)
    t0 = time.process_time()
    with_told_time({}, "I went to a concert yesterday.", said=turns["locomo"][0][1])
    first = time.process_time() - t0
    report: dict[str, object] = {"first_use_cpu_s": round(first, 3), "load1": os.getloadavg()[0]}
    for name, rows in turns.items():
        per_turn = []
        dated = 0
        for _ in range(args.rounds):
            t0 = time.process_time()
            dated = sum(1 for text, said in rows if TOLD_KEY in with_told_time({}, text, said=said))
            per_turn.append((time.process_time() - t0) * 1000 / len(rows))
        report[name] = {
            "turns": len(rows),
            "dated": dated,
            "mean_chars": round(statistics.mean(len(t) for t, _ in rows)),
            "cpu_ms_per_turn": [round(v, 4) for v in per_turn],
        }
        print(f"{name}: {len(rows)} turns, {dated} dated, CPU ms a turn {[round(v, 3) for v in per_turn]}")
    print(f"first use (the date library's load): {first:.3f} s CPU")
    write_json(args.out, report)


if __name__ == "__main__":
    main()
