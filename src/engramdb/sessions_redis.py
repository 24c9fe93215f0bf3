"""Session windows in Redis: several processes (and machines) see one agent's short-term window.

``RedisSessions(url)`` connects to one Redis database; ``.window(agent)`` is a
:class:`~engramdb.shortterm.SessionWindow` for :class:`~engramdb.shortterm.SessionContext`
(same API as the in-process window), and ``.context(agent, promoter=mem.remember)`` makes
the whole session context::

    sessions = RedisSessions("redis://cache.internal:6379/0", ttl=3600)
    ctx = sessions.context("alice", promoter=mem.remember)
    ctx.add("the deploy key is in the vault")      # every process of alice sees it

Each agent's window is three keys (messages, variables, their token counts) under
``{prefix}:{agent}:`` (a conversation's: ``{prefix}:{agent}:u:{user}:s:{session}:``). Every write is one
atomic server-side script (append or set, then trim to the writer's token budget, then refresh the TTL), so
concurrent writers never lose a message or overshoot the budget. The window lives ``ttl`` seconds after
its last write (None: until cleared). Redis errors surface as
:class:`~engramdb.errors.StorageError`.

Requires the ``redis`` extra: ``pip install 'engramdb[redis]'``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import quote

try:
    import redis
    from redis.exceptions import RedisError
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("shared sessions need the redis package: pip install 'engramdb[redis]'", name=exc.name) from exc

from engramdb import _validate as check
from engramdb.errors import StorageError, ValidationError
from engramdb.shortterm import Message, Promoter, SessionContext, TokenCounter, WindowState

if TYPE_CHECKING:
    from redis.commands.core import Script

__all__ = ["DEFAULT_PREFIX", "DEFAULT_TTL", "RedisSessions", "RedisWindow"]

#: Seconds a window lives after its last write.
DEFAULT_TTL: Final = 86_400.0
DEFAULT_PREFIX: Final = "engram:session"

T = TypeVar("T")

# Trimming, shared by both writes: drop the oldest message while more than one is left and the window
# (messages plus variables) holds more than the budget; then refresh the TTL of the three keys.
_TRIM_AND_EXPIRE = """
local held = 0
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  held = held + cjson.decode(raw)['tokens']
end
for _, n in ipairs(redis.call('HVALS', KEYS[3])) do
  held = held + tonumber(n)
end
local budget = tonumber(ARGV[1])
while held > budget and redis.call('LLEN', KEYS[1]) > 1 do
  held = held - cjson.decode(redis.call('LPOP', KEYS[1]))['tokens']
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return held
"""
# KEYS: messages, variables, variable tokens. ARGV: budget, ttl ms, message.
_ADD = "redis.call('RPUSH', KEYS[1], ARGV[3])\n" + _TRIM_AND_EXPIRE
# ARGV: budget, ttl ms, name, value (JSON), tokens.
_SET = "redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])\nredis.call('HSET', KEYS[3], ARGV[3], ARGV[5])\n" + (
    _TRIM_AND_EXPIRE
)


def _encode(message: Message) -> str:
    """A message as stored: canonical JSON, so an equal message encodes to the same string (LREM finds it)."""
    body = {"role": message.role, "content": message.content, "at": message.at.isoformat(), "tokens": message.tokens}
    return json.dumps(body, sort_keys=True, ensure_ascii=False)


def _decode(raw: str) -> Message:
    body = json.loads(raw)
    return Message(
        role=body["role"], content=body["content"], at=datetime.fromisoformat(body["at"]), tokens=int(body["tokens"])
    )


class RedisSessions:
    """Session windows kept in one Redis database, shared by every process that opens it.

    ``url`` is a Redis URL (``redis://[:password@]host:port/db``, ``rediss://`` for TLS,
    ``unix:///path.sock``); or pass a ready ``client`` (it must decode responses). ``ttl``
    is how many seconds a window lives after its last write (None: until cleared).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | None = None,
        ttl: float | None = DEFAULT_TTL,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if (url is None) == (client is None):
            raise ValidationError("give either a Redis url or a client")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0):
            raise ValidationError(f"ttl must be a positive number of seconds or None, not {check.shown(ttl)}")
        self.prefix = check.name(prefix, what="prefix")
        self.ttl = ttl
        if client is None:
            assert url is not None
            try:
                client = redis.Redis.from_url(url, decode_responses=True)
            except ValueError as exc:
                raise ValidationError(f"bad Redis url: {exc}") from None
            self._owned = True
        else:
            self._owned = False
        self.client: redis.Redis = client
        self.add_script: Script = client.register_script(_ADD)
        self.set_script: Script = client.register_script(_SET)

    def window(self, agent: str, *, user: str | None = None, session: str | None = None) -> RedisWindow:
        """The window of ``agent``'s conversation ``session`` with ``user`` (its keys are created by the first
        write); each (agent, user, session) has its own."""
        return RedisWindow(
            self,
            check.agent_name(agent),
            user=check.scope(user, what="user"),
            session=check.scope(session, what="session"),
        )

    def context(
        self,
        agent: str,
        *,
        promoter: Promoter,
        token_budget: int = 2000,
        count_tokens: TokenCounter | None = None,
        user: str | None = None,
        session: str | None = None,
    ) -> SessionContext:
        """A :class:`SessionContext` of ``agent`` (and ``user``, ``session``) over its shared window
        (``promoter``: e.g. ``mem.remember``)."""
        if count_tokens is None:
            from engramdb.embeddings import count_tokens as default_counter

            count_tokens = default_counter
        window = self.window(agent, user=user, session=session)
        return SessionContext(
            agent,
            token_budget=token_budget,
            count_tokens=count_tokens,
            promoter=promoter,
            window=window,
            user=window.user,
            session=window.session,
        )

    def ping(self) -> None:
        """Check the server answers (StorageError if not)."""
        self.call(self.client.ping)

    def close(self) -> None:
        """Close the connections (of a client this object opened)."""
        if self._owned:
            self.client.close()

    def __enter__(self) -> RedisSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one Redis call; a Redis error becomes a StorageError with one line."""
        try:
            return fn(*args, **kwargs)
        except RedisError as exc:
            raise StorageError(
                f"session store (Redis) failed: {' '.join(str(exc).split()) or type(exc).__name__}"
            ) from exc

    @property
    def ttl_ms(self) -> int:
        """The TTL in milliseconds (0: none)."""
        return 0 if self.ttl is None else max(1, round(self.ttl * 1000))


class RedisWindow:
    """One agent's session window in Redis (a :class:`~engramdb.shortterm.SessionWindow`)."""

    def __init__(
        self, sessions: RedisSessions, agent: str, *, user: str | None = None, session: str | None = None
    ) -> None:
        self.agent = agent
        self.user = user
        self.session = session
        self._s = sessions
        # Names are quoted (":" becomes "%3A"), so the markers below cannot be forged by a name; an agent's
        # window without user or session keeps the key it always had.
        base = f"{sessions.prefix}:{quote(agent, safe='')}"
        if user is not None:
            base += f":u:{quote(user, safe='')}"
        if session is not None:
            base += f":s:{quote(session, safe='')}"
        self.keys: tuple[str, str, str] = (f"{base}:messages", f"{base}:variables", f"{base}:variable_tokens")

    def snapshot(self) -> WindowState:
        """See :meth:`SessionWindow.snapshot` (one transaction: the three keys as of one moment)."""
        messages, variables, tokens = self.keys

        def read() -> list[Any]:
            pipe = self._s.client.pipeline(transaction=True)
            pipe.lrange(messages, 0, -1)
            pipe.hgetall(variables)
            pipe.hgetall(tokens)
            return pipe.execute()

        raw_messages, raw_variables, raw_tokens = self._s.call(read)
        return WindowState(
            messages=tuple(_decode(m) for m in raw_messages),
            variables={k: json.loads(v) for k, v in raw_variables.items()},
            variable_tokens={k: int(v) for k, v in raw_tokens.items()},
        )

    def add(self, message: Message, *, budget: int) -> None:
        """See :meth:`SessionWindow.add`."""
        self._s.call(self._s.add_script, keys=list(self.keys), args=[budget, self._s.ttl_ms, _encode(message)])

    def set(self, name: str, value: Any, *, tokens: int, budget: int) -> None:
        """See :meth:`SessionWindow.set`."""
        rendered = json.dumps(value, sort_keys=True, ensure_ascii=False)
        self._s.call(self._s.set_script, keys=list(self.keys), args=[budget, self._s.ttl_ms, name, rendered, tokens])

    def unset(self, name: str) -> None:
        """See :meth:`SessionWindow.unset`."""
        _, variables, tokens = self.keys

        def drop() -> None:
            pipe = self._s.client.pipeline(transaction=True)
            pipe.hdel(variables, name)
            pipe.hdel(tokens, name)
            pipe.execute()

        self._s.call(drop)

    def remove(self, message: Message) -> bool:
        """See :meth:`SessionWindow.remove`."""
        removed = self._s.call(self._s.client.lrem, self.keys[0], 1, _encode(message))
        return bool(removed)

    def clear(self) -> None:
        """See :meth:`SessionWindow.clear`."""
        self._s.call(self._s.client.delete, *self.keys)

    def ttl(self) -> float | None:
        """Seconds until the window expires (None: no expiry, or nothing stored)."""

        def read() -> list[Any]:
            pipe = self._s.client.pipeline(transaction=True)
            for key in self.keys:
                pipe.pttl(key)
            return pipe.execute()

        left = max(int(ms) for ms in self._s.call(read))
        return None if left < 0 else left / 1000
