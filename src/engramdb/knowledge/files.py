"""The knowledge file format: versioned JSONL with a header line (pure: values in, bytes out, and back).

A knowledge file is UTF-8 text, one JSON object per line, every line ending in ``\\n``::

    {"format": "engramdb-knowledge", "version": 1, "model": "<embedding model id>", "dim": 384,
     "exported_at": "2026-01-17T10:00:00.000000+00:00", "agent": "alice", "tag": "auth",
     "counts": {"memories": 2, "changes": 3, "vectors": 2}, "sha256": "<hex digest of the body>"}
    {"type": "memory", "id": "...", "agent": "alice", "kind": "failure", "content": "...", "tags": ["auth"],
     "metadata": {...}, "created_at": "...", "updated_at": "...", "last_accessed": null, "access_count": 3,
     "confidence": 0.7, "successes": 2.0, "attempts": 3.0, "visibility": "private", "redacted": [],
     "vector": "<base64 little-endian float32, optional>"}
    {"type": "change", "memory_id": "...", "seq": 1, "action": "create", "at": "...", "actor": "alice",
     "before": null, "after": {...}}

The *body* is every byte after the header line; ``sha256`` is its hex digest and
``counts`` say how many records of each type it holds, so a truncated, damaged or
spliced file is caught before anything is imported. The checksum has no key, so it
proves nothing about who wrote the file: a store with a ``knowledge_key`` adds
``"signature"`` to the header, the HMAC-SHA256 (hex) with that key of the header's other
fields as canonical JSON (sorted keys, compact, ASCII), which cover the body through
``sha256``; see :func:`sign` and :func:`verify`. ``vector`` is optional per
memory (``dim`` floats, unit norm, made by ``model``); ``change`` records (a
memory's history) are optional and refer to a memory in the same file.

:func:`read_bundle` validates *everything* (syntax, header, checksum, counts,
every field's type and range, hostile values such as NUL bytes, huge strings,
duplicate keys or ids) and raises one :class:`~engramdb.errors.ValidationError`
naming the line, so callers can write all or nothing. Nothing here touches a store.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import io
import json
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.knowledge import _fields as fields
from engramdb.models import Change, Memory

__all__ = [
    "FORMAT",
    "VERSION",
    "Bundle",
    "Entry",
    "Header",
    "encode_change",
    "encode_memory",
    "encode_vector",
    "loads_bundle",
    "read_bundle",
    "sign",
    "verify",
    "write_bundle",
]

#: The ``format`` value of every knowledge file's header.
FORMAT: Final = "engramdb-knowledge"
#: The schema version this code writes and reads.
VERSION: Final = 1

# Limits on hostile input that only a file has (the fields' own limits are those of the write path,
# in engramdb._validate): small enough that one line cannot exhaust memory.
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
MAX_DIM: Final = fields.MAX_DIM
_shown = check.shown
_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")

_HEADER_KEYS: Final = frozenset(
    {"format", "version", "model", "dim", "exported_at", "agent", "tag", "counts", "sha256", "signature"}
)
_HEADER_OPTIONAL: Final = frozenset({"signature"})
_COUNT_KEYS: Final = frozenset({"memories", "changes", "vectors"})
_MEMORY_KEYS: Final = frozenset(
    {
        "type",
        "id",
        "agent",
        "kind",
        "content",
        "tags",
        "metadata",
        "created_at",
        "updated_at",
        "last_accessed",
        "access_count",
        "confidence",
        "successes",
        "attempts",
        "visibility",
        "redacted",
        "vector",
        "user",
        "session",
        "occurred_at",
        "valid_until",
    }
)
# Scopes and event time are written only when set (a file without them reads as before they existed).
_MEMORY_OPTIONAL: Final = frozenset(
    {"vector", "redacted", "last_accessed", "user", "session", "occurred_at", "valid_until"}
)
_CHANGE_KEYS: Final = frozenset({"type", "memory_id", "seq", "action", "at", "actor", "before", "after"})

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """The first line of a knowledge file: what made it and what the body holds."""

    model: str
    dim: int | None
    exported_at: datetime
    #: The agent and tag the export selected (informational; records carry their own agent).
    agent: str | None = None
    tag: str | None = None
    memories: int = 0
    changes: int = 0
    vectors: int = 0
    sha256: str = ""
    #: HMAC-SHA256 (hex) of the other fields with the exporting store's ``knowledge_key``; None: unsigned.
    signature: str | None = None
    #: The header's fields other than ``signature``, exactly as read (what the signature covers).
    signed_fields: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)
    format: str = FORMAT
    version: int = VERSION

    def to_dict(self) -> dict[str, Any]:
        """The header line as a JSON-ready dict."""
        out: dict[str, Any] = {
            "format": self.format,
            "version": self.version,
            "model": self.model,
            "dim": self.dim,
            "exported_at": _ts(self.exported_at),
            "agent": self.agent,
            "tag": self.tag,
            "counts": {"memories": self.memories, "changes": self.changes, "vectors": self.vectors},
            "sha256": self.sha256,
        }
        if self.signature is not None:
            out["signature"] = self.signature
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One memory of a knowledge file, with its vector when the file carries one."""

    memory: Memory
    vector: Vector | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Bundle:
    """A whole knowledge file, validated: its header, its memories and their history."""

    header: Header
    entries: tuple[Entry, ...]
    changes: tuple[Change, ...] = ()


# -- writing ---------------------------------------------------------------------------------------------


def _ts(value: datetime) -> str:
    # Microseconds always: fixed width, and exactly what the store keeps.
    return value.isoformat(timespec="microseconds")


def encode_vector(vector: npt.ArrayLike) -> str:
    """A vector as base64 of its little-endian float32 bytes."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def encode_memory(memory: Memory, vector: npt.ArrayLike | None = None) -> dict[str, Any]:
    """A ``memory`` record (reader-relative ``shared_by`` and the derived ``success_rate`` are left out)."""
    record: dict[str, Any] = {
        "type": "memory",
        "id": memory.id,
        "agent": memory.agent,
        "kind": memory.kind,
        "content": memory.content,
        "tags": list(memory.tags),
        "metadata": dict(memory.metadata),
        "created_at": _ts(memory.created_at),
        "updated_at": _ts(memory.updated_at),
        "last_accessed": _ts(memory.last_accessed) if memory.last_accessed is not None else None,
        "access_count": memory.access_count,
        "confidence": memory.confidence,
        "successes": memory.successes,
        "attempts": memory.attempts,
        "visibility": memory.visibility,
        "redacted": list(memory.redacted),
    }
    if memory.user is not None:
        record["user"] = memory.user
    if memory.session is not None:
        record["session"] = memory.session
    if memory.occurred_at != memory.created_at:
        record["occurred_at"] = _ts(memory.occurred_at)
    if memory.valid_until is not None:
        record["valid_until"] = _ts(memory.valid_until)
    if vector is not None:
        record["vector"] = encode_vector(vector)
    return record


def encode_change(change: Change) -> dict[str, Any]:
    """A ``change`` record: one entry of a memory's history."""
    return {
        "type": "change",
        "memory_id": change.memory_id,
        "seq": change.seq,
        "action": change.action,
        "at": _ts(change.at),
        "actor": change.actor,
        "before": dict(change.before) if change.before is not None else None,
        "after": dict(change.after) if change.after is not None else None,
    }


def _canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def sign(fields: Mapping[str, Any], key: str) -> str:
    """The HMAC-SHA256 (hex) with ``key`` of a header's fields (without ``signature``)."""
    return hmac.new(key.encode("utf-8"), _canonical(fields), hashlib.sha256).hexdigest()


def verify(header: Header, key: str) -> bool:
    """Whether ``header`` carries a signature made with ``key`` (over the fields as read)."""
    if header.signature is None:
        return False
    fields = header.signed_fields if header.signed_fields is not None else header.to_dict()
    expected = sign({k: v for k, v in fields.items() if k != "signature"}, key)
    return hmac.compare_digest(expected, header.signature)


def _line(record: Mapping[str, Any]) -> bytes:
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"record cannot be written as JSON: {exc}") from exc
    return text.encode("utf-8") + b"\n"


def write_bundle(
    out: IO[bytes],
    records: Iterable[Mapping[str, Any]],
    *,
    model: str,
    dim: int | None,
    exported_at: datetime,
    agent: str | None = None,
    tag: str | None = None,
    key: str | None = None,
) -> Header:
    """Write a knowledge file (header, then ``records``) to a binary stream; return its header.

    ``records`` come from :func:`encode_memory` / :func:`encode_change`. The body is
    spooled (to disk when large) because the header, written first, carries its checksum.
    With ``key`` the header is signed (see :func:`sign`).
    """
    digest = hashlib.sha256()
    counts = {"memory": 0, "change": 0, "vector": 0}
    with tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024) as body:
        for record in records:
            kind = record.get("type")
            if kind not in ("memory", "change"):
                raise ValidationError(f"unknown record type {kind!r}")
            counts[kind] += 1
            counts["vector"] += 1 if record.get("vector") is not None else 0
            line = _line(record)
            digest.update(line)
            body.write(line)
        header = Header(
            model=model,
            dim=dim,
            exported_at=exported_at,
            agent=agent,
            tag=tag,
            memories=counts["memory"],
            changes=counts["change"],
            vectors=counts["vector"],
            sha256=digest.hexdigest(),
        )
        if key is not None:
            fields = header.to_dict()
            header = dataclasses.replace(header, signature=sign(fields, key), signed_fields=fields)
        out.write(_line(header.to_dict()))
        body.seek(0)
        while chunk := body.read(1024 * 1024):
            out.write(chunk)
    return header


# -- reading and validation ------------------------------------------------------------------------------


def _header(record: Mapping[str, Any]) -> Header:
    if record.get("format") != FORMAT:
        raise fields.Bad(f"not an engramdb knowledge file (format {_shown(record.get('format'))}, expected {FORMAT!r})")
    version = record.get("version")
    if version != VERSION or isinstance(version, bool):
        raise fields.Bad(f"unsupported knowledge format version {_shown(version)} (this engramdb reads {VERSION})")
    fields.exact_keys(record, _HEADER_KEYS, _HEADER_OPTIONAL, "header")
    counts = record["counts"]
    if not isinstance(counts, dict):
        raise fields.Bad("counts must be a JSON object")
    fields.exact_keys(counts, _COUNT_KEYS, frozenset(), "counts")
    dim = record["dim"]
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM):
        raise fields.Bad(f"dim must be null or an integer from 1 to {MAX_DIM}, not {_shown(dim)}")
    sha = record["sha256"]
    if not isinstance(sha, str) or not _SHA256_RE.fullmatch(sha):
        raise fields.Bad("sha256 must be 64 lowercase hex digits")
    signature = record.get("signature")
    if signature is not None and (not isinstance(signature, str) or not _SHA256_RE.fullmatch(signature)):
        raise fields.Bad("signature must be 64 lowercase hex digits (an HMAC-SHA256)")
    return Header(
        model=fields.name(record["model"], "model"),
        dim=dim,
        exported_at=fields.timestamp(record["exported_at"], "exported_at"),
        agent=None if record["agent"] is None else fields.valid(check.agent_name, record["agent"]),
        tag=None if record["tag"] is None else fields.valid(check.tag, record["tag"]),
        memories=fields.count(counts["memories"], "counts.memories"),
        changes=fields.count(counts["changes"], "counts.changes"),
        vectors=fields.count(counts["vectors"], "counts.vectors"),
        sha256=sha,
        signature=signature,
        signed_fields={k: v for k, v in record.items() if k != "signature"},
    )


def _memory(record: Mapping[str, Any], dim: int | None) -> Entry:
    fields.exact_keys(record, _MEMORY_KEYS, _MEMORY_OPTIONAL, "memory record")
    kind = fields.valid(check.kind, record["kind"])
    visibility = fields.valid(check.visibility, record["visibility"])
    content = fields.valid(check.content, record["content"])
    successes = fields.number(record["successes"], "successes")
    attempts = fields.number(record["attempts"], "attempts")
    if successes > attempts:
        raise fields.Bad(f"successes ({successes:g}) exceed attempts ({attempts:g})")
    metadata = fields.valid(check.stored_metadata, record["metadata"], what="metadata")
    created = fields.timestamp(record["created_at"], "created_at")
    occurred = fields.optional_timestamp(record.get("occurred_at"), "occurred_at")
    memory = Memory(
        user=fields.valid(check.scope, record.get("user"), what="user"),
        session=fields.valid(check.scope, record.get("session"), what="session"),
        occurred_at=created if occurred is None else occurred,
        valid_until=fields.optional_timestamp(record.get("valid_until"), "valid_until"),
        id=fields.ident(record["id"], "id"),
        agent=fields.valid(check.agent_name, record["agent"]),
        kind=kind,
        content=content,
        tags=fields.tags(record["tags"]),
        metadata=metadata,
        created_at=created,
        updated_at=fields.timestamp(record["updated_at"], "updated_at"),
        last_accessed=fields.optional_timestamp(record.get("last_accessed"), "last_accessed"),
        access_count=fields.count(record["access_count"], "access_count"),
        confidence=fields.valid(check.confidence, record["confidence"]),
        successes=successes,
        attempts=attempts,
        visibility=visibility,
        redacted=fields.strings(record.get("redacted", []), "redacted"),
    )
    raw_vector = record.get("vector")
    return Entry(memory=memory, vector=None if raw_vector is None else fields.vector(raw_vector, dim))


def _change(record: Mapping[str, Any]) -> Change:
    fields.exact_keys(record, _CHANGE_KEYS, frozenset(), "change record")
    return Change(
        seq=fields.count(record["seq"], "seq"),
        memory_id=fields.ident(record["memory_id"], "memory_id"),
        action=fields.name(record["action"], "action"),
        at=fields.timestamp(record["at"], "at"),
        actor=fields.name(record["actor"], "actor"),
        before=fields.mapping(record["before"], "before", optional=True),
        after=fields.mapping(record["after"], "after", optional=True),
    )


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        yield line


def loads_bundle(data: bytes, *, source: str = "input") -> Bundle:
    """:func:`read_bundle` on bytes in memory."""
    return read_bundle(io.BytesIO(data), source=source)


def read_bundle(stream: IO[bytes], *, source: str = "input") -> Bundle:
    """Read and completely validate a knowledge file; raise ValidationError (naming ``source`` and the line).

    Checks run in this order, so the message names the most telling problem: the
    header, that no line is cut short, the checksum, each record, then the counts.
    """
    lines = iter(_lines(stream))

    def fail(lineno: int | None, message: str) -> ValidationError:
        where = f"{source}: line {lineno}: " if lineno is not None else f"{source}: "
        return ValidationError(where + message)

    first = next(lines, b"")
    if not first.strip():
        raise fail(None, "empty file: not an engramdb knowledge file")
    try:
        if len(first) > MAX_LINE_BYTES:
            raise fields.Bad("line is too long")
        header = _header(fields.parse(first))
    except fields.Bad as exc:
        raise fail(1, f"bad header: {exc}") from None
    if not first.endswith(b"\n"):
        raise fail(1, "truncated file: the header line is incomplete and there is no body")

    body: list[bytes] = []
    digest = hashlib.sha256()
    for lineno, raw in enumerate(lines, start=2):
        if len(raw) > MAX_LINE_BYTES:
            raise fail(lineno, f"line is longer than {MAX_LINE_BYTES} bytes")
        if not raw.endswith(b"\n"):
            raise fail(lineno, "truncated file: the last line is incomplete")
        digest.update(raw)
        body.append(raw)
    if digest.hexdigest() != header.sha256:
        raise fail(None, "checksum mismatch: the file was changed or truncated after it was exported")

    entries: list[Entry] = []
    changes: list[Change] = []
    ids: set[str] = set()
    vectors = 0
    for lineno, raw in enumerate(body, start=2):
        try:
            record = fields.parse(raw)
            kind = record.get("type")
            if kind == "memory":
                entry = _memory(record, header.dim)
                if entry.memory.id in ids:
                    raise fields.Bad(f"duplicate memory id {entry.memory.id!r}")
                ids.add(entry.memory.id)
                vectors += entry.vector is not None
                entries.append(entry)
            elif kind == "change":
                changes.append(_change(record))
            else:
                raise fields.Bad(f"unknown record type {_shown(kind)} (expected 'memory' or 'change')")
        except fields.Bad as exc:
            raise fail(lineno, str(exc)) from None
    for change in changes:
        if change.memory_id not in ids:
            raise fail(None, f"history entry refers to memory {change.memory_id!r}, which is not in the file")
    found = {"memories": len(entries), "changes": len(changes), "vectors": vectors}
    declared = {"memories": header.memories, "changes": header.changes, "vectors": header.vectors}
    if found != declared:
        problems = ", ".join(f"{k}: header {declared[k]}, file {found[k]}" for k in found if found[k] != declared[k])
        raise fail(None, f"counts do not match the header ({problems})")
    return Bundle(header=header, entries=tuple(entries), changes=tuple(changes))
