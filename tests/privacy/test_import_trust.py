"""Import trusts nothing the file cannot prove (issue 11, item 5).

Each tampered file is refused or neutralised: an edited file re-checksummed without the key,
forged vectors, another agent's records, forged history, absurd counters and future timestamps.
"""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engramdb import Engram, NotFound, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.knowledge import files as kf
from engramdb.models import Memory

KEY = "store-knowledge-key-0123456789abcdef"
_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(**over: Any) -> dict[str, Any]:
    base = Memory(
        id="a" * 32,
        agent="alice",
        kind="knowledge",
        content="Deploys go out on Tuesdays",
        created_at=_T0,
        updated_at=_T0,
    )
    rec = kf.encode_memory(base)
    rec.update(over)
    return rec


def bundle(records: list[dict[str, Any]], *, key: str | None = None, model: str = "m", dim: int | None = None) -> bytes:
    buf = io.BytesIO()
    kf.write_bundle(buf, records, model=model, dim=dim, exported_at=_T0, key=key)
    return buf.getvalue()


def resigned_without_key(data: bytes, edit: Any) -> bytes:
    """What an attacker without the key can do: edit the body and fix the (unkeyed) checksum."""
    head, body = data.split(b"\n", 1)
    lines = [json.loads(line) for line in body.splitlines()]
    lines = [edit(line) for line in lines]
    new_body = b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(new_body).hexdigest()
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + new_body


@pytest.fixture
def keyed(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "keyed", embedder=embedder, knowledge_key=KEY) as mem:
        yield mem


def test_an_edited_file_re_checksummed_without_the_key_is_refused(keyed: Engram):
    signed = bundle([record()], key=KEY)
    tampered = resigned_without_key(signed, lambda r: {**r, "content": "Deploys go out on Fridays"})
    with pytest.raises(ValidationError, match="signature does not verify"):
        keyed.knowledge.import_file(io.BytesIO(tampered), keep_agents=True)
    assert keyed.count(agent="alice") == 0
    # A file signed with another key is refused the same way.
    with pytest.raises(ValidationError, match="signature does not verify"):
        keyed.knowledge.import_file(io.BytesIO(bundle([record()], key="another-key-0123456789")), keep_agents=True)
    # The genuine file imports, marked as signed.
    assert keyed.knowledge.import_file(io.BytesIO(signed), keep_agents=True) == 1
    assert keyed.get("a" * 32).metadata["provenance"]["signed"] is True


def test_stripping_the_signature_makes_the_file_untrusted_not_trusted(keyed: Engram):
    signed = bundle([record(access_count=7, successes=2.0, attempts=3.0)], key=KEY)
    head, body = signed.split(b"\n", 1)
    header = json.loads(head)
    del header["signature"]
    stripped = json.dumps(header, separators=(",", ":")).encode() + b"\n" + body
    assert keyed.knowledge.import_file(io.BytesIO(stripped), keep_agents=True) == 1
    got = keyed.get("a" * 32)
    assert (got.access_count, got.successes, got.attempts) == (0, 0.0, 0.0)
    assert got.metadata["provenance"]["signed"] is False


def test_forged_vectors_are_recomputed(mem: Engram, embedder: Embedder):
    # A vector that points at an unrelated question, claimed to come from this store's model.
    bait = embedder.embed(["how do I reset my password"])[0]
    data = bundle(
        [record(content="Deploys go out on Tuesdays", vector=kf.encode_vector(bait))],
        model=embedder.model_id,
        dim=embedder.dim,
    )
    assert mem.knowledge.import_file(io.BytesIO(data), keep_agents=True) == 1
    stored = mem.store.vectors.get(["a" * 32], model_id=embedder.model_id)["a" * 32]
    assert np.allclose(stored, embedder.embed(["Deploys go out on Tuesdays"])[0], atol=1e-5)
    hits = mem.search("how do I reset my password", agent="alice")
    assert all(h.vector_score is None or h.vector_score < 0.9 for h in hits)


def test_another_agents_records_need_the_caller_to_name_them(mem: Engram):
    data = bundle([record(agent="mallory-target")])
    with pytest.raises(ValidationError, match="agent=NAME"):
        mem.knowledge.import_file(io.BytesIO(data))
    assert mem.count(agent="mallory-target") == 0
    # Naming the agent to import as works, and so does keeping theirs explicitly.
    assert mem.knowledge.import_file(io.BytesIO(data), agent="carol") == 1
    assert mem.get("a" * 32).agent == "carol"
    # The default agent's own records need no naming.
    own = bundle([record(id="b" * 32, agent="default")])
    assert mem.knowledge.import_file(io.BytesIO(own)) == 1


def test_forged_history_is_replaced_by_the_import(mem: Engram):
    forged_change = {
        "type": "change",
        "memory_id": "a" * 32,
        "seq": 1,
        "action": "create",
        "at": "2001-01-01T00:00:00.000000+00:00",
        "actor": "alice",
        "before": None,
        "after": {"content": "Deploys go out on Tuesdays"},
    }
    data = bundle([record(), forged_change])
    mem.knowledge.import_file(io.BytesIO(data), keep_agents=True)
    history = mem.history("a" * 32)
    assert [(c.action, c.actor) for c in history] == [("import", "import")]
    assert history[0].at.year >= 2026


def test_absurd_counters_and_future_timestamps_are_neutralised(mem: Engram):
    data = bundle(
        [
            record(
                access_count=10**15,
                successes=10.0**15,
                attempts=10.0**15,
                created_at="9999-12-31T00:00:00.000000+00:00",
                updated_at="9999-12-31T00:00:00.000000+00:00",
                last_accessed="9999-12-31T00:00:00.000000+00:00",
            )
        ]
    )
    before = datetime.now(UTC)
    mem.knowledge.import_file(io.BytesIO(data), agent="alice")
    got = mem.get("a" * 32)
    assert (got.access_count, got.successes, got.attempts, got.last_accessed) == (0, 0.0, 0.0, None)
    assert before <= got.created_at <= datetime.now(UTC)
    assert got.updated_at <= datetime.now(UTC)
    prov = got.metadata["provenance"]
    assert prov["source"] == "<stream>"
    assert prov["signed"] is False
    assert datetime.fromisoformat(prov["imported_at"]) >= before


def test_even_a_signed_file_cannot_date_memories_in_the_future(keyed: Engram):
    data = bundle(
        [record(created_at="9999-12-31T00:00:00.000000+00:00", updated_at="9999-12-31T00:00:00.000000+00:00")], key=KEY
    )
    keyed.knowledge.import_file(io.BytesIO(data), keep_agents=True)
    assert keyed.get("a" * 32).created_at <= datetime.now(UTC)


def test_counters_of_an_unsigned_file_do_not_inflate_an_existing_memory(mem: Engram, tmp_path: Path):
    path = tmp_path / "first.jsonl"
    path.write_bytes(bundle([record()]))
    mem.knowledge.import_file(path, keep_agents=True)
    assert mem.get("a" * 32).metadata["provenance"]["source"] == "first.jsonl"
    inflated = bundle([record(access_count=10**15, successes=10.0**15, attempts=10.0**15)])
    mem.knowledge.import_file(io.BytesIO(inflated), keep_agents=True)
    got = mem.get("a" * 32)
    assert got.access_count < 10
    assert got.attempts == 0.0


def test_missing_paths_and_directories_get_the_librarys_errors(mem: Engram, tmp_path: Path):
    with pytest.raises(NotFound, match="no knowledge file"):
        mem.knowledge.import_file(tmp_path / "nope.jsonl")
    with pytest.raises(ValidationError, match="is a directory"):
        mem.knowledge.import_file(tmp_path)
    with pytest.raises(ValidationError, match="is a directory"):
        mem.knowledge.export_file(tmp_path, agent="alice")
    with pytest.raises(ValidationError):
        mem.knowledge.import_file(7)  # type: ignore[arg-type]


def test_a_surrogate_escape_in_a_file_is_a_validation_error(mem: Engram):
    data = bundle([record()]).replace(b"Tuesdays", b"Tuesdays \\ud800")
    head, body = data.split(b"\n", 1)
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(body).hexdigest()
    data = json.dumps(header).encode() + b"\n" + body
    with pytest.raises(ValidationError, match="surrogate"):
        mem.knowledge.import_file(io.BytesIO(data), keep_agents=True)
