"""Knowledge export, import and merge via the Engram API: lossless round trips; hostile files change nothing."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engramdb import AuditRecord, Engram, NotFound, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.knowledge import files as kf
from engramdb.models import Memory


class CountingEmbedder:
    """The real embedder, counting the texts it embeds (to see when vectors are reused)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += len(texts)
        return self.inner.embed(texts)


def populate(mem: Engram) -> list[Memory]:
    """Alice's auth knowledge with statistics, accesses and history; some other memories around it."""
    ms = mem.remember_many(
        [
            {
                "content": "Refresh the OAuth token before calling the billing API",
                "agent": "alice",
                "kind": "knowledge",
                "tags": ["auth"],
                "metadata": {"source": "incident-42", "n": [1, 2.5]},
            },
            {
                "content": "401 from the billing API after token rotation",
                "agent": "alice",
                "kind": "failure",
                "tags": ["auth", "api"],
                "metadata": {"error": "HTTP 401", "solution": "refresh token"},
            },
            {
                "content": "Prefer short-lived tokens for service accounts",
                "agent": "alice",
                "kind": "preference",
                "tags": ["auth"],
                "confidence": 0.9,
                "visibility": "public",
            },
            {
                "content": "The orders database runs PostgreSQL 16",
                "agent": "alice",
                "kind": "knowledge",
                "tags": ["db"],
            },
            {"content": "Bob's notes about auth", "agent": "bob", "kind": "knowledge", "tags": ["auth"]},
        ]
    )
    mem.update(ms[0].id, agent="alice", content="Refresh the OAuth token before every call to the billing API")
    mem.store.memories.update(
        ms[1].id,
        {"successes": 3.0, "attempts": 4.0},
        vector=None,
        model_id=mem.embedder.model_id,
        actor="alice",
        at=ms[1].created_at,
        action="feedback",
    )
    mem.search("OAuth token billing", agent="alice")  # access counts and times
    return [mem.get(m.id) for m in ms]


def export_bytes(mem: Engram, **kwargs: Any) -> bytes:
    buf = io.BytesIO()
    mem.knowledge.export_file(buf, **kwargs)
    return buf.getvalue()


def snapshot(mem: Engram) -> list[dict[str, Any]]:
    """Everything the store holds, per memory: fields, history and shares."""
    rows = []
    for m in mem.store.memories.list(mem_filter(), limit=10_000):
        rows.append({**m.to_dict(), "history": [c.to_dict() for c in mem.store.memories.history(m.id)]})
    return sorted(rows, key=lambda r: r["id"])


def mem_filter() -> Any:
    from engramdb.storage.base import Filter

    return Filter(agent=None)


def comparable(m: Memory) -> dict[str, Any]:
    d = m.to_dict()
    del d["shared_by"], d["shared_at"]
    return d


# -- round trips -------------------------------------------------------------------------------------------


KEY = "test-knowledge-key-0123456789abcdef"


def without_provenance(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record)
    out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "provenance"}
    return out


@pytest.mark.parametrize("with_vectors", [False, True])
def test_round_trip_between_stores_sharing_a_key_is_lossless(tmp_path: Path, embedder: Embedder, with_vectors: bool):
    with Engram(tmp_path / "source", embedder=embedder, knowledge_key=KEY) as mem:
        originals = populate(mem)
        alice = [m for m in originals if m.agent == "alice"]
        path = tmp_path / "alice.jsonl"
        assert mem.knowledge.export_file(path, agent="alice", with_vectors=with_vectors, with_history=True) == 4
        assert kf.read_bundle(path.open("rb")).header.signature is not None
        counting = CountingEmbedder(embedder)
        with Engram(tmp_path / "other", embedder=counting, knowledge_key=KEY) as other:
            assert other.knowledge.import_file(path, keep_agents=True) == 4
            for m in alice:
                got = other.get(m.id)
                assert got.metadata["provenance"]["source"] == "alice.jsonl"
                assert got.metadata["provenance"]["signed"] is True
                assert without_provenance(comparable(got)) == comparable(m)
            # Signed by a trusted key with the same model: vectors are reused; without them each is embedded once.
            assert counting.texts == (0 if with_vectors else 4)
            assert other.store.vectors.count_stale(embedder.model_id) == 0
            stored = other.store.vectors.get([m.id for m in alice], model_id=embedder.model_id)
            original = mem.store.vectors.get([m.id for m in alice], model_id=embedder.model_id)
            for m in alice:
                assert np.allclose(stored[m.id], original[m.id], atol=1e-6)
            # History comes along, followed by the import itself.
            old = [(c.action, c.at, c.actor, c.before, c.after) for c in mem.history(alice[0].id)]
            new = other.history(alice[0].id)
            assert [(c.action, c.at, c.actor, c.before, c.after) for c in new[:-1]] == old
            assert new[-1].action == "import"
            # Exporting it again gives the same records, but for the provenance.
            again = kf.loads_bundle(export_bytes(other, agent="alice"))
            first = kf.loads_bundle(export_bytes(mem, agent="alice"))
            assert [without_provenance(kf.encode_memory(e.memory)) for e in again.entries] == [
                kf.encode_memory(e.memory) for e in first.entries
            ]
            # The imported knowledge is found like any other.
            assert other.search("OAuth token billing", agent="alice")[0].memory.id == alice[0].id


def test_an_unsigned_round_trip_keeps_content_but_not_counters_or_history(
    mem: Engram, tmp_path: Path, embedder: Embedder
):
    originals = populate(mem)
    alice = [m for m in originals if m.agent == "alice"]
    path = tmp_path / "alice.jsonl"
    mem.knowledge.export_file(path, agent="alice", with_vectors=True, with_history=True)
    counting = CountingEmbedder(embedder)
    with Engram(tmp_path / "other", embedder=counting) as other:
        assert other.knowledge.import_file(path, keep_agents=True) == 4
        assert counting.texts == 4  # vectors of an unsigned file are never taken
        for m in alice:
            got = other.get(m.id)
            assert (got.content, got.tags, got.kind, got.created_at) == (m.content, m.tags, m.kind, m.created_at)
            assert (got.access_count, got.successes, got.attempts, got.last_accessed) == (0, 0.0, 0.0, None)
            assert got.metadata["provenance"]["signed"] is False
            assert [c.action for c in other.history(m.id)] == ["import"]


def test_export_selects_the_agents_own_memories_under_the_tag(mem: Engram):
    ms = populate(mem)
    mem.sharing.share([ms[4].id], from_agent="bob", to_agent="alice")  # shared with alice: still bob's
    bundle = kf.loads_bundle(export_bytes(mem, agent="alice", tag="auth"))
    assert {e.memory.id for e in bundle.entries} == {ms[0].id, ms[1].id, ms[2].id}
    assert bundle.header.agent == "alice"
    assert bundle.header.tag == "auth"
    assert bundle.header.vectors == 0
    assert bundle.changes == ()
    assert kf.loads_bundle(export_bytes(mem, agent="nobody")).entries == ()


def test_import_as_another_agent(mem: Engram, tmp_path: Path, embedder: Embedder):
    ms = populate(mem)
    data = export_bytes(mem, agent="alice", tag="db")
    with Engram(tmp_path / "other", embedder=embedder) as other:
        assert other.knowledge.import_file(io.BytesIO(data), agent="carol") == 1
        got = other.get(ms[3].id, agent="carol")
        assert got.agent == "carol"
        assert got.content == ms[3].content
        assert other.list(agent="alice") == []


def test_importing_the_same_file_twice_changes_nothing(mem: Engram, tmp_path: Path, embedder: Embedder):
    populate(mem)
    data = export_bytes(mem, agent="alice", with_history=True)
    with Engram(tmp_path / "other", embedder=embedder) as other:
        assert other.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 4
        before = snapshot(other)
        assert other.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 0
        assert snapshot(other) == before
    # Exporting and importing into the very store it came from is a no-op as well.
    before = snapshot(mem)
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 0
    assert snapshot(mem) == before


def test_a_newer_copy_of_the_same_memory_refreshes_it(mem: Engram, tmp_path: Path, embedder: Embedder):
    ms = populate(mem)
    old_file = export_bytes(mem, agent="alice", tag="db")
    with Engram(tmp_path / "other", embedder=embedder) as other:
        other.knowledge.import_file(io.BytesIO(old_file), keep_agents=True)
        mem.update(ms[3].id, agent="alice", content="The orders database runs PostgreSQL 17 since March")
        newer = export_bytes(mem, agent="alice", tag="db")
        assert other.knowledge.import_file(io.BytesIO(newer), keep_agents=True) == 1
        assert other.get(ms[3].id).content == "The orders database runs PostgreSQL 17 since March"
        assert other.search("PostgreSQL 17 since March", agent="alice")[0].memory.id == ms[3].id
        # An older copy does not roll it back.
        assert other.knowledge.import_file(io.BytesIO(old_file), keep_agents=True) == 0
        assert "17" in other.get(ms[3].id).content


def test_vectors_from_another_model_are_not_used(mem: Engram, tmp_path: Path, embedder: Embedder):
    m = mem.remember("Rotate the signing keys every 90 days", agent="alice", tags=["auth"])
    record = kf.encode_memory(m, np.eye(8, dtype=np.float32)[0])
    data = io.BytesIO()
    kf.write_bundle(data, [record], model="some-other-model", dim=8, exported_at=m.created_at)
    counting = CountingEmbedder(embedder)
    with Engram(tmp_path / "other", embedder=counting) as other:
        assert other.knowledge.import_file(io.BytesIO(data.getvalue()), keep_agents=True) == 1
        assert counting.texts == 1
        assert other.store.vectors.count_stale(embedder.model_id) == 0
        assert other.search("signing key rotation", agent="alice")[0].memory.id == m.id


# -- the write pipeline: redaction and dedupe apply to imports ------------------------------------------------


def forged(
    memories: list[dict[str, Any]], *, model: str = "m", dim: int | None = None, key: str | None = None
) -> bytes:
    """A well-formed knowledge file with whatever records a (possibly hostile) author wants (signed with ``key``)."""
    buf = io.BytesIO()
    kf.write_bundle(buf, memories, model=model, dim=dim, exported_at=_T0, key=key)
    return buf.getvalue()


_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(**over: Any) -> dict[str, Any]:
    base = Memory(
        id="f" * 32,
        agent="alice",
        kind="knowledge",
        content="Deploys go out on Tuesdays",
        created_at=_T0,
        updated_at=_T0,
    )
    rec = kf.encode_memory(base)
    rec.update(over)
    return rec


def test_secrets_in_an_imported_file_are_redacted_before_storage(mem: Engram):
    key = "AKIA" + "QWERTYUIOPASDFGH"
    data = forged(
        [
            record(
                content=f"CI uses access key {key} for uploads",
                metadata={"db_password": "hunter2-but-longer", "note": f"key {key}"},
            )
        ]
    )
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 1
    stored = mem.get("f" * 32)
    assert key not in stored.content
    assert key not in json.dumps(dict(stored.metadata))
    assert "hunter2-but-longer" not in json.dumps(dict(stored.metadata))
    assert "[REDACTED:" in stored.content
    assert stored.redacted  # the kinds, never the values
    assert key not in json.dumps([c.to_dict() for c in mem.history("f" * 32)])


def test_an_imported_near_duplicate_merges_with_statistics_and_provenance(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "keyed", embedder=embedder, knowledge_key=KEY) as mem:
        _merge_with_statistics(mem)


def _merge_with_statistics(mem: Engram) -> None:
    mine = mem.remember("Deploys go out on Tuesdays", agent="alice", confidence=0.4)
    mem.store.memories.update(
        mine.id,
        {"successes": 1.0, "attempts": 2.0, "access_count": 3},
        vector=None,
        model_id=mem.embedder.model_id,
        actor="alice",
        at=mine.created_at,
    )
    data = forged([record(successes=2.0, attempts=2.0, confidence=0.8, access_count=5, tags=["ops"])], key=KEY)
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 1
    merged = mem.get(mine.id)
    assert (merged.successes, merged.attempts, merged.access_count, merged.confidence) == (3.0, 4.0, 8, 0.8)
    assert merged.tags == ("ops",)
    assert merged.metadata["merged_from"][0]["id"] == "f" * 32
    assert mem.count(agent="alice") == 1
    with pytest.raises(NotFound):
        mem.get("f" * 32)
    assert mem.history(mine.id)[-1].action == "merge"
    # The provenance makes a second import a no-op.
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 0
    assert mem.get(mine.id).attempts == 4.0


def test_event_kinds_are_never_merged_on_import(mem: Engram):
    mem.remember("Chose blue-green for the payments deploy", agent="alice", kind="decision")
    data = forged([record(kind="decision", content="Chose blue-green for the payments deploy")])
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 1
    assert mem.count(agent="alice", kind="decision") == 2


def test_near_duplicates_inside_one_file_are_kept_apart(mem: Engram):
    data = forged([record(id="a1"), record(id="a2")])
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 2
    assert mem.count(agent="alice") == 2


# -- hostile and broken files change nothing -----------------------------------------------------------------


@pytest.fixture
def good(mem: Engram) -> bytes:
    populate(mem)
    return export_bytes(mem, agent="alice", with_vectors=True, with_history=True)


def recompute(data: bytes, *, transform: Any) -> bytes:
    """Apply ``transform`` to the body lines and fix the checksum (the attacker controls the whole file)."""
    header, *lines = data.split(b"\n")
    body = b"\n".join(transform(lines))
    h = json.loads(header)
    h["sha256"] = hashlib.sha256(body).hexdigest()
    return json.dumps(h).encode() + b"\n" + body


def hostile_cases(good: bytes) -> dict[str, tuple[bytes, str]]:
    def edit_first(**over: Any) -> bytes:
        def t(lines: list[bytes]) -> list[bytes]:
            rec = json.loads(lines[0])
            rec.update(over)
            return [json.dumps(rec).encode(), *lines[1:]]

        return recompute(good, transform=t)

    return {
        "truncated-mid-line": (good[: len(good) // 2], "truncated|checksum"),
        "truncated-at-line": (good[: good.rfind(b"\n", 0, len(good) - 1) + 1], "checksum mismatch"),
        "header-only": (good.split(b"\n", 1)[0], "truncated|header"),
        "flipped-byte": (good.replace(b"OAuth", b"0Auth", 1), "checksum mismatch"),
        "not-json": (b"this is not a knowledge file\n", "bad header"),
        "empty": (b"", "empty file"),
        "other-format": (b'{"format": "mem0-dump", "version": 1}\n', "not an engramdb knowledge file"),
        "future-version": (good.replace(b'"version":1', b'"version":99', 1), "unsupported knowledge format version"),
        "unknown-kind": (edit_first(kind="secret_plans"), "unknown kind"),
        "unknown-record": (edit_first(type="shell"), "unknown record type"),
        "nul-byte": (edit_first(content="abc\x00def"), "NUL"),
        "huge-content": (edit_first(content="x" * 1_000_001), "too long"),
        "wrong-type": (edit_first(access_count="many"), "access_count"),
        "negative-stats": (edit_first(attempts=-3), "attempts"),
        "star-agent": (edit_first(agent="*"), "reserved"),
        "bad-vector": (edit_first(vector="AAAA"), "vector"),
    }


CASES = [
    "truncated-mid-line",
    "truncated-at-line",
    "header-only",
    "flipped-byte",
    "not-json",
    "empty",
    "other-format",
    "future-version",
    "unknown-kind",
    "unknown-record",
    "nul-byte",
    "huge-content",
    "wrong-type",
    "negative-stats",
    "star-agent",
    "bad-vector",
]


@pytest.mark.parametrize("case", CASES)
def test_a_broken_or_hostile_file_is_refused_and_changes_nothing(
    mem: Engram, tmp_path: Path, embedder: Embedder, good: bytes, case: str
):
    data, match = hostile_cases(good)[case]
    with Engram(tmp_path / "target", embedder=embedder) as target:
        target.remember("something already here", agent="alice")
        before = snapshot(target)
        path = tmp_path / f"{case}.jsonl"
        path.write_bytes(data)
        with pytest.raises(ValidationError, match=match) as info:
            target.knowledge.import_file(path, keep_agents=True)
        assert "\n" not in str(info.value)
        assert str(info.value).startswith(str(path))
        assert snapshot(target) == before


def test_an_id_belonging_to_another_agent_is_refused_and_nothing_is_written(mem: Engram):
    victim = mem.remember("Bob's deployment checklist", agent="bob")
    data = forged([record(id="a" * 32, content="harmless"), record(id=victim.id, content="mallory's takeover")])
    before = snapshot(mem)
    with pytest.raises(ValidationError, match="already exists in this store for another agent"):
        mem.knowledge.import_file(io.BytesIO(data), keep_agents=True)
    assert snapshot(mem) == before
    assert mem.get(victim.id).content == "Bob's deployment checklist"
    # Importing under another name is the same takeover attempt.
    own = forged([record(id=victim.id, agent="bob", content="Bob's deployment checklist")])
    with pytest.raises(ValidationError, match="another agent"):
        mem.knowledge.import_file(io.BytesIO(own), agent="mallory")
    assert snapshot(mem) == before


def test_a_failure_while_writing_rolls_the_whole_import_back(mem: Engram, monkeypatch: pytest.MonkeyPatch):
    data = forged([record(id=f"r{i}", content=f"fact number {i} about the build") for i in range(5)])
    before = snapshot(mem)
    real = mem.store.memories.import_history

    def broken(changes: Any) -> None:
        real(changes)
        raise OSError("disk full")

    monkeypatch.setattr(mem.store.memories, "import_history", broken)
    with pytest.raises(OSError, match="disk full"):
        mem.knowledge.import_file(io.BytesIO(data), keep_agents=True)
    monkeypatch.undo()
    assert snapshot(mem) == before
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 5


def test_dry_run_validates_and_counts_without_writing(mem: Engram, good: bytes, tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "t", embedder=embedder) as target:
        assert target.knowledge.import_file(io.BytesIO(good), dry_run=True, keep_agents=True) == 4
        assert snapshot(target) == []


def test_a_failed_export_leaves_no_partial_file(mem: Engram, tmp_path: Path):
    populate(mem)
    path = tmp_path / "out.jsonl"
    path.write_text("previous contents")
    with pytest.raises(ValidationError):
        mem.knowledge.export_file(path, agent="*")
    assert path.read_text() == "previous contents"
    assert list(tmp_path.glob(".out.jsonl.*")) == []
    with pytest.raises(ValidationError, match="cannot write knowledge file"):
        mem.knowledge.export_file(tmp_path / "missing-dir" / "out.jsonl", agent="alice")
    # A name the file system refuses (found by the API fuzz at a higher count: a raw OSError, ENAMETOOLONG).
    with pytest.raises(ValidationError, match="cannot write knowledge file"):
        mem.knowledge.export_file(str(tmp_path / ("word " * 300)), agent="alice")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "store"]  # nothing new


# -- merge between agents ------------------------------------------------------------------------------------


@pytest.fixture
def team(mem: Engram) -> dict[str, Memory]:
    ms = mem.remember_many(
        [
            {
                "content": "Run VACUUM ANALYZE after bulk loads into PostgreSQL",
                "agent": "bob",
                "tags": ["db"],
                "confidence": 0.9,
            },
            {"content": "Bob's private grudge against the DBA", "agent": "bob", "tags": ["personal"]},
            {"content": "Migration 0042 failed with a lock timeout", "agent": "bob", "kind": "failure", "tags": ["db"]},
            {"content": "Carol's private database password hints", "agent": "carol", "tags": ["db"]},
            {"content": "Carol's team-wide index naming convention", "agent": "carol", "tags": ["db"]},
            {
                "content": "Run VACUUM ANALYZE after bulk loads into PostgreSQL",
                "agent": "alice",
                "tags": ["db"],
                "confidence": 0.6,
            },
        ]
    )
    named = dict(zip(["vacuum", "grudge", "lockfail", "carol_private", "carol_team", "alice_vacuum"], ms, strict=True))
    for key, s, a in (("vacuum", 4.0, 5.0), ("alice_vacuum", 1.0, 3.0)):
        # Outcome counters set as feedback writes them: the change and its audit entry in one transaction.
        with mem.store.atomic():
            mem.store.memories.update(
                named[key].id,
                {"successes": s, "attempts": a, "access_count": 2},
                vector=None,
                model_id=mem.embedder.model_id,
                actor="test",
                at=named[key].created_at,
                action="feedback",
            )
            mem.store.audit.append(
                [AuditRecord(action="feedback", agent="test", memory_id=named[key].id, at=named[key].created_at)]
            )
    mem.sharing.share([named["carol_private"].id], from_agent="carol", to_agent="bob")
    mem.sharing.share([named["carol_team"].id], from_agent="carol", to_agent="*")
    # Consent: bob offers alice his db knowledge; only then can it be merged into hers.
    mem.sharing.share(from_agent="bob", to_agent="alice", tag="db")
    return {k: mem.get(v.id) for k, v in named.items()}


def test_merge_without_consent_gives_nothing_private(mem: Engram):
    mem.remember("Bob keeps the staging admin runbook", agent="bob", tags=["ops"])
    assert mem.knowledge.merge(from_agent="bob", to_agent="alice", tag="ops") == 0
    assert mem.count(agent="alice") == 0


def test_merge_combines_near_duplicates_and_copies_the_rest(mem: Engram, team: dict[str, Memory]):
    assert mem.knowledge.merge(from_agent="bob", to_agent="alice", tag="db") == 3
    own = {m.content: m for m in mem.list(agent="alice", limit=100) if m.agent == "alice"}
    vacuum = own[team["alice_vacuum"].content]
    assert vacuum.id == team["alice_vacuum"].id
    assert (vacuum.successes, vacuum.attempts) == (5.0, 8.0)
    assert vacuum.access_count == 4
    assert vacuum.confidence == 0.9
    assert {(e["agent"], e["id"]) for e in vacuum.metadata["merged_from"]} == {("bob", team["vacuum"].id)}
    copy = own[team["lockfail"].content]
    assert copy.id != team["lockfail"].id
    assert copy.kind == "failure"
    assert copy.visibility == "private"
    assert (copy.metadata["origin"]["agent"], copy.metadata["origin"]["id"]) == ("bob", team["lockfail"].id)
    # Carol shared her convention with everyone: alice may read it anyway, so bob can pass it on.
    convention = own[team["carol_team"].content]
    assert convention.metadata["origin"]["agent"] == "carol"
    # Never: bob's untagged memories, or what carol shared with bob alone.
    assert team["grudge"].content not in own
    assert team["carol_private"].content not in own
    # The originals are untouched.
    assert mem.get(team["vacuum"].id) == team["vacuum"]


def test_merging_twice_changes_nothing(mem: Engram, team: dict[str, Memory]):
    mem.knowledge.merge(from_agent="bob", to_agent="alice", tag="db")
    before = snapshot(mem)
    assert mem.knowledge.merge(from_agent="bob", to_agent="alice", tag="db") == 0
    assert snapshot(mem) == before


def test_merging_back_does_not_return_copies_to_their_origin(mem: Engram, team: dict[str, Memory]):
    mem.knowledge.merge(from_agent="bob", to_agent="alice", tag="db")
    before = mem.count(agent="bob")
    # alice now holds copies of bob's memories; merging alice into bob must not hand them back.
    mem.knowledge.merge(from_agent="alice", to_agent="bob", tag="db")
    bobs = [m for m in mem.list(agent="bob", limit=100) if m.agent == "bob"]
    contents = [m.content for m in bobs]
    assert contents.count(team["lockfail"].content) == 1
    assert mem.count(agent="bob") >= before


def test_merge_requests_are_checked(mem: Engram, team: dict[str, Memory]):
    with pytest.raises(ValidationError, match="different agents"):
        mem.knowledge.merge(from_agent="bob", to_agent="bob")
    with pytest.raises(ValidationError):
        mem.knowledge.merge(from_agent="*", to_agent="alice")
    # An agent with nothing of its own can only pass on what alice may read anyway (carol's published convention).
    assert mem.knowledge.merge(from_agent="nobody", to_agent="alice", tag="db") == 1
    assert mem.knowledge.merge(from_agent="nobody", to_agent="alice", tag="db") == 0
    assert mem.knowledge.merge(from_agent="nobody", to_agent="alice", tag="personal") == 0


def test_exports_imports_and_merges_are_audited_without_content(mem: Engram, team: dict[str, Memory]):
    data = export_bytes(mem, agent="bob", tag="db")
    [export] = mem.audit.log(action="export")
    assert (export.agent, export.detail["count"], export.detail["tag"]) == ("bob", 2, "db")
    mem.knowledge.merge(from_agent="bob", to_agent="alice", tag="db")
    merges = mem.audit.log(action="merge", agent="alice")
    assert {e.detail["origin_id"] for e in merges} >= {team["vacuum"].id, team["lockfail"].id}
    assert all(e.detail["from_agent"] == "bob" for e in merges)
    forged_file = forged([record(id="imp1", content="Imported fact about the build cache")])
    mem.knowledge.import_file(io.BytesIO(forged_file), agent="dave")
    [imported] = mem.audit.log(action="import")
    assert (imported.agent, imported.memory_id, imported.detail["file"]) == ("dave", "imp1", "<stream>")
    log = json.dumps([[e.action, e.agent, e.memory_id, dict(e.detail)] for e in mem.audit.log(limit=1000)])
    for secret_text in ("VACUUM ANALYZE", "lock timeout", "build cache"):
        assert secret_text not in log
    assert data
    result = mem.audit.verification()
    assert result.ok, result.reason
