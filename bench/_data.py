"""Loaders for the retrieval benchmark data in ``../shared/bench-data`` (see its README).

Both loaders return plain frozen dataclasses, so every system under test indexes
exactly the same documents and is scored against exactly the same gold ids.

LoCoMo: one document per dialogue turn, content ``"speaker: text"``, the session's
date in the metadata; one corpus per conversation, shared by its questions.

LongMemEval: one corpus per question (its ~50-session haystack), one document per
turn, content ``"role: text"``; gold = the question's answer sessions and its
``has_answer`` turns. Abstention questions (``_abs``) are skipped.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "LOCOMO_CATEGORIES",
    "Doc",
    "LocomoConversation",
    "LongMemEvalQuestion",
    "Question",
    "cached_positions",
    "data_dir",
    "event_time",
    "load_locomo",
    "load_longmemeval",
    "repair_evidence",
]

#: LoCoMo question categories (from the data set's README).
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


def data_dir() -> Path:
    """``$ENGRAM_BENCH_DATA`` if set, else ``../shared/bench-data`` relative to the checkout."""
    env = os.environ.get("ENGRAM_BENCH_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "bench-data"


@dataclass(frozen=True, slots=True, kw_only=True)
class Doc:
    """One indexed text (a turn) with the ids the gold labels refer to."""

    id: str  # unique within its corpus: LoCoMo dia_id, LongMemEval "<session position>:<turn index>"
    session: str
    content: str
    date: str
    #: Who said it: a LoCoMo speaker's name, LongMemEval "user" or "assistant" (stored as ``metadata["role"]``,
    #: as ``ShortTermMemory.promote`` stores a message's role).
    role: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A LoCoMo question with its repaired evidence turn ids."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocomoConversation:
    """One LoCoMo conversation: its turns (the corpus) and its questions."""

    sample_id: str
    docs: tuple[Doc, ...]
    questions: tuple[Question, ...]
    #: Questions dropped because no evidence id named a turn after repair.
    dropped: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LongMemEvalQuestion:
    """One LongMemEval question with its own haystack (the corpus)."""

    question_id: str
    #: Position among the file's non-abstention questions (0-based): names a question in a subset.
    position: int
    question_type: str
    text: str
    docs: tuple[Doc, ...]
    answer_sessions: tuple[str, ...]
    answer_turns: tuple[str, ...]
    #: When the question is asked, as the data set writes it ("2023/05/30 (Tue) 23:40"); session dates
    #: (``Doc.date``) are in the same form. Relative time expressions ("a week ago") count from it.
    question_date: str = ""


_LME_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})$")


def event_time(text: str) -> datetime | None:
    """A session or question date as a UTC datetime: LongMemEval ``"2023/05/30 (Tue) 23:40"``, LoCoMo
    ``"1:56 pm on 8 May, 2023"``; None for anything else."""
    text = text.strip()
    m = _LME_DATE.match(text)
    if m is not None:
        year, month, day, hour, minute = (int(g) for g in m.groups())
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    try:
        return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")


def repair_evidence(raw: list[str], known: set[str]) -> tuple[str, ...]:
    """Normalise LoCoMo evidence ids and keep those that name a turn.

    Splits on ';' and whitespace ("D8:6; D9:17"), repairs "D:11:26" -> "D11:26" and
    zero-padded turns "D30:05" -> "D30:5", drops ids naming no turn ("D", "D10:19"
    in a conversation without that turn). Order kept, duplicates removed.
    """
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", str(item)):
            m = _DIA_ID.match(part.strip())
            if not m:
                continue
            ident = f"D{int(m.group(1))}:{int(m.group(2))}"
            if ident in known and ident not in out:
                out.append(ident)
    return tuple(out)


def load_locomo(path: Path | None = None) -> list[LocomoConversation]:
    """Load ``locomo/locomo_dev.json``: one :class:`LocomoConversation` per sample."""
    path = path or data_dir() / "locomo" / "locomo_dev.json"
    with path.open(encoding="utf-8") as fh:
        samples = json.load(fh)
    conversations = []
    for sample in samples:
        conv = sample["conversation"]
        docs: list[Doc] = []
        # Only session_N keys holding lists are sessions (session_N_date_time holds its date).
        sessions = sorted(
            (int(key.split("_")[1]), value)
            for key, value in conv.items()
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        )
        for number, turns in sessions:
            date = str(conv.get(f"session_{number}_date_time", ""))
            for turn in turns:
                docs.append(
                    Doc(
                        id=turn["dia_id"],
                        session=f"S{number}",
                        content=f"{turn['speaker']}: {turn['text']}",
                        date=date,
                        role=str(turn["speaker"]),
                    )
                )
        known = {d.id for d in docs}
        questions = []
        dropped = 0
        for qa in sample["qa"]:
            evidence = repair_evidence(qa.get("evidence", []), known)
            if not evidence:
                dropped += 1
                continue
            questions.append(Question(text=qa["question"], category=int(qa["category"]), evidence=evidence))
        conversations.append(
            LocomoConversation(
                sample_id=sample["sample_id"], docs=tuple(docs), questions=tuple(questions), dropped=dropped
            )
        )
    return conversations


def iter_longmemeval(path: Path | None = None) -> Iterator[LongMemEvalQuestion]:
    """Yield the non-abstention questions of ``longmemeval/longmemeval_s_dev.json.xz`` in file order."""
    path = path or data_dir() / "longmemeval" / "longmemeval_s_dev.json.xz"
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        items = json.load(fh)
    position = -1
    for item in items:
        if item["question_id"].endswith("_abs"):
            continue
        position += 1
        docs: list[Doc] = []
        answer_turns: list[str] = []
        sessions = zip(item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True)
        for slot, (session_id, date, turns) in enumerate(sessions):
            for index, turn in enumerate(turns):
                # A few haystacks hold the same session twice: the slot keeps turn ids unique,
                # while session-level scoring still uses the session id.
                doc_id = f"{slot}:{index}"
                content = f"{turn['role']}: {turn['content']}"
                docs.append(Doc(id=doc_id, session=session_id, content=content, date=date, role=turn["role"]))
                if turn.get("has_answer"):
                    answer_turns.append(doc_id)
        yield LongMemEvalQuestion(
            question_id=item["question_id"],
            position=position,
            question_type=item["question_type"],
            text=item["question"],
            docs=tuple(docs),
            answer_sessions=tuple(item["answer_session_ids"]),
            answer_turns=tuple(answer_turns),
            question_date=str(item.get("question_date", "")),
        )


def load_longmemeval(
    path: Path | None = None, *, limit: int | None = None, positions: Collection[int] | None = None
) -> list[LongMemEvalQuestion]:
    """The first ``limit`` (default: all) non-abstention LongMemEval questions, of ``positions`` if given."""
    out = []
    for question in iter_longmemeval(path):
        if limit is not None and len(out) >= limit:
            break
        if positions is None or question.position in positions:
            out.append(question)
    return out


def cached_positions(cache_file: Path, model_id: str, path: Path | None = None) -> set[int]:
    """Positions of the LongMemEval questions whose every text (turns and question) has a vector of
    ``model_id`` in a ``CachedEmbedder`` cache file: the questions a run can score without the model."""
    with sqlite3.connect(cache_file) as db:
        rows = db.execute("SELECT text_sha256 FROM embedding_cache WHERE model_id = ?", (model_id,))
        keys = {bytes(r[0]) for r in rows}

    def known(text: str) -> bool:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() in keys

    return {q.position for q in iter_longmemeval(path) if known(q.text) and all(known(d.content) for d in q.docs)}
