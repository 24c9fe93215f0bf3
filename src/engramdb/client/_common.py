"""What every part of the remote client shares: the sender, decoders, and the methods that stay in-process."""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Final, NoReturn, Protocol, TypeVar

from engramdb.client._transport import Call
from engramdb.errors import EngramError, NotFound, ValidationError
from engramdb.models._decode import from_dict

__all__ = ["LOCAL_ONLY", "Send"]

T = TypeVar("T")

#: Public methods that exist only in-process, and why (the parity test reads this).
LOCAL_ONLY: Final[dict[str, str]] = {
    "reembed": "re-embedding rewrites the server's own store: run 'engram reembed' where the store is",
    "session": "a live in-process window; through a server use the REST routes /session and /session/messages",
    "episodes.begin": "a context manager around code running in this process: use episodes.start/event/end",
    "learning.adaptive": "an in-process control loop with callbacks: use learning.suggest and learning.record",
    "failures.run_checks": "runs commands and reads files: it must run where the checks apply, not on the server",
    "retention.run_scheduled": "the server runs its own schedule when it opens the store",
    "keys.authenticate": "the server authenticates each request itself",
    "keys.configured": "the server's own question: GET /me says who a key acts as",
}


class Send(Protocol):
    """Sends one call and returns its decoded answer."""

    def __call__(self, call: Call[T], /) -> T: ...


def _local_only(name: str) -> NoReturn:
    raise EngramError(f"{name} is not available through a server: {LOCAL_ONLY[name]}")


def _one(cls: type[T]) -> Callable[[Any], T]:
    return lambda data: from_dict(cls, data)


def _many(cls: type[T], field: str) -> Callable[[Any], builtins.list[T]]:
    return lambda data: [from_dict(cls, item) for item in data[field]]


def _str(name: str) -> Callable[[Any], str]:
    return lambda data: str(data[name])


def _int(name: str) -> Callable[[Any], int]:
    return lambda data: int(data[name])


def _none(data: Any) -> None:
    return None


def _listed(value: Any) -> Any:
    """``value`` as a list when it is a collection; anything else as it is, for the server to refuse in its words."""
    return list(value) if isinstance(value, Iterable) else value


def _kinds(kind: str | Sequence[str] | None) -> Any:
    return None if kind is None else [kind] if isinstance(kind, str) else _listed(kind)


def _unusable(path: object) -> ValidationError:
    return ValidationError(f"path must be a file path or an open binary stream, not {type(path).__name__}")


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0][:200]


def _text(path: str | os.PathLike[str] | IO[bytes]) -> tuple[str, str]:
    """A knowledge file's text and name, read on this side (the server never sees client paths); the embedded
    store's errors for a path it cannot read."""
    if isinstance(path, str | os.PathLike):
        try:
            p = Path(path)
            return p.read_bytes().decode("utf-8"), p.name
        except FileNotFoundError:
            raise NotFound(f"no knowledge file at {os.fspath(path)!s}") from None
        except (OSError, ValueError) as exc:
            raise ValidationError(f"cannot read knowledge file {os.fspath(path)!s}: {_reason(exc)}") from None
    if not callable(getattr(path, "read", None)):
        raise _unusable(path)
    data = path.read()
    if not isinstance(data, bytes):
        raise _unusable(path)
    try:
        return data.decode("utf-8"), str(getattr(path, "name", "upload.jsonl"))
    except UnicodeDecodeError as exc:
        raise ValidationError(f"cannot read the knowledge stream: {_reason(exc)}") from None


def _set(body: dict[str, Any]) -> dict[str, Any]:
    """Fields left at None dropped: the server applies its own defaults (and older servers lack new fields)."""
    return {k: v for k, v in body.items() if v is not None}


class _Area:
    def __init__(self, send: Send) -> None:
        self._send = send
