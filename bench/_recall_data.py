"""The recall dev set (issue 21): short agent memories, decoys that share words but not meaning, chat noise.

Written from scratch for this project (``bench/data/recall_*``). Each line of a ``recall_dev_*.jsonl`` file
is one group: the memory a person means (``memory``, of ``kind``), ``decoys`` that share its words or its
topic but not its meaning, and ``questions`` whose right answer is the memory. Every memory of every group,
every decoy and every line of ``recall_noise.txt`` (small talk, stored as conversation turns) go into one
store, so each question competes with all ~450 texts.

Splits are by group, fixed: every fourth group (position % 4 == 3 over the files in name order) is the
**confirmation** split, looked at rarely; the rest is **dev**, tuned on. ``recall_paraphrases.jsonl``
holds pairs that say the same thing in other words, for calibrating relevance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATA", "RecallItem", "RecallQuestion", "RecallSet", "load_recall_set"]

DATA = Path(__file__).resolve().parent / "data"
#: Kinds the dev set uses (all valid engramdb kinds).
NOISE_KIND = "conversation"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallItem:
    """One text of the store: a right memory, a decoy or a noise turn."""

    id: str
    kind: str
    content: str
    #: "memory", "decoy" or "noise".
    role: str
    group: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallQuestion:
    """A question, the id of the memory it means, and the ids of its group's decoys."""

    id: str
    text: str
    gold: str
    decoys: tuple[str, ...]
    kind: str
    split: str  # "dev" or "confirm"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallSet:
    items: tuple[RecallItem, ...]
    questions: tuple[RecallQuestion, ...]
    #: (a, b) pairs that mean the same thing.
    paraphrases: tuple[tuple[str, str], ...]

    def split(self, name: str) -> list[RecallQuestion]:
        """The questions of one split ("dev", "confirm"; "all" for both)."""
        return [q for q in self.questions if name in ("all", q.split)]


def load_recall_set(path: Path = DATA) -> RecallSet:
    """Read the dev set's files; ids are stable (file stem, line number)."""
    items: list[RecallItem] = []
    questions: list[RecallQuestion] = []
    position = 0
    for file in sorted(path.glob("recall_dev_*.jsonl")):
        for line_no, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            group = f"{file.stem.removeprefix('recall_dev_')}-{line_no:02d}"
            split = "confirm" if position % 4 == 3 else "dev"
            position += 1
            gold = f"{group}/m"
            items.append(RecallItem(id=gold, kind=row["kind"], content=row["memory"], role="memory", group=group))
            decoys = []
            for j, text in enumerate(row["decoys"]):
                decoys.append(f"{group}/d{j}")
                items.append(RecallItem(id=decoys[-1], kind=row["kind"], content=text, role="decoy", group=group))
            for j, text in enumerate(row["questions"]):
                questions.append(
                    RecallQuestion(
                        id=f"{group}/q{j}",
                        text=text,
                        gold=gold,
                        decoys=tuple(decoys),
                        kind=row["kind"],
                        split=split,
                    )
                )
    noise = (path / "recall_noise.txt").read_text(encoding="utf-8").splitlines()
    items.extend(
        RecallItem(id=f"noise-{i:03d}", kind=NOISE_KIND, content=t, role="noise", group=None)
        for i, t in enumerate(noise)
        if t.strip()
    )
    pairs = tuple(
        (row["a"], row["b"])
        for row in (json.loads(x) for x in (path / "recall_paraphrases.jsonl").read_text(encoding="utf-8").splitlines())
    )
    return RecallSet(items=tuple(items), questions=tuple(questions), paraphrases=pairs)
