"""The remote client's one transport: a :class:`Call` (method, path, arguments, decoder) sent over HTTP.

Every method of the remote facade is a typed mapping to one :class:`Call`; :class:`Transport`
(sync) and :class:`AsyncTransport` (native async) send it with httpx and decode the JSON
answer into the library's values. An error answer becomes the library's own exception: the
server names its class in the ``X-Engram-Error`` header (else the HTTP status decides), and
the message is the server's one line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, NoReturn, TypeVar

import httpx

from engramdb import errors
from engramdb.errors import (
    AccessDenied,
    ConfigError,
    EngramError,
    LLMError,
    LLMNotConfigured,
    NotAuthenticated,
    NotFound,
    StorageError,
    ValidationError,
)

__all__ = ["API_PREFIX", "URL_SCHEMES", "AsyncTransport", "Call", "Transport", "is_url", "plain"]

T = TypeVar("T")

#: Locations that name a server rather than a store.
URL_SCHEMES: Final = ("http://", "https://")
#: The versioned API the client speaks (``engramdb.interfaces.rest.API_PREFIX``; not imported: no FastAPI here).
API_PREFIX: Final = "/v1"
#: Seconds to wait for a server's answer (a search embeds its query; a big batch embeds many).
DEFAULT_TIMEOUT: Final = 60.0
#: Seconds an idle connection is kept for reuse: well under uvicorn's 5 s keep-alive, so the client never sends a
#: request on a connection the server is closing at that moment ("Server disconnected without sending a
#: response": 16 of 2,000 calls in bench/load.py before, with httpx's default of 5 s, the same as the server's).
KEEPALIVE_SECONDS: Final = 2.0

_BY_NAME: Final[dict[str, type[EngramError]]] = {
    name: cls
    for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, EngramError) and name in errors.__all__
}
_BY_STATUS: Final[dict[int, type[EngramError]]] = {
    401: NotAuthenticated,
    403: AccessDenied,
    404: NotFound,
    413: ValidationError,
    415: ValidationError,
    422: ValidationError,
    501: LLMNotConfigured,
    502: LLMError,
    503: StorageError,
}


def is_url(location: object) -> bool:
    """Whether ``location`` names an engram server (``http://`` or ``https://``)."""
    return isinstance(location, str) and location.lower().startswith(URL_SCHEMES)


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: datetimes as ISO 8601, tuples and sets as lists, mappings as dicts."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request and how to read its answer: ``query`` for GET parameters, ``body`` for a JSON body."""

    method: str
    path: str
    decode: Callable[[Any], T]
    query: Mapping[str, Any] | None = None
    body: Any = None

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        """The request, or ValidationError for arguments JSON cannot carry (an integer of over 4,300 digits, NaN,
        a lone surrogate, an object, a structure nested past the interpreter's recursion limit): the server would
        refuse them, so they are refused here, before anything is sent."""
        try:
            params = {k: plain(v) for k, v in (self.query or {}).items() if v is not None}
            if self.body is None:
                return client.build_request(self.method, self.path, params=params)
            return client.build_request(self.method, self.path, params=params, json=plain(self.body))
        except (TypeError, ValueError, RecursionError) as exc:
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise ValidationError(
                f"the arguments of {self.method} {self.path} cannot be sent as JSON: {reason}"
            ) from None


def _raise(response: httpx.Response) -> NoReturn:
    try:
        message = str(response.json().get("error") or response.reason_phrase)
    except (ValueError, AttributeError):
        message = f"HTTP {response.status_code} {response.reason_phrase}"
    name = response.headers.get("x-engram-error", "")
    cls = _BY_NAME.get(name) or _BY_STATUS.get(response.status_code, EngramError)
    raise cls(message)


def _answer(call: Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        _raise(response)
    data: Any = None if response.status_code == 204 or not response.content else response.json()
    return call.decode(data)


def _unreachable(base: str, exc: httpx.HTTPError) -> StorageError:
    return StorageError(f"cannot reach the engram server at {base}: {str(exc) or type(exc).__name__}")


def _settings(url: str, api_key: str | None, timeout: float | None) -> tuple[str, dict[str, str], float]:
    if not is_url(url):
        raise ConfigError(f"a server location must start with http:// or https://, not {url!r}")
    key = api_key if api_key is not None else os.environ.get("ENGRAM_API_KEY") or None
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise ConfigError("api_key must be a non-empty string")
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key.strip()}"
    wait = DEFAULT_TIMEOUT if timeout is None else timeout
    if isinstance(wait, bool) or not isinstance(wait, int | float) or wait <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return url.rstrip("/"), headers, float(wait)


def _limits() -> httpx.Limits:
    return httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_SECONDS)


class Transport:
    """Sends calls to one server with a pooled sync httpx client (safe to share across threads)."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float | None = None) -> None:
        self.url, headers, wait = _settings(url, api_key, timeout)
        self._client = httpx.Client(base_url=self.url + API_PREFIX, headers=headers, timeout=wait, limits=_limits())

    def __call__(self, call: Call[T]) -> T:
        try:
            response = self._client.send(call.request(self._client))
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from exc
        return _answer(call, response)

    def close(self) -> None:
        self._client.close()


class AsyncTransport:
    """Sends calls to one server with a pooled async httpx client."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float | None = None) -> None:
        self.url, headers, wait = _settings(url, api_key, timeout)
        self._client = httpx.AsyncClient(
            base_url=self.url + API_PREFIX, headers=headers, timeout=wait, limits=_limits()
        )

    async def __call__(self, call: Call[T]) -> T:
        try:
            response = await self._client.send(call.request(self._client))
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from exc
        return _answer(call, response)

    async def close(self) -> None:
        await self._client.aclose()
