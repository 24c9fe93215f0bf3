"""API keys: who a caller of the REST and MCP servers is, and what it may do.

A key is bound to one agent; it may be read-only, and an admin key may act for any
agent. ``create`` returns the secret token once: the store keeps only its SHA-256
(the token carries 256 random bits, so a plain hash is enough; no salt or slow hash
is needed) and compares hashes in constant time.

Keys live in the store itself (one JSON value under the meta key ``api_keys``), so
every ``engram serve`` in front of one PostgreSQL database sees the same keys, and a
revocation takes effect everywhere at the next request. Each change is a
read-modify-write inside one write transaction (``pipeline.transaction()``).

A token reads ``engram_<id>_<secret>``: the id (public, shown by ``engram keys list``)
finds the record, the hash of the whole token proves it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any, Final

from engramdb import _validate as check
from engramdb._util import parse_ts
from engramdb.errors import AccessDenied, NotFound, StorageError, ValidationError
from engramdb.models.auth import ApiKey, NewApiKey
from engramdb.services._base import Service

__all__ = ["META_KEY", "TOKEN_PREFIX", "AccessDenied", "ApiKeys"]

#: The meta key holding every key record (a JSON object).
META_KEY: Final = "api_keys"
#: Every token starts with this (so a leaked one is recognisable, e.g. by secret scanners).
TOKEN_PREFIX: Final = "engram_"  # noqa: S105 - a prefix, not a secret
_FORMAT: Final = 1
_ID_BYTES: Final = 6
_SECRET_BYTES: Final = 32  # 256 bits
_MAX_TOKEN_CHARS: Final = 200


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class ApiKeys(Service):
    """Create, list, revoke and check the API keys of one store (``mem.keys``)."""

    # -- records ------------------------------------------------------------------------------------------
    def _load(self) -> list[dict[str, Any]]:
        raw = self._store.meta.get(META_KEY)
        if raw is None:
            return []
        try:
            data = json.loads(raw)
            records = data["keys"]
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise TypeError("keys must be a list of objects")
        except (ValueError, TypeError, KeyError) as exc:
            raise StorageError(f"the store's API key records are unreadable: {exc}") from exc
        return records

    def _save(self, records: list[dict[str, Any]]) -> None:
        self._store.meta.set(META_KEY, json.dumps({"format": _FORMAT, "keys": records}, sort_keys=True))

    @staticmethod
    def _key(record: dict[str, Any]) -> ApiKey:
        created = parse_ts(record.get("created_at"))
        if created is None:
            raise StorageError(f"API key {record.get('id')!r} has no creation time")
        return ApiKey(
            id=str(record["id"]),
            agent=str(record["agent"]),
            read_only=bool(record.get("read_only", False)),
            admin=bool(record.get("admin", False)),
            created_at=created,
            revoked_at=parse_ts(record.get("revoked_at")),
            label=record.get("label"),
        )

    # -- the public API -----------------------------------------------------------------------------------
    def create(
        self, agent: str, *, read_only: bool = False, admin: bool = False, label: str | None = None
    ) -> NewApiKey:
        """A new key acting as ``agent``; the returned token is shown this once and never stored."""
        agent = check.agent_name(agent)
        if label is not None:
            label = check.name(label, what="label")
        if not isinstance(read_only, bool) or not isinstance(admin, bool):
            raise ValidationError("read_only and admin must be booleans")
        key_id = secrets.token_hex(_ID_BYTES)
        token = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(_SECRET_BYTES)}"
        now = self._clock()
        record: dict[str, Any] = {
            "id": key_id,
            "agent": agent,
            "read_only": read_only,
            "admin": admin,
            "created_at": now.isoformat(),
            "revoked_at": None,
            "label": label,
            "sha256": _digest(token),
        }
        with self._pipeline.transaction():
            records = self._load()
            records.append(record)
            self._save(records)
        return NewApiKey(key=self._key(record), token=token)

    def list(self, *, include_revoked: bool = True) -> list[ApiKey]:
        """Every key (oldest first); without ``include_revoked``, only those that still work."""
        keys = [self._key(r) for r in self._load()]
        return keys if include_revoked else [k for k in keys if k.active]

    def revoke(self, key_id: str) -> ApiKey:
        """Stop a key from working (at once, for every server of the store); returns it. NotFound if unknown."""
        if not isinstance(key_id, str) or not key_id.strip():
            raise ValidationError("a key id must be a non-empty string")
        wanted = key_id.strip()
        with self._pipeline.transaction():
            records = self._load()
            for record in records:
                if record.get("id") == wanted:
                    if record.get("revoked_at") is None:
                        record["revoked_at"] = self._clock().isoformat()
                        self._save(records)
                    return self._key(record)
        raise NotFound(f"no API key with id {wanted!r}")

    def configured(self) -> bool:
        """Whether any key still works (if so, the servers require one)."""
        return any(r.get("revoked_at") is None for r in self._load())

    def authenticate(self, token: str) -> ApiKey | None:
        """The active key whose token this is, else None (unknown, malformed or revoked)."""
        if not isinstance(token, str) or len(token) > _MAX_TOKEN_CHARS or not token.startswith(TOKEN_PREFIX):
            return None
        key_id, sep, _ = token[len(TOKEN_PREFIX) :].partition("_")
        if not sep:
            return None
        digest = _digest(token)
        for record in self._load():
            if record.get("id") != key_id:
                continue
            stored = record.get("sha256")
            if isinstance(stored, str) and hmac.compare_digest(stored, digest) and record.get("revoked_at") is None:
                return self._key(record)
            return None
        return None
