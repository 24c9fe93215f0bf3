"""The public API's surface and hostile values for it, shared by the fuzz tests and ``bench/fuzz.py``.

:func:`methods` lists every public method of the facade and of its services (found by
introspection, so a method added later is fuzzed too); :func:`arguments` draws keyword
arguments for one of them from :func:`hostile` values; :func:`state` fingerprints a store
(memory count, a digest of every memory and its history, shares, the audit chain's head)
so a rejected call can be shown to have changed nothing.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import strategies as st

from engramdb import Engram
from engramdb.storage.base import Filter

__all__ = ["SERVICES", "SKIP", "arguments", "hostile", "method_names", "methods", "resolve", "seed", "state"]

#: The facade's service attributes.
SERVICES = (
    "learning", "failures", "episodes", "code", "sharing", "knowledge", "audit", "retention", "routing", "keys"
)  # fmt: skip
#: Methods that end the instance or are not calls on data.
SKIP = frozenset({"close"})
IDS: list[str] = []


def methods(mem: Engram) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``("remember", mem.remember)``, ``("learning.record", mem.learning.record)``, ... for every public method."""
    for name in sorted(dir(mem)):
        if name.startswith("_") or name in SKIP:
            continue
        attr = getattr(type(mem), name, None)
        if inspect.isfunction(attr):
            yield name, getattr(mem, name)
    for service in SERVICES:
        obj = getattr(mem, service)
        for name in sorted(dir(obj)):
            if name.startswith("_"):
                continue
            attr = getattr(type(obj), name, None)
            if inspect.isfunction(attr):
                yield f"{service}.{name}", getattr(obj, name)


def method_names() -> list[str]:
    """The names :func:`methods` yields, from the classes (no store needed)."""
    from engramdb.services import (
        audit,
        code,
        episodes,
        failures,
        keys,
        knowledge,
        learning,
        retention,
        routing,
        sharing,
    )

    classes = {
        "learning": learning.LearningService,
        "failures": failures.FailureService,
        "episodes": episodes.EpisodeService,
        "code": code.CodeService,
        "sharing": sharing.SharingService,
        "knowledge": knowledge.KnowledgeService,
        "audit": audit.AuditService,
        "retention": retention.RetentionService,
        "routing": routing.RoutingService,
        "keys": keys.ApiKeys,
    }
    names = [
        n
        for n in sorted(dir(Engram))
        if not n.startswith("_") and n not in SKIP and inspect.isfunction(getattr(Engram, n))
    ]
    for service in SERVICES:
        cls = classes[service]
        names += [
            f"{service}.{n}" for n in sorted(dir(cls)) if not n.startswith("_") and inspect.isfunction(getattr(cls, n))
        ]
    return names


def resolve(mem: Engram, name: str) -> Callable[..., Any]:
    """``mem.<name>`` for a dotted name such as ``learning.record``."""
    obj: Any = mem
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_NASTY_CHARS = st.one_of(st.characters(), _SURROGATES, st.sampled_from(["\x00", "\n", "\x7f", "\u202e", "*"]))
_NASTY_TEXT = st.text(_NASTY_CHARS, max_size=40)
_WORDS = st.sampled_from(
    [
        "alice",
        "bob",
        "default",
        "*",
        "knowledge",
        "failure",
        "decision",
        "success",
        "failure",
        "partial",
        "private",
        "shared",
        "public",
        "auth",
        "retry with backoff",
        "TimeoutError: read timed out",
        "",
        " ",
        "development",
        "plan",
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**63, 2**64]),
    st.integers(300, 5000).map(lambda n: 10**n),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, 5e-324]),
    st.binary(max_size=16),
    st.sampled_from([b"caf\xe9", bytearray(b"x")]),
)
# Built on demand (their reprs are huge, or recurse too deeply to print).
_BIG = st.one_of(
    st.builds(lambda: "x" * 1_100_000),
    st.builds(lambda: "word " * 300),
    st.builds(lambda: ["t" + str(i) for i in range(2000)]),
    st.builds(lambda: {f"k{i}": i for i in range(5000)}),
    st.builds(lambda: _nested(1000)),
    st.builds(lambda: _deep_list(1000)),
    st.builds(lambda: _nested(40)),
)


def hostile() -> st.SearchStrategy[Any]:
    """Arbitrary values: names that exist, wrong types, surrogates and NUL, huge and nested values, extremes."""
    ids = st.sampled_from(IDS) if IDS else st.nothing()
    leaves = st.one_of(_SCALARS, _NASTY_TEXT, _WORDS, ids)
    nested = st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner, inner),
            st.dictionaries(st.one_of(_NASTY_TEXT, st.integers(), st.none()), inner, max_size=3),
            st.frozensets(st.one_of(_WORDS, _NASTY_TEXT), max_size=3),
        ),
        max_leaves=8,
    )
    return st.one_of(leaves, nested, _BIG, st.lists(ids, max_size=3), st.just(object()))


def arguments(method: Callable[..., Any]) -> st.SearchStrategy[tuple[list[Any], dict[str, Any]]]:
    """Positional and keyword arguments for ``method``: required ones always, optional ones sometimes."""
    params = list(inspect.signature(method).parameters.values())
    value = hostile()

    @st.composite
    def draw(data: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in params:
            if p.kind is p.VAR_POSITIONAL:
                args.extend(data(st.lists(value, max_size=2)))
                continue
            if p.kind is p.VAR_KEYWORD:
                extra = data(st.dictionaries(st.sampled_from(["bogus", "agent", "tags", "x"]), value, max_size=2))
                kwargs.update({k: v for k, v in extra.items() if k not in kwargs})
                continue
            required = p.default is p.empty
            if not required and not data(st.booleans()):
                continue
            v = data(value)
            if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and required):
                args.append(v)
            else:
                kwargs[p.name] = v
        return args, kwargs

    return draw()


def seed(mem: Engram) -> None:
    """A few memories, shares, outcomes and failures, so that ids and names exist."""
    made = mem.remember_many(
        [
            {"content": "Retry with backoff fixes the 429s from the payments API", "agent": "alice", "tags": ["auth"]},
            {"content": "The staging cluster runs in eu-west-1", "agent": "bob", "kind": "knowledge"},
            {"content": "Alice prefers short answers", "agent": "alice", "kind": "preference", "key": "style"},
        ]
    )
    mem.learning.record("payments API returns 429", "retry-with-backoff", "success", agent="alice")
    mem.failures.record("TimeoutError: read timed out", agent="alice", solution="raise the timeout")
    mem.sharing.share([made[0].id], from_agent="alice", to_agent="bob")
    IDS[:] = [m.id for m in made]


def state(mem: Engram) -> tuple[Any, ...]:
    """What the store holds: memory count, a digest of every memory, its history and shares, the audit head."""
    digest = hashlib.sha256()
    everything = Filter(agent=None)
    memories = mem.store.memories.list(everything, limit=10_000)
    for m in sorted(memories, key=lambda m: m.id):
        digest.update(json.dumps(m.to_dict(), sort_keys=True, default=str).encode())
        for change in mem.store.memories.history(m.id):
            digest.update(json.dumps(change.to_dict(), sort_keys=True, default=str).encode())
    shares = mem.store.shares.list() if hasattr(mem.store, "shares") else []
    digest.update(repr(sorted(repr(s) for s in shares)).encode())
    return len(memories), digest.hexdigest(), mem.store.audit.head()
