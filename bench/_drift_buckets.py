"""Where bench/learning_drift.py's settled questions are lost, in the buckets of issue 25, item 11's eighth round.

Every settled question that is not *right and given* at a threshold goes in one bucket, in this order:

* ``b``: the top option was the right one and was withheld (stated under the threshold, not ahead, too little
  evidence): the right neighbourhood, too little evidence to give it;
* the top option was wrong:
  * ``a``: the question's own situation's records alone (oracle matching) put the right option on top: the
    description was matched to the wrong neighbourhood;
  * ``c``: the top option is the best action before the situation's last change (stale: wrong option after a change);
  * ``other``: neither (the own record is wrong too, not stale).

Unlike bench/_drift_losses.py (the fifth round's), *close* (the oracle's margin) is not a bucket of its own but is
counted inside each. Cells: wrong recommendation / withheld (of which close), in % of the settled questions. Reads
``--decompose --dump`` files::

    python bench/_drift_buckets.py 0.685 "held-out" held_abrupt_dump.json held_gradual_dump.json ...
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _drift_losses import oracle_close

BUCKETS = ("a", "b", "c", "other")


def bucket(a: dict[str, Any], threshold: float) -> tuple[str, bool, bool] | None:
    """The bucket of one settled answer at ``threshold`` (None when right and given), whether a wrong recommendation
    was given, and whether the question is close."""
    given = a["given"] if a["confidence"] >= threshold else None
    if given is not None and given == a["right"]:
        return None
    if a["top"] == a["right"]:
        name = "b"
    elif a.get("own_top") == a["right"]:
        name = "a"
    elif a["old_best"] is not None and a["top"] == a["old_best"]:
        name = "c"
    else:
        name = "other"
    return name, given is not None, oracle_close(a["p1"], a["p2"], a["n_since"])


def rows(answers: Sequence[dict[str, Any]], threshold: float, label: str) -> list[str]:
    """One markdown row per shape and for all: right and given, lost, then each bucket's cell."""
    out = []
    for shape in ("abrupt", "gradual", "recurring", "all"):
        sub = [a for a in answers if shape in (a["shape"], "all")]
        n = max(1, len(sub))
        wrong: Counter[str] = Counter()
        none: Counter[str] = Counter()
        close: Counter[str] = Counter()
        for a in sub:
            got = bucket(a, threshold)
            if got is not None:
                (wrong if got[1] else none)[got[0]] += 1
                close[got[0]] += got[2]
        lost = sum(wrong.values()) + sum(none.values())
        cells = [f"{100 * wrong[b] / n:.1f} / {100 * none[b] / n:.1f} ({100 * close[b] / n:.1f})" for b in BUCKETS]
        out.append(
            f"| {label}, {shape} | {100 * (n - lost) / n:.1f} | {100 * lost / n:.1f} | " + " | ".join(cells) + " |"
        )
    return out


def main(argv: Sequence[str]) -> int:
    threshold, label, *files = argv
    answers = [a for f in files for a in json.loads(Path(f).read_text(encoding="utf-8"))]
    print("\n".join(rows(answers, float(threshold), label)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
