"""A LangGraph long-term store on engramdb (``pip install "engramdb[langgraph]"``).

>>> from engramdb import Engram
>>> from engramdb.integrations.langgraph import EngramStore
>>> store = EngramStore(Engram("./memory"))                             # doctest: +SKIP
>>> graph = builder.compile(store=store)                                # doctest: +SKIP

:class:`EngramStore` implements :class:`langgraph.store.base.BaseStore` (``get``/``put``/``delete``/``search``/
``list_namespaces``, ``batch`` and ``abatch``), so a LangGraph app that swaps its store gets engramdb's hybrid
search (keywords and meaning, no embedding configuration), secret redaction and the audit trail.

How items map to memories:

- Namespace labels map to engramdb's scopes by position (``scopes``, default ``("agent", "user",
  "session")``): the first label is the **agent** that owns the item, the second the **user** it belongs
  to, the third the conversation **session**; later labels only address items. LangMem's default namespace
  ``("memories", "{langgraph_user_id}")`` thus keeps each user's items in that user's scope: a read under
  one user's namespace never sees another user's items, and ``mem.search(..., user=...)`` finds them from
  Python. ``scopes=("user",)`` with ``agent="assistant"`` makes the first label the user of one agent; a
  ``None`` position is a plain label. (LangGraph reserves the root label ``langgraph``; engramdb uses that
  agent for its namespace registry, which is how ``list_namespaces`` and searches over the whole store find
  every agent.)
- Each item is one memory of ``kind`` (default ``knowledge``) tagged ``langgraph``, ``langgraph.ns:<prefix>``
  for every prefix of its namespace, ``langgraph.in:<namespace>`` and ``langgraph.item:<hash>`` for its
  (namespace, key). Its metadata keeps
  the namespace, the key and the JSON value under ``"langgraph"``, so ``get`` returns what was put.
- The memory's content is the text that search matches: the value's ``index`` fields (LangGraph path syntax,
  per put or per store), or the whole value as ``field: value`` lines. ``index=False`` stores the
  namespace and key as the text.
- ``put`` of an existing key updates that memory (its history keeps the old value); ``put(..., None)`` and
  ``delete`` forget it.

Differences from ``InMemoryStore`` worth knowing:

- **Secrets are redacted by design**: an API key or password in a value comes back from ``get`` as a typed
  placeholder (``[REDACTED:...]``), exactly as it was stored. Personal data too when the store's redaction
  policy says so.
- Values must be JSON (``dict`` of JSON types): anything else is rejected with engramdb's ``ValidationError``.
- Every item is indexed (engramdb embeds every memory with its own model); ``index`` only chooses the text.
- Operations of one batch run in order, each seeing the previous ones' effects. TTLs are not supported.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from engramdb import AsyncEngram
from engramdb import validate as check
from engramdb.errors import ValidationError
from engramdb.models import Memory

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = ["DEFAULT_SCOPES", "REGISTRY_AGENT", "EngramStore"]

#: What the labels of a namespace are, by position: LangMem's ("memories", "{langgraph_user_id}") isolates users.
DEFAULT_SCOPES: Final[tuple[str | None, ...]] = ("agent", "user", "session")
_ROLES: Final = frozenset({"agent", "user", "session"})

#: The agent holding the namespace registry (LangGraph forbids it as a namespace's first label).
REGISTRY_AGENT: Final = "langgraph"
_TAG: Final = "langgraph"
_NS_TAG: Final = "langgraph.ns:"
_EXACT_NS_TAG: Final = "langgraph.in:"
_ITEM_TAG: Final = "langgraph.item:"
_REGISTRY_TAG: Final = "langgraph.namespace"
_REGISTRY_ID_TAG: Final = "langgraph.namespace:"
_META: Final = "langgraph"
_PAGE: Final = 500
_MAX_FETCH: Final = check.MAX_LIMIT
_OPERATORS: Final = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})

T = TypeVar("T")
#: One call of the engram API an operation needs: method name, positional and keyword arguments.
Request = tuple[str, tuple[Any, ...], dict[str, Any]]
#: An operation written once, without I/O: it yields the calls it needs and gets their answers back, so
#: ``batch`` runs it on the sync API and ``abatch`` awaits the same calls on :class:`~engramdb.AsyncEngram`.
Steps = Generator[Request, Any, T]


def _call(name: str, *args: Any, **kwargs: Any) -> Steps[Any]:
    return (yield (name, args, kwargs))


class EngramStore(BaseStore):
    """LangGraph's ``BaseStore`` on an :class:`~engramdb.Engram`: namespace labels are agent, user and session.

    ``kind`` is the kind of the memories items become; ``index`` the default value fields whose text
    search matches (LangGraph path syntax, e.g. ``["text", "tags[*]"]``; None: the whole value).
    ``scopes`` says which engramdb scope each namespace position is (``"agent"``, ``"user"``,
    ``"session"`` or None, each at most once; see the module docstring); without an ``"agent"``
    position every item belongs to ``agent`` (default: the store's ``agent`` setting).
    The store does not close ``mem``.
    """

    __slots__ = ("_agent", "_amem", "_index", "_kind", "_known_namespaces", "_mem", "_roles")

    supports_ttl = False

    def __init__(
        self,
        mem: Engram,
        *,
        kind: str = "knowledge",
        index: Sequence[str] | None = None,
        scopes: Sequence[str | None] = DEFAULT_SCOPES,
        agent: str | None = None,
    ) -> None:
        self._mem = mem
        if isinstance(scopes, str) or not all(r is None or r in _ROLES for r in scopes):
            raise ValidationError(f"scopes must list 'agent', 'user', 'session' or None by position, not {scopes!r}")
        named = [r for r in scopes if r is not None]
        if len(named) != len(set(named)):
            raise ValidationError(f"scopes names a scope twice: {tuple(scopes)!r}")
        self._roles: tuple[str | None, ...] = tuple(scopes)
        if "agent" in named and agent is not None:
            raise ValidationError("give agent= only when no namespace label is the agent (scopes without 'agent')")
        settings = getattr(mem, "settings", None)  # a remote client acts for its server's agent by default
        self._agent = check.agent_name(agent if agent is not None else getattr(settings, "agent", "default"))
        self._amem: AsyncEngram | None = None  # made on the first abatch: the async API over the same store
        self._kind = check.kind(kind)
        if index is not None and (isinstance(index, str) or not all(isinstance(f, str) for f in index)):
            raise ValidationError("index must be a list of field paths")
        self._index: tuple[str, ...] | None = tuple(index) if index is not None else None
        self._known_namespaces: set[tuple[str, ...]] = set()

    # -- BaseStore -----------------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result per operation (None for a put)."""
        steps = self._run(list(ops))
        try:
            request = next(steps)
            while True:
                name, args, kwargs = request
                request = steps.send(getattr(self._mem, name)(*args, **kwargs))
        except StopIteration as done:
            return list(done.value)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` with every call of the store awaited on :class:`~engramdb.AsyncEngram` (worker threads
        for an embedded store, async HTTP for a remote one): the event loop is never blocked."""
        if self._amem is None:
            self._amem = AsyncEngram.of(self._mem)
        steps = self._run(list(ops))
        try:
            request = next(steps)
            while True:
                name, args, kwargs = request
                request = steps.send(await getattr(self._amem, name)(*args, **kwargs))
        except StopIteration as done:
            return list(done.value)

    def _run(self, ops: list[Op]) -> Steps[list[Result]]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._get(op)))
            elif isinstance(op, PutOp):
                yield from self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op)))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    # -- scopes --------------------------------------------------------------------------------------------
    def _scope(self, labels: tuple[str, ...]) -> tuple[str | None, dict[str, str]]:
        """The agent a namespace (or prefix) names (None: a prefix too short to say) and its user/session.

        Labels in scope positions are checked as engramdb names (one-line ValidationError otherwise).
        """
        named = {role: labels[i] for i, role in enumerate(self._roles) if role is not None and i < len(labels)}
        for role, label in named.items():
            if role == "agent":
                check.agent_name(label, what="the namespace label naming the agent")
            else:
                check.scope(label, what=f"the namespace label naming the {role}")
        agent = named.pop("agent", None)
        if "agent" not in self._roles:
            agent = self._agent
        return agent, named

    def _owner(self, namespace: tuple[str, ...]) -> tuple[str, dict[str, str]]:
        """The agent and the user/session of a full namespace."""
        agent, scope = self._scope(namespace)
        if agent is None:
            raise InvalidNamespaceError(f"namespace {namespace} has no label in the agent's position")
        return agent, scope

    # -- get / put -----------------------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Steps[Item | None]:
        namespace = _namespace(op.namespace)
        found = yield from self._find(namespace, op.key)
        return _item(found[0]) if found else None

    def _find(self, namespace: tuple[str, ...], key: str) -> Steps[list[Memory]]:
        """The memories holding (namespace, key), newest first (more than one only after a race)."""
        agent, scope = self._owner(namespace)
        page = yield from _call("list", agent=agent, tags=[_item_tag(namespace, key)], limit=_PAGE, **scope)
        out = [m for m in page if m.agent == agent and _address(m) == (namespace, key)]
        return sorted(out, key=lambda m: m.updated_at, reverse=True)

    def _put(self, op: PutOp) -> Steps[None]:
        namespace = _namespace(op.namespace)
        if namespace[0] == REGISTRY_AGENT:
            raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')
        if not isinstance(op.key, str):
            raise ValidationError(f"key must be a string, not {type(op.key).__name__}")
        if op.ttl is not None:
            raise NotImplementedError("EngramStore does not support TTLs")
        agent, scope = self._owner(namespace)
        existing = yield from self._find(namespace, op.key)
        if op.value is None:
            for m in existing:
                yield from _call("forget", m.id, agent=agent)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError(f"a store value must be a mapping, not {type(op.value).__name__}")
        try:
            value = check.metadata(op.value)
        except ValidationError as exc:
            raise ValidationError(f"store value for key {op.key!r}: {str(exc).replace('metadata', 'value')}") from exc
        content = self._text(namespace, op.key, value, op.index)
        metadata = {_META: {"namespace": list(namespace), "key": op.key, "value": value}}
        if existing:
            yield from _call("update", existing[0].id, agent=agent, content=content, metadata=metadata)
            for stale in existing[1:]:
                yield from _call("forget", stale.id, agent=agent)
            return
        yield from self._register(namespace)
        tags = _tags(namespace, op.key)
        yield from _call(
            "remember", content, agent=agent, kind=self._kind, tags=tags, metadata=metadata, force=True, **scope
        )

    def _text(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Any) -> str:
        """The text search matches for a value: its index fields, or all of it."""
        fields = self._index if index is None else (None if index is False else tuple(index))
        if index is False:
            texts: list[str] = []
        elif fields is None:
            texts = [_render(value)]
        else:
            texts = [t for f in fields for t in get_text_at_path(value, tokenize_path(f))]
        text = "\n".join(t for t in texts if t.strip())
        return text if text.strip() else "/".join((*namespace, key))

    # -- namespace registry ---------------------------------------------------------------------------------
    def _register(self, namespace: tuple[str, ...]) -> Steps[None]:
        """Records a namespace in the registry (once) so whole-store reads can find it."""
        if namespace in self._known_namespaces:
            return
        tag = _REGISTRY_ID_TAG + _digest(list(namespace))
        if not (yield from _call("list", agent=REGISTRY_AGENT, tags=[tag], limit=1)):
            yield from _call(
                "remember",
                f"LangGraph store namespace {'.'.join(namespace)}",
                agent=REGISTRY_AGENT,
                kind="knowledge",
                tags=[_TAG, _REGISTRY_TAG, tag],
                metadata={_META: {"namespace": list(namespace)}},
                force=True,
            )
        self._known_namespaces.add(namespace)

    def _registered(self) -> Steps[list[tuple[str, ...]]]:
        """Every namespace ever registered (some may be empty now)."""
        out: set[tuple[str, ...]] = set()
        offset = 0
        while True:
            page = yield from _call("list", agent=REGISTRY_AGENT, tags=[_REGISTRY_TAG], limit=_PAGE, offset=offset)
            for m in page:
                raw = m.metadata.get(_META)
                ns = raw.get("namespace") if isinstance(raw, Mapping) else None
                if isinstance(ns, list) and ns and all(isinstance(label, str) for label in ns):
                    out.add(tuple(ns))
            if len(page) < _PAGE:
                return sorted(out)
            offset += len(page)

    def _agents(self, prefix: tuple[str, ...]) -> Steps[list[str]]:
        """The agents a read under ``prefix`` covers: the one it names, else every registered one."""
        agent, _ = self._scope(prefix)
        if agent is not None:
            return [agent]
        at = self._roles.index("agent")
        return sorted({ns[at] for ns in (yield from self._registered()) if len(ns) > at})

    def _non_empty(self, namespace: tuple[str, ...]) -> Steps[bool]:
        """Whether the namespace holds an item now (deleting its last item empties it)."""
        agent, scope = self._owner(namespace)
        tags = [_TAG, _EXACT_NS_TAG + ".".join(namespace)]
        page = yield from _call("list", agent=agent, tags=tags, limit=1, **scope)
        return any(m.agent == agent for m in page)

    # -- search ---------------------------------------------------------------------------------------------
    def _search(self, op: SearchOp) -> Steps[list[SearchItem]]:
        prefix = _labels(op.namespace_prefix)
        limit, offset = _non_negative(op.limit, "limit"), _non_negative(op.offset, "offset")
        if limit == 0:
            return []
        wanted = offset + limit
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise ValidationError("filter must be a mapping of value fields to values or {'$op': value} conditions")
        flt = dict(op.filter or {})
        _, scope = self._scope(prefix)
        if op.query:
            scored: list[tuple[float, Memory]] = []
            fetch = min(_MAX_FETCH, wanted if not flt else max(wanted * 5, 100))
            for agent in (yield from self._agents(prefix)):
                tags = [_TAG, _NS_TAG + ".".join(prefix)] if prefix else [_TAG]
                hits = yield from _call("search", op.query, agent=agent, tags=tags, limit=fetch, **scope)
                scored.extend((h.score, h.memory) for h in hits if _matches(h.memory, agent, prefix, flt))
            scored.sort(key=lambda pair: pair[0], reverse=True)
            return [_search_item(m, s) for s, m in scored[offset:wanted]]
        found: list[Memory] = []
        for agent in (yield from self._agents(prefix)):
            found.extend((yield from self._scan(agent, prefix, flt, wanted, scope)))
        found.sort(key=lambda m: m.updated_at, reverse=True)
        return [_search_item(m, None) for m in found[offset:wanted]]

    def _scan(
        self, agent: str, prefix: tuple[str, ...], flt: Mapping[str, Any], wanted: int, scope: Mapping[str, str]
    ) -> Steps[list[Memory]]:
        """Up to ``wanted`` of the agent's items under ``prefix`` (in its ``scope``) that pass ``flt``, newest
        first."""
        tags = [_TAG, _NS_TAG + ".".join(prefix)] if prefix else [_TAG]
        offset = 0
        out: list[Memory] = []
        while len(out) < wanted:
            page = yield from _call("list", agent=agent, tags=tags, limit=_PAGE, offset=offset, **scope)
            out.extend(m for m in page if _matches(m, agent, prefix, flt))
            if len(page) < _PAGE:
                break
            offset += len(page)
        return out[:wanted]

    # -- namespaces -----------------------------------------------------------------------------------------
    def _list_namespaces(self, op: ListNamespacesOp) -> Steps[list[tuple[str, ...]]]:
        limit, offset = _non_negative(op.limit, "limit"), _non_negative(op.offset, "offset")
        conditions = tuple(op.match_conditions or ())
        for condition in conditions:
            _labels(condition.path)
        namespaces = []
        for ns in (yield from self._registered()):
            if all(_does_match(c, ns) for c in conditions) and (yield from self._non_empty(ns)):
                namespaces.append(ns)
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[offset : offset + limit]


# -- helpers ----------------------------------------------------------------------------------------------------
def _labels(namespace: Any) -> tuple[str, ...]:
    """A namespace (or prefix) whose labels are non-empty strings without periods or NUL."""
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(f"a namespace must be a tuple of strings, not {type(namespace).__name__}")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {tuple(namespace)}: labels are non-empty strings "
                "without periods or NUL characters"
            )
    return tuple(namespace)


def _namespace(namespace: Any) -> tuple[str, ...]:
    """A full namespace: at least one label (those naming scopes are checked by ``EngramStore._scope``)."""
    labels = _labels(namespace)
    if not labels:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    return labels


def _non_negative(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{what} must be a non-negative integer, not {value!r}")
    return value


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False).encode()).hexdigest()[:32]


def _item_tag(namespace: tuple[str, ...], key: str) -> str:
    return _ITEM_TAG + _digest([*namespace, key])


def _tags(namespace: tuple[str, ...], key: str) -> list[str]:
    prefixes = [_NS_TAG + ".".join(namespace[:i]) for i in range(1, len(namespace) + 1)]
    return [_TAG, *prefixes, _EXACT_NS_TAG + ".".join(namespace), _item_tag(namespace, key)]


def _payload(m: Memory) -> Mapping[str, Any] | None:
    raw = m.metadata.get(_META)
    return raw if isinstance(raw, Mapping) else None


def _address_namespace(m: Memory) -> tuple[str, ...] | None:
    raw = _payload(m)
    ns = raw.get("namespace") if raw is not None else None
    return tuple(ns) if isinstance(ns, list) and all(isinstance(label, str) for label in ns) else None


def _address(m: Memory) -> tuple[tuple[str, ...], str] | None:
    raw = _payload(m)
    ns = _address_namespace(m)
    key = raw.get("key") if raw is not None else None
    return (ns, key) if ns is not None and isinstance(key, str) else None


def _value(m: Memory) -> dict[str, Any]:
    raw = _payload(m)
    value = raw.get("value") if raw is not None else None
    # A deep copy: the caller may change it without touching the memory.
    return json.loads(json.dumps(value)) if isinstance(value, Mapping) else {}


def _item(m: Memory) -> Item:
    """The LangGraph item a memory holds."""
    namespace, key = _checked_address(m)
    return Item(value=_value(m), key=key, namespace=namespace, created_at=m.created_at, updated_at=m.updated_at)


def _search_item(m: Memory, score: float | None) -> SearchItem:
    """The LangGraph search result a memory holds (``score``: None when no query ranked it)."""
    namespace, key = _checked_address(m)
    return SearchItem(
        namespace=namespace,
        key=key,
        value=_value(m),
        created_at=m.created_at,
        updated_at=m.updated_at,
        score=None if score is None else float(score),
    )


def _checked_address(m: Memory) -> tuple[tuple[str, ...], str]:
    address = _address(m)
    if address is None:  # pragma: no cover - only memories written by EngramStore carry the tags read here
        raise ValidationError(f"memory {m.id} is not a LangGraph store item")
    return address


def _matches(m: Memory, agent: str, prefix: tuple[str, ...], flt: Mapping[str, Any]) -> bool:
    """Whether a memory is an item of ``agent`` under ``prefix`` whose value passes ``flt``."""
    if m.agent != agent:
        return False
    address = _address(m)
    if address is None or address[0][: len(prefix)] != prefix:
        return False
    value = _value(m)
    return all(_compare(value.get(field), wanted) for field, wanted in flt.items())


def _compare(actual: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: nested equality, and ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``."""
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op not in _OPERATORS:
        raise ValidationError(f"unsupported filter operator {op!r} (use {', '.join(sorted(_OPERATORS))})")
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    try:
        a, b = float(actual), float(operand)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A prefix or suffix condition (``*`` matches any label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValidationError(f"unsupported namespace match type {condition.match_type!r} (prefix or suffix)")
    return all(p in ("*", n) for n, p in pairs)


def _render(value: Any, indent: str = "") -> str:
    """A value as readable text for search: ``field: value`` lines, nested values indented."""
    if isinstance(value, Mapping):
        lines = []
        for k, v in value.items():
            if isinstance(v, Mapping | list):
                inner = _render(v, indent + "  ")
                if inner:
                    lines.append(f"{indent}{k}:\n{inner}")
            elif v is not None:
                lines.append(f"{indent}{k}: {v}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(r for r in (_render(v, indent) for v in value) if r)
    return "" if value is None else f"{indent}{value}"
