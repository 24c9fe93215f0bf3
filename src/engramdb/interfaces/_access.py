"""Who a server's caller is and which agent it may act as: one policy for REST and MCP.

With API keys configured in the store, every request must carry one (``Authorization:
Bearer <token>`` or ``X-API-Key: <token>``), and the key decides the agent:

- a request naming no agent acts as the key's agent;
- naming another agent is refused (:class:`~engramdb.services.keys.AccessDenied`, HTTP 403),
  unless the key is an admin key, which may act for any agent;
- a read-only key may not write.

Without keys (and only where the operator allowed it: loopback, or an explicit
``--allow-unauthenticated``), the caller is *trusted*: it acts as whichever agent it
names, as in the Python API.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from engramdb import ApiKeys
from engramdb.errors import AccessDenied, NotAuthenticated, ValidationError
from engramdb.models.auth import ApiKey

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = [
    "DEFAULT_AGENT",
    "LOOPBACK_NAMES",
    "Caller",
    "NotAuthenticated",
    "allowed_host_names",
    "authenticate",
    "host_name",
    "is_loopback",
    "keys_of",
    "token_from_headers",
]

DEFAULT_AGENT: Final = "default"
#: The names a loopback-bound server also answers to.
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})


@dataclass(frozen=True, slots=True)
class Caller:
    """The identity a request acts with: a key (with its agent and rights), or trusted (no keys configured)."""

    key: ApiKey | None = None

    @property
    def trusted(self) -> bool:
        """No key: the caller may name any agent (servers without keys, on loopback or explicitly allowed)."""
        return self.key is None

    @property
    def may_act_for_anyone(self) -> bool:
        return self.key is None or self.key.admin

    def agent(self, requested: object = None) -> str:
        """The agent to act as, given the one the request names (None: the key's agent, else ``default``)."""
        if requested is None:
            return self.key.agent if self.key is not None else DEFAULT_AGENT
        if not isinstance(requested, str):
            raise ValidationError(f"agent must be a string, not {type(requested).__name__}")
        if self.may_act_for_anyone or (self.key is not None and requested == self.key.agent):
            return requested
        assert self.key is not None
        raise AccessDenied(f"this API key acts as agent {self.key.agent!r}: it may not act as agent {requested!r}")

    def scope(self, requested: str | None = None) -> str | None:
        """The agent a read or change of one memory is limited to; None means any agent (trusted or admin only)."""
        if requested is None and self.may_act_for_anyone:
            return None
        return self.agent(requested)

    def require_write(self) -> None:
        """Refuse a change with a read-only key."""
        if self.key is not None and self.key.read_only:
            raise AccessDenied(f"API key {self.key.id} is read-only")

    def to_dict(self) -> dict[str, Any]:
        """What ``GET /me`` shows: the key (without secret) or that the caller is trusted."""
        if self.key is None:
            return {"authenticated": False, "agent": None, "read_only": False, "admin": True}
        return {
            "authenticated": True,
            "agent": self.key.agent,
            "read_only": self.key.read_only,
            "admin": self.key.admin,
            "key_id": self.key.id,
        }


def keys_of(mem: Engram) -> ApiKeys:
    """The API keys of ``mem``'s store (``mem.keys``)."""
    return mem.keys


def token_from_headers(headers: Mapping[str, str]) -> str | None:
    """The API key a request carries (``Authorization: Bearer T`` or ``X-API-Key: T``), else None.

    ``headers`` maps lower-case names to values.
    """
    explicit = headers.get("x-api-key")
    if explicit:
        return explicit.strip()
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


def authenticate(keys: ApiKeys, token: str | None, *, allow_trusted: bool) -> Caller:
    """The caller of a request carrying ``token``: its key if keys are configured, else trusted if allowed.

    Raises :class:`NotAuthenticated` when keys are configured and the token is missing or
    not an active key, and when no keys exist but trusted callers are not allowed.
    """
    if token is not None:
        key = keys.authenticate(token)
        if key is None:
            raise NotAuthenticated("invalid or revoked API key")
        return Caller(key)
    if keys.configured():
        raise NotAuthenticated("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    if not allow_trusted:
        raise NotAuthenticated("this server requires an API key, and none is configured: run 'engram keys create'")
    return Caller()


# -- hosts -----------------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: assume it may be reachable from elsewhere
        return False


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or an origin's authority, lower case: ``[::1]:80`` -> ``[::1]``."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end != -1 else value
    name, _, _port = value.partition(":") if value.count(":") == 1 else (value, "", "")
    return name.rstrip(".")


def allowed_host_names(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str] | None:
    """The ``Host`` names a server bound to ``bind_host`` answers (None: any, when ``*`` is among ``extra``).

    A server answers the name it is bound to and the ``extra`` names (``--allowed-host``);
    a loopback server also its loopback names. Anything else is refused: a web page whose
    host name resolves to this machine (DNS rebinding) cannot reach the API.
    """
    names = {host_name(e) for e in extra if e.strip()}
    if "*" in names:
        return None
    bound = bind_host.strip().lower()
    if ":" in bound and not bound.startswith("["):
        bound = f"[{bound}]"  # an IPv6 address appears bracketed in a Host header
    if bound not in ("0.0.0.0", "[::]", ""):  # noqa: S104 - compared, not bound
        names.add(bound)
    if is_loopback(bind_host):
        names |= LOOPBACK_NAMES
    return frozenset(names)
