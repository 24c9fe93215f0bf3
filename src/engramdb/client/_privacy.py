"""The remote privacy, routing and key areas: sharing, knowledge, audit, retention, routing, keys."""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, NoReturn

from engramdb.client._common import (
    _Area,
    _int,
    _kinds,
    _listed,
    _local_only,
    _many,
    _one,
    _reason,
    _set,
    _str,
    _text,
    _unusable,
)
from engramdb.client._transport import Call
from engramdb.errors import EngramError, ValidationError
from engramdb.models import (
    ApiKey,
    AuditEvent,
    CleanupReport,
    Memory,
    NewApiKey,
    PackReport,
    RouteChoice,
    Share,
    Verification,
)
from engramdb.models._decode import from_dict


class RemoteSharing(_Area):
    """``mem.sharing`` through a server."""

    def _body(self, memory_ids: str | Iterable[str] | None, **rest: Any) -> dict[str, Any]:
        ids = None if memory_ids is None else [memory_ids] if isinstance(memory_ids, str) else _listed(memory_ids)
        return {"memory_ids": ids, **rest}

    def share(
        self,
        memory_ids: str | Iterable[str] | None = None,
        *,
        from_agent: str,
        to_agent: str = "*",
        tag: str | None = None,
        pattern: str | None = None,
    ) -> int:
        body = self._body(memory_ids, from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern)
        return self._send(Call("POST", "/shares", _int("shared"), body=body))

    def unshare(
        self,
        memory_ids: str | Iterable[str] | None = None,
        *,
        from_agent: str,
        to_agent: str = "*",
        tag: str | None = None,
        pattern: str | None = None,
    ) -> int:
        body = self._body(memory_ids, from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern)
        return self._send(Call("DELETE", "/shares", _int("unshared"), body=body))

    def list(self, *, from_agent: str | None = None, to_agent: str | None = None) -> builtins.list[Share]:
        query = {"from_agent": from_agent, "to_agent": to_agent}
        return self._send(Call("GET", "/share-list", _many(Share, "shares"), query=query))


class RemoteKnowledge(_Area):
    """``mem.knowledge`` through a server: files are read and written on this side."""

    def export_file(
        self,
        path: str | os.PathLike[str] | IO[bytes],
        *,
        agent: str,
        tag: str | None = None,
        with_vectors: bool = False,
        with_history: bool = False,
        user: str | None = None,
        session: str | None = None,
    ) -> int:
        def write(data: Any) -> int:
            content = str(data["content"]).encode("utf-8")
            if isinstance(path, str | os.PathLike):
                try:
                    target = Path(path)
                    partial = target.with_name(target.name + ".partial")
                    partial.write_bytes(content)
                    partial.replace(target)  # atomic, as the embedded export
                except (OSError, ValueError) as exc:
                    raise ValidationError(f"cannot write knowledge file {os.fspath(path)!s}: {_reason(exc)}") from None
            else:
                path.write(content)
            return int(data["count"])

        if not isinstance(path, str | os.PathLike) and not callable(getattr(path, "write", None)):
            raise _unusable(path)  # before the export is asked for

        query = {
            "agent": agent,
            "tag": tag,
            "with_vectors": with_vectors,
            "with_history": with_history,
            "user": user,
            "session": session,
        }
        return self._send(Call("GET", "/knowledge/export", write, query=query))

    def import_file(
        self,
        path: str | os.PathLike[str] | IO[bytes],
        *,
        agent: str | None = None,
        keep_agents: bool = False,
        dry_run: bool = False,
    ) -> int:
        content, name = _text(path)
        body = {"content": content, "name": name, "agent": agent, "keep_agents": keep_agents, "dry_run": dry_run}
        return self._send(Call("POST", "/knowledge/import", _int("count"), body=body))

    def distill(
        self,
        *,
        agent: str | None = None,
        kind: str | Sequence[str] | None = None,
        min_group: int = 3,
        dry_run: bool = False,
        archive_sources: bool = False,
    ) -> builtins.list[Memory]:
        body = {
            "agent": agent,
            "kind": _kinds(kind),
            "min_group": min_group,
            "dry_run": dry_run,
            "archive_sources": archive_sources,
        }
        return self._send(Call("POST", "/knowledge/distill", _many(Memory, "memories"), body=body))

    def merge(self, *, from_agent: str, to_agent: str, tag: str | None = None) -> int:
        body = {"from_agent": from_agent, "to_agent": to_agent, "tag": tag}
        return self._send(Call("POST", "/knowledge/merge", _int("merged"), body=body))

    def seed(self, pack: str, *, agent: str | None = None) -> PackReport:
        return self._send(Call("POST", "/knowledge/seed", _one(PackReport), body={"pack": pack, "agent": agent}))


class RemoteAudit(_Area):
    """``mem.audit`` through a server."""

    def log(
        self,
        *,
        agent: str | None = None,
        limit: int = 100,
        memory_id: str | None = None,
        action: str | None = None,
    ) -> builtins.list[AuditEvent]:
        query = {"agent": agent, "limit": limit, "memory": memory_id, "action": action}
        return self._send(Call("GET", "/audit", _many(AuditEvent, "events"), query=query))

    def verification(self, *, expect: str | None = None) -> Verification:
        return self._send(Call("GET", "/audit/verify", _one(Verification), query={"expect": expect}))

    def verify(self) -> bool:
        return self._send(Call("GET", "/audit/verify", lambda data: from_dict(Verification, data).ok))


class RemoteRetention(_Area):
    """``mem.retention`` through a server (admin key): the server's policy applies."""

    def cleanup(
        self,
        *,
        dry_run: bool = False,
        agent: str | None = None,
        policy: Any = None,
        now: datetime | None = None,
        user: str | None = None,
        session: str | None = None,
    ) -> CleanupReport:
        if policy is not None or now is not None:
            raise EngramError("retention.cleanup(policy=..., now=...) is not available through a server")
        body = {"dry_run": dry_run, "agent": agent, "user": user, "session": session}
        return self._send(Call("POST", "/retention/cleanup", _one(CleanupReport), body=_set(body)))

    def run_scheduled(self) -> NoReturn:
        _local_only("retention.run_scheduled")


class RemoteRouting(_Area):
    """``mem.routing`` through a server (candidates travel as names: a spec's tier, cost and latency stay here)."""

    def decide(
        self,
        task: str,
        *,
        models: Any,
        task_type: str | None = None,
        agent: str | None = None,
        complexity: str | None = None,
        context_length: int = 0,
        require_fast: bool = False,
        require_cheap: bool = False,
        cost_weight: float | None = None,
        latency_weight: float | None = None,
        exploration: float | None = None,
        seed: int | None = None,
    ) -> RouteChoice:
        body = _route_body(
            task,
            models,
            task_type=task_type,
            agent=agent,
            complexity=complexity,
            context_length=context_length,
            require_fast=require_fast,
            require_cheap=require_cheap,
            cost_weight=cost_weight,
            latency_weight=latency_weight,
            exploration=exploration,
            seed=seed,
        )
        return self._send(Call("POST", "/route", _one(RouteChoice), body=body))

    def route(
        self,
        task: str,
        *,
        models: Any,
        task_type: str | None = None,
        agent: str | None = None,
        complexity: str | None = None,
        context_length: int = 0,
        require_fast: bool = False,
        require_cheap: bool = False,
        cost_weight: float | None = None,
        latency_weight: float | None = None,
        exploration: float | None = None,
        seed: int | None = None,
    ) -> str:
        body = _route_body(
            task,
            models,
            task_type=task_type,
            agent=agent,
            complexity=complexity,
            context_length=context_length,
            require_fast=require_fast,
            require_cheap=require_cheap,
            cost_weight=cost_weight,
            latency_weight=latency_weight,
            exploration=exploration,
            seed=seed,
        )
        return self._send(Call("POST", "/route", _str("model"), body=body))

    def record(
        self,
        task: str,
        model: str,
        outcome: str | bool | float,
        *,
        task_type: str | None = None,
        latency_ms: float | None = None,
        cost: float | None = None,
        agent: str | None = None,
    ) -> Memory:
        body = {
            "task": task,
            "model": model,
            "outcome": outcome,
            "task_type": task_type,
            "latency_ms": latency_ms,
            "cost": cost,
            "agent": agent,
        }
        return self._send(Call("POST", "/route/outcomes", _one(Memory), body=body))


def _route_body(task: str, models: Any, *, exploration: float | None, seed: int | None, **rest: Any) -> dict[str, Any]:
    if exploration is not None or seed is not None:
        raise EngramError("routing through a server uses the server's exploration: exploration and seed stay local")
    if isinstance(models, Mapping):
        names: Any = list(models)
    elif isinstance(models, Iterable):
        names = [m if isinstance(m, str) else getattr(m, "name", m) for m in models]
    else:
        names = models  # for the server to refuse
    return {"task": task, "models": names, **rest}


class RemoteKeys(_Area):
    """``mem.keys`` through a server (an admin key, or a trusted caller)."""

    def create(
        self, agent: str, *, read_only: bool = False, admin: bool = False, label: str | None = None
    ) -> NewApiKey:
        body = {"agent": agent, "read_only": read_only, "admin": admin, "label": label}
        return self._send(Call("POST", "/api-keys", _one(NewApiKey), body=body))

    def list(self, *, include_revoked: bool = True) -> builtins.list[ApiKey]:
        query = {"include_revoked": include_revoked}
        return self._send(Call("GET", "/api-keys", _many(ApiKey, "keys"), query=query))

    def revoke(self, key_id: str) -> ApiKey:
        return self._send(Call("DELETE", "/api-keys", _one(ApiKey), body={"key_id": key_id}))

    def authenticate(self, *args: Any, **kwargs: Any) -> NoReturn:
        _local_only("keys.authenticate")

    def configured(self, *args: Any, **kwargs: Any) -> NoReturn:
        _local_only("keys.configured")
