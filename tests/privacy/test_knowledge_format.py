"""The knowledge file format on its own: exact round trips and rejection of every broken or hostile file."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.knowledge import files as kf
from engramdb.models import KINDS, VISIBILITIES, Change, Memory

T0 = datetime(2026, 1, 17, 10, 0, 0, 123456, tzinfo=UTC)


def unit(dim: int = 8, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def memory(**over: Any) -> Memory:
    fields: dict[str, Any] = {
        "id": "a" * 32,
        "agent": "alice",
        "kind": "failure",
        "content": "npm install timed out in CI; fixed by warming the cache",
        "tags": ("ci", "npm"),
        "metadata": {"error": "ETIMEDOUT", "nested": {"n": [1, 2.5, None, True]}},
        "created_at": T0,
        "updated_at": T0 + timedelta(seconds=5),
        "last_accessed": T0 + timedelta(days=1),
        "access_count": 7,
        "confidence": 0.8,
        "successes": 2.5,
        "attempts": 4.0,
        "visibility": "shared",
        "redacted": ("aws_key",),
    }
    fields.update(over)
    return Memory(**fields)


def change(**over: Any) -> Change:
    fields: dict[str, Any] = {
        "seq": 1,
        "memory_id": "a" * 32,
        "action": "create",
        "at": T0,
        "actor": "alice",
        "before": None,
        "after": {"content": "x"},
    }
    fields.update(over)
    return Change(**fields)


def dump(records: list[dict[str, Any]], *, dim: int | None = 8, model: str = "test-model") -> bytes:
    out = io.BytesIO()
    kf.write_bundle(out, records, model=model, dim=dim, exported_at=T0, agent="alice", tag="ci")
    return out.getvalue()


def raw_file(header: dict[str, Any], lines: list[bytes], *, fix_checksum: bool = True) -> bytes:
    body = b"".join(lines)
    if fix_checksum:
        header = {**header, "sha256": hashlib.sha256(body).hexdigest()}
    return json.dumps(header).encode() + b"\n" + body


def good_header(**over: Any) -> dict[str, Any]:
    h: dict[str, Any] = {
        "format": kf.FORMAT,
        "version": kf.VERSION,
        "model": "test-model",
        "dim": 8,
        "exported_at": T0.isoformat(),
        "agent": "alice",
        "tag": None,
        "counts": {"memories": 1, "changes": 0, "vectors": 0},
        "sha256": "0" * 64,
    }
    h.update(over)
    return h


def line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def rejects(data: bytes, match: str) -> ValidationError:
    with pytest.raises(ValidationError, match=match) as info:
        kf.loads_bundle(data, source="f.jsonl")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("f.jsonl: ")
    return info.value


# -- round trips -----------------------------------------------------------------------------------------


def test_round_trip_is_exact_for_every_field_vectors_and_history():
    m = memory()
    vec = unit()
    data = dump(
        [kf.encode_memory(m, vec), kf.encode_change(change()), kf.encode_change(change(seq=2, action="update"))]
    )
    bundle = kf.loads_bundle(data)
    assert bundle.entries[0].memory == m
    assert bundle.entries[0].vector is not None
    assert np.array_equal(bundle.entries[0].vector, vec)
    assert bundle.changes == (change(), change(seq=2, action="update"))
    h = bundle.header
    assert (h.model, h.dim, h.agent, h.tag, h.memories, h.changes, h.vectors) == (
        "test-model",
        8,
        "alice",
        "ci",
        1,
        2,
        1,
    )
    assert h.sha256 == hashlib.sha256(data.split(b"\n", 1)[1]).hexdigest()


def test_vectors_are_optional_per_memory():
    data = dump([kf.encode_memory(memory(id="m1")), kf.encode_memory(memory(id="m2"), unit(seed=2))])
    bundle = kf.loads_bundle(data)
    assert [e.vector is None for e in bundle.entries] == [True, False]
    assert bundle.header.vectors == 1


def test_empty_export_is_valid():
    bundle = kf.loads_bundle(dump([], dim=None))
    assert bundle.entries == ()
    assert bundle.header.memories == 0


def test_header_is_the_first_line_and_names_the_format():
    first = json.loads(dump([kf.encode_memory(memory())]).split(b"\n", 1)[0])
    assert first["format"] == "engramdb-knowledge"
    assert first["version"] == 1
    assert first["counts"] == {"memories": 1, "changes": 0, "vectors": 0}


texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40)
names = st.from_regex(r"[a-z][a-z0-9_-]{0,15}", fullmatch=True)
json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    json_leaf | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10,
)
# Hypothesis wants naive bounds and attaches the zone itself.
LOW, HIGH = datetime(1971, 1, 1), datetime(2200, 1, 1)  # noqa: DTZ001
stamps = st.datetimes(min_value=LOW, max_value=HIGH, timezones=st.just(UTC))


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    attempts = draw(st.floats(0, 1e6))
    return Memory(
        id=draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,40}", fullmatch=True)),
        agent=draw(names),
        kind=draw(st.sampled_from(sorted(KINDS))),
        content=draw(texts.filter(lambda t: t.strip() != "")),
        tags=tuple(draw(st.lists(names, unique=True, max_size=4))),
        metadata=draw(st.dictionaries(texts, json_values, max_size=4)),
        created_at=draw(stamps),
        updated_at=draw(stamps),
        last_accessed=draw(st.none() | stamps),
        access_count=draw(st.integers(0, 2**40)),
        confidence=draw(st.floats(0, 1)),
        successes=draw(st.floats(0, 1).map(lambda f: f * attempts)),
        attempts=attempts,
        visibility=draw(st.sampled_from(sorted(VISIBILITIES))),
        redacted=tuple(draw(st.lists(names, unique=True, max_size=3))),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(memories(), max_size=5, unique_by=lambda m: m.id))
def test_any_valid_memory_round_trips_exactly(ms: list[Memory]):
    bundle = kf.loads_bundle(dump([kf.encode_memory(m) for m in ms]))
    assert [e.memory for e in bundle.entries] == ms


# -- broken files ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 10, 50, 200, -1, -7])
def test_a_truncated_file_is_rejected_wherever_it_is_cut(cut: int):
    data = dump([kf.encode_memory(memory(id=f"m{i}"), unit(seed=i)) for i in range(3)])
    with pytest.raises(ValidationError, match=r"truncated|checksum|bad header|empty file"):
        kf.loads_bundle(data[:cut])


def test_a_file_cut_at_a_line_boundary_fails_the_checksum():
    data = dump([kf.encode_memory(memory(id=f"m{i}")) for i in range(3)])
    cut = data[: data.rfind(b"\n", 0, len(data) - 1) + 1]
    rejects(cut, "checksum mismatch")


def test_an_edited_record_fails_the_checksum():
    data = dump([kf.encode_memory(memory(confidence=0.2))])
    rejects(data.replace(b'"confidence":0.2', b'"confidence":0.9'), "checksum mismatch")


def test_an_appended_record_fails_the_checksum():
    data = dump([kf.encode_memory(memory())])
    rejects(data + line(kf.encode_memory(memory(id="extra"))), "checksum mismatch")


def test_counts_must_match_even_when_the_checksum_was_recomputed():
    header = good_header(counts={"memories": 2, "changes": 0, "vectors": 0})
    rejects(
        raw_file(header, [line(kf.encode_memory(memory()))]),
        r"counts do not match the header \(memories: header 2, file 1\)",
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty file"),
        (b"\n\n", "empty file"),
        (b"not json\n", "bad header: malformed JSON"),
        (b"[1, 2]\n", "expected a JSON object"),
        (b'{"format": "something-else"}\n', "not an engramdb knowledge file"),
        (b"\xff\xfe{}\n", "not UTF-8"),
    ],
)
def test_garbage_is_not_a_knowledge_file(data: bytes, match: str):
    rejects(data, match)


def test_a_future_version_is_refused_clearly():
    rejects(raw_file(good_header(version=2), []), "unsupported knowledge format version 2")


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"sha256": "xyz"}, "sha256 must be 64 lowercase hex"),
        ({"dim": "384"}, "dim must be null or an integer"),
        ({"dim": 0}, "dim must be null or an integer"),
        ({"model": ""}, "model must be a non-empty name"),
        ({"exported_at": "yesterday"}, "exported_at is not an ISO 8601"),
        ({"exported_at": "2026-01-01T00:00:00"}, "must carry a UTC offset"),
        ({"counts": {"memories": -1, "changes": 0, "vectors": 0}}, "counts.memories must be a non-negative"),
        ({"counts": {"memories": 1}}, "missing field"),
        ({"counts": [1, 0, 0]}, "counts must be a JSON object"),
        ({"surprise": 1}, "unknown field"),
    ],
)
def test_bad_headers(over: dict[str, Any], match: str):
    data = json.dumps(good_header(**over)).encode() + b"\n"
    rejects(data, f"line 1: bad header: .*{match}")


def test_missing_header_fields():
    h = good_header()
    del h["model"]
    rejects(json.dumps(h).encode() + b"\n", "missing field.*model")


# -- hostile records (checksum recomputed: the attacker controls the whole file) --------------------------


def hostile(
    record_over: dict[str, Any], *, drop: tuple[str, ...] = (), header_over: dict[str, Any] | None = None
) -> bytes:
    record = kf.encode_memory(memory())
    record.update(record_over)
    for key in drop:
        del record[key]
    vectors = 1 if record.get("vector") is not None else 0
    header = good_header(counts={"memories": 1, "changes": 0, "vectors": vectors}, **(header_over or {}))
    return raw_file(header, [line(record)])


BAD_VECTOR_NORM = base64.b64encode((unit() * 3).astype("<f4").tobytes()).decode()
NAN_VECTOR = base64.b64encode(np.full(8, np.nan, dtype="<f4").tobytes()).decode()
SHORT_VECTOR = base64.b64encode(unit(4).astype("<f4").tobytes()).decode()


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"type": "banana"}, "unknown record type 'banana'"),
        ({"type": None}, "unknown record type None"),
        ({"kind": "secret_plans"}, "unknown kind 'secret_plans'"),
        ({"kind": 3}, "unknown kind 3"),
        ({"visibility": "everyone"}, "unknown visibility"),
        ({"content": ""}, "content must not be empty"),
        ({"content": "   "}, "content must not be empty"),
        ({"content": 42}, "content must be a string, not int"),
        ({"content": "a\x00b"}, "content contains a NUL character"),
        ({"content": "x" * (check.MAX_CONTENT_CHARS + 1)}, "content is too long"),
        ({"agent": "bob\x00"}, "agent contains a NUL"),
        ({"agent": "*"}, "reserved"),
        ({"agent": " bob"}, "surrounding whitespace"),
        ({"agent": "b" * 1000}, "agent is too long"),
        ({"agent": ["bob"]}, "agent must be a string, not list"),
        ({"agent": "bob\nrm -rf"}, "control character"),
        ({"id": ""}, "id must be 1-128 letters"),
        ({"id": "../../etc/passwd"}, "id must be 1-128 letters"),
        ({"id": "x" * 129}, "id must be 1-128 letters"),
        ({"id": 12345}, "id must be 1-128 letters"),
        ({"tags": "ci"}, "tags must be a list"),
        ({"tags": ["ci", "ci"]}, "duplicate entries"),
        ({"tags": [" ci"]}, "surrounding whitespace"),
        ({"tags": [1]}, "tags entry must be a string"),
        ({"tags": ["t"] * 300}, "too many entries"),
        ({"metadata": []}, "metadata must be a JSON object"),
        ({"metadata": {"k": "v\x00"}}, "metadata contains a NUL"),
        ({"metadata": {"k\x00": 1}}, "key containing a NUL"),
        ({"metadata": {"k": "x" * (check.MAX_METADATA_BYTES + 1)}}, "metadata is too large"),
        ({"created_at": "2026-13-45T00:00:00+00:00"}, "created_at is not an ISO 8601"),
        ({"created_at": 1700000000}, "created_at must be an ISO 8601 timestamp string"),
        ({"last_accessed": "2026-01-01"}, "must carry a UTC offset"),
        ({"access_count": -1}, "access_count must be a non-negative integer"),
        ({"access_count": 1.5}, "access_count must be a non-negative integer"),
        ({"access_count": True}, "access_count must be a non-negative integer"),
        ({"access_count": 2**80}, "access_count must be a non-negative integer"),
        ({"confidence": 1.5}, "confidence must be a number from 0 to 1"),
        ({"confidence": "high"}, "confidence must be a number"),
        ({"successes": 5.0, "attempts": 4.0}, "successes .* exceed attempts"),
        ({"attempts": -1}, "attempts must be a number from 0"),
        ({"redacted": [None]}, "redacted entry must be a string"),
        ({"extra": 1}, "unknown field.*extra"),
        ({"vector": BAD_VECTOR_NORM}, "not unit length"),
        ({"vector": NAN_VECTOR}, "NaN or infinite"),
        ({"vector": SHORT_VECTOR}, "vector has 4 dimensions; the header says 8"),
        ({"vector": "@@not base64@@"}, "not valid base64"),
        ({"vector": [0.1, 0.2]}, "vector must be a base64 string"),
    ],
)
def test_hostile_memory_records_are_rejected_with_the_line(over: dict[str, Any], match: str):
    rejects(hostile(over), f"line 2: .*{match}")


def test_a_vector_without_a_declared_dim_is_rejected():
    rejects(hostile({"vector": kf.encode_vector(unit())}, header_over={"dim": None}), "declares no dim")


@pytest.mark.parametrize("field", ["id", "agent", "kind", "content", "created_at", "access_count", "metadata"])
def test_missing_required_fields(field: str):
    rejects(hostile({}, drop=(field,)), f"missing field.*{field}")


def test_nan_and_infinity_are_not_json():
    record = line(kf.encode_memory(memory())).replace(b'"confidence":0.8', b'"confidence":NaN')
    rejects(raw_file(good_header(), [record]), "NaN is not valid JSON")


def test_duplicate_keys_are_rejected():
    record = line(kf.encode_memory(memory()))
    record = record.replace(b'"agent":"alice"', b'"agent":"alice","agent":"mallory"')
    rejects(raw_file(good_header(), [record]), "duplicate key 'agent'")


def test_deeply_nested_json_is_rejected_without_crashing():
    deep = {"metadata": json.loads("[" * 40 + "]" * 40)}
    rejects(hostile({"metadata": {"k": deep}}), "nested too deeply")
    bomb = b'{"type":"memory","metadata":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    rejects(raw_file(good_header(), [bomb]), "nested too deeply|malformed JSON")


def test_duplicate_memory_ids_are_rejected():
    rec = line(kf.encode_memory(memory()))
    rejects(
        raw_file(good_header(counts={"memories": 2, "changes": 0, "vectors": 0}), [rec, rec]), "duplicate memory id"
    )


def test_an_empty_line_in_the_body_is_rejected():
    rec = line(kf.encode_memory(memory()))
    rejects(raw_file(good_header(), [rec, b"\n"]), "line 3: empty line")


def test_a_history_entry_must_belong_to_a_memory_in_the_file():
    lines = [line(kf.encode_memory(memory())), line(kf.encode_change(change(memory_id="elsewhere")))]
    rejects(raw_file(good_header(counts={"memories": 1, "changes": 1, "vectors": 0}), lines), "not in the file")


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"seq": -1}, "seq must be a non-negative integer"),
        ({"at": None}, "at must be an ISO 8601"),
        ({"before": "x"}, "before must be a JSON object"),
        ({"actor": ""}, "actor must be a non-empty name"),
        ({"after": {"content": "\x00"}}, "after contains a NUL"),
    ],
)
def test_hostile_history_records(over: dict[str, Any], match: str):
    record = kf.encode_change(change())
    record.update(over)
    lines = [line(kf.encode_memory(memory())), line(record)]
    rejects(raw_file(good_header(counts={"memories": 1, "changes": 1, "vectors": 0}), lines), f"line 3: .*{match}")


def test_an_overlong_line_is_rejected_without_reading_it_whole(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(kf, "MAX_LINE_BYTES", 1000)
    rec = line(kf.encode_memory(memory(content="y" * 2000)))
    rejects(raw_file(good_header(), [rec]), "line 2: line is longer than 1000 bytes")


def test_writer_refuses_unknown_record_types():
    with pytest.raises(ValidationError, match="unknown record type"):
        dump([{"type": "other"}])
