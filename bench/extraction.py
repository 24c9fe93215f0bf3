"""Facts out of conversations: how well ``mem.add(messages)`` extracts, supersedes, and what it does to recall.

Two measurements, both through the public API on real stores with the real embedding model:

1. **The labelled set** (``bench/data/extraction.jsonl``, written for this benchmark): conversation
   snippets, each with the facts a careful reader would keep (key and value) and, for snippets that
   follow an earlier conversation (``before``), the keys whose value changed. Each snippet runs in its
   own agent: ``add(before)`` then ``add(messages)``. A found fact counts when its key is the expected
   key and its text contains the expected value; precision and recall of facts, and of supersedes (the
   keys ``AddResult.superseded`` names). Snippets with no expected fact measure false alarms. The set
   has a ``dev`` split (the extractor was tuned on it) and a ``test`` split (written at the same time,
   not looked at while tuning): the test figures are the honest ones.

2. **LoCoMo recall** (``--locomo N``, the first N dev conversations): the same turns stored as raw
   ``conversation`` memories (``remember_many``) or through ``add`` (each session one call, both
   speakers as named users, the session's date as ``at``), then recall@k of the evidence turns for
   every question. A fact found in the top k counts for the turn it came from (``metadata["from"]``).
   ``add_turns_only`` searches the same ``add`` store for conversation memories alone: what the turns'
   own changes (event times, links per session) do, apart from the facts taking places in the top k.

Usage::

    python bench/extraction.py                    # the labelled set
    python bench/extraction.py --locomo 2         # and LoCoMo recall on 2 conversations
    python bench/extraction.py --show dev         # print the misses and false alarms of a split
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _data import LocomoConversation, load_locomo
from engramdb import AddResult, Engram

DATA = Path(__file__).parent / "data" / "extraction.jsonl"
OUT = Path(__file__).parent / "results" / "extraction.json"
KS = (5, 10)


@dataclass
class Tally:
    """Counts of one split."""

    snippets: int = 0
    expected: int = 0
    found: int = 0
    matched_expected: int = 0
    matched_found: int = 0
    sup_expected: int = 0
    sup_found: int = 0
    sup_matched: int = 0
    negatives: int = 0
    false_alarms: int = 0
    notes: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        def ratio(a: int, b: int) -> float | None:
            return round(a / b, 3) if b else None

        return {
            "snippets": self.snippets,
            "facts_expected": self.expected,
            "facts_found": self.found,
            "fact_precision": ratio(self.matched_found, self.found),
            "fact_recall": ratio(self.matched_expected, self.expected),
            "supersedes_expected": self.sup_expected,
            "supersedes_found": self.sup_found,
            "supersede_precision": ratio(self.sup_matched, self.sup_found),
            "supersede_recall": ratio(self.sup_matched, self.sup_expected),
            "snippets_without_facts": self.negatives,
            "false_alarm_snippets": self.false_alarms,
        }


def _matches(expected: dict[str, Any], change: Any) -> bool:
    return change.key == expected["key"] and str(expected["value"]).lower() in change.memory.content.lower()


def labelled(mem: Engram, *, at: datetime) -> dict[str, Tally]:
    """Run every snippet of the labelled set; tallies per split."""
    tallies: dict[str, Tally] = {}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        tally = tallies.setdefault(case["split"], Tally())
        agent = f"x-{case['id']}"
        if case.get("before"):
            mem.add(case["before"], agent=agent, at=at)
        res: AddResult = mem.add(case["messages"], agent=agent, at=at)
        found = [f for f in res.facts if f.action != "delete"]
        expected = case["facts"]
        tally.snippets += 1
        tally.expected += len(expected)
        tally.found += len(found)
        hit_expected = [e for e in expected if any(_matches(e, f) for f in found)]
        hit_found = [f for f in found if any(_matches(e, f) for e in expected)]
        tally.matched_expected += len(hit_expected)
        tally.matched_found += len(hit_found)
        want = set(case.get("supersedes", []))
        got = {f.key for f in res.superseded}
        tally.sup_expected += len(want)
        tally.sup_found += len(got)
        tally.sup_matched += len(want & got)
        if not expected:
            tally.negatives += 1
            tally.false_alarms += bool(found)
        for e in expected:
            if e not in hit_expected:
                tally.notes.append(f"{case['id']} missed {e['key']}={e['value']!r}")
        for f in found:
            if f not in hit_found:
                tally.notes.append(f"{case['id']} extra {f.key}: {f.memory.content!r}")
        for key in want ^ got:
            tally.notes.append(f"{case['id']} supersede {'missed' if key in want else 'extra'}: {key}")
    return tallies


# -- LoCoMo ------------------------------------------------------------------------------------------------------


def _when(date: str) -> str | None:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as ISO 8601, or None."""
    try:
        return datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).isoformat()
    except ValueError:
        return None


def locomo(conversations: Sequence[LocomoConversation], root: Path) -> dict[str, Any]:
    """Recall@k of evidence turns: raw turns against turns and facts through ``add``."""
    hits: dict[str, dict[int, int]] = {name: dict.fromkeys(KS, 0) for name in ("raw", "add", "add_turns_only")}
    asked = 0
    facts = 0
    seconds = {"raw": 0.0, "add": 0.0}
    for n, conv in enumerate(conversations):
        with Engram(root / f"raw{n}") as raw, Engram(root / f"add{n}") as via:
            start = time.perf_counter()
            stored = raw.remember_many(
                [
                    {"content": d.content, "agent": "bench", "kind": "conversation", "metadata": {"turn": d.id}}
                    for d in conv.docs
                ]
            )
            raw.flush()
            seconds["raw"] += time.perf_counter() - start
            raw_turn = {m.id: d.id for m, d in zip(stored, conv.docs, strict=True)}
            start = time.perf_counter()
            add_turn: dict[str, str] = {}
            sessions: dict[str, list[Any]] = {}
            for d in conv.docs:
                sessions.setdefault(d.session, []).append(d)
            for docs in sessions.values():
                messages = [{"role": "user", "name": d.role, "content": d.content.split(": ", 1)[1]} for d in docs]
                res = via.add(messages, agent="bench", at=_when(docs[0].date))
                add_turn.update({m.id: d.id for m, d in zip(res.turns, docs, strict=True)})
                for f in res.facts:
                    source = f.memory.metadata.get("from")
                    if isinstance(source, str) and source in add_turn:
                        add_turn[f.memory.id] = add_turn[source]
                        facts += f.action in ("add", "supersede")
            via.flush()
            seconds["add"] += time.perf_counter() - start
            for q in conv.questions:
                asked += 1
                gold = set(q.evidence)
                runs = (("raw", raw, raw_turn, None), ("add", via, add_turn, None))
                for name, mem, turn_of, kind in (*runs, ("add_turns_only", via, add_turn, "conversation")):
                    found = mem.search(q.text, agent="bench", kind=kind, limit=max(KS))
                    turns = [turn_of.get(h.memory.id) for h in found]
                    for k in KS:
                        hits[name][k] += bool(gold & set(turns[:k]))
    return {
        "conversations": len(conversations),
        "questions": asked,
        "facts_written": facts,
        "recall": {name: {f"@{k}": round(v / asked, 3) for k, v in by_k.items()} for name, by_k in hits.items()},
        "ingest_seconds": {name: round(s, 1) for name, s in seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=int, default=0, metavar="N", help="LoCoMo recall on N conversations")
    parser.add_argument(
        "--show", choices=("dev", "test", "holdout", "final"), help="print the misses and false alarms of a split"
    )
    args = parser.parse_args()
    report: dict[str, Any] = {"date": datetime.now(UTC).date().isoformat()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with Engram(root / "labelled") as mem:
            tallies = labelled(mem, at=datetime(2026, 11, 27, 10, tzinfo=UTC))
        report["labelled"] = {split: t.figures() for split, t in sorted(tallies.items())}
        every = Tally()
        for t in tallies.values():
            for name in vars(every):
                if name != "notes":
                    setattr(every, name, getattr(every, name) + getattr(t, name))
        report["labelled"]["all"] = every.figures()
        print(f"{'split':6} {'n':>4} {'fact P':>7} {'fact R':>7} {'sup P':>6} {'sup R':>6} {'false alarms':>13}")
        for split, f in report["labelled"].items():
            print(
                f"{split:6} {f['snippets']:>4} {f['fact_precision']:>7} {f['fact_recall']:>7} "
                f"{f['supersede_precision']:>6} {f['supersede_recall']:>6} "
                f"{f['false_alarm_snippets']:>6}/{f['snippets_without_facts']}"
            )
        if args.show:
            print("\n".join(tallies[args.show].notes))
        if args.locomo:
            report["locomo"] = locomo(load_locomo()[: args.locomo], root)
            print(json.dumps(report["locomo"], indent=2))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
