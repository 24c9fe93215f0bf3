"""Every parameter of every public method, one at a time, given each hostile value with the others plain: only the
library's own errors escape, in one line, and a rejected call changes nothing.

The random fuzz (test_api_fuzz.py) draws every argument at once, so the first bad one is usually caught by a
check that reads it early; this walks each parameter on its own, which reaches the later checks too (an integer
of 5,000 digits, which ``repr`` refuses to print and ``float`` to convert, escaped a dozen of them).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from fuzz_api import methods, seed, state

from engramdb import Engram, EngramError
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.rest import create_app

sys.path.insert(0, str(Path(__file__).parents[1] / "interfaces"))

from rest_helpers import serving

#: Values each parameter gets in turn.
HOSTILE: tuple[Any, ...] = (
    10**5000,
    -(10**5000),
    2**64,
    float("nan"),
    float("inf"),
    object(),
    b"x",
    [1],
    {"a": 1},
    ("a",),
    frozenset({"a"}),
    True,
)
#: Calls that act on the whole store (left out: they would empty what the others read).
SKIP = frozenset({"clear", "keys.revoke", "retention.cleanup"})
#: Known escapes, (method, parameter) -> where: none left; a new one is fixed, not listed.
KNOWN: dict[tuple[str, str], str] = {}


def _plain(name: str, ids: list[str]) -> Any:
    """A value a required parameter accepts, so the call reaches the parameter under test."""
    if name in ("memory_ids", "ids"):
        return [ids[0]]
    if "id" in name:
        return ids[0]
    if name == "messages":
        return [{"role": "user", "content": "hi"}]
    if name in ("items", "options", "approaches", "models", "events"):
        return ["a", "b"]
    return "alice"


def _walk(api: Any, store: Engram, ids: list[str]) -> dict[tuple[str, str], str]:
    """What escapes ``api``'s methods, each parameter alone given each hostile value; ``store`` is fingerprinted."""
    escapes: dict[tuple[str, str], str] = {}
    for name, method in methods(api):
        if name in SKIP:
            continue
        params = [
            p for p in inspect.signature(method).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        for target in params:
            for value in HOSTILE:
                args: list[Any] = []
                kwargs: dict[str, Any] = {}
                for p in params:
                    if p is not target and p.default is not p.empty:
                        continue
                    v = value if p is target else _plain(p.name, ids)
                    if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty):
                        args.append(v)
                    else:
                        kwargs[p.name] = v
                before = state(store)
                try:
                    method(*args, **kwargs)
                except EngramError as exc:
                    if "\n" in str(exc):
                        escapes[(name, target.name)] = f"a multi-line {type(exc).__name__}"
                    elif state(store) != before:
                        escapes[(name, target.name)] = f"rejected ({exc}) but changed the store"
                except Exception as exc:  # noqa: BLE001 - what escapes is what the test reports
                    escapes[(name, target.name)] = f"{type(exc).__name__}: {str(exc)[:80]}"
    return escapes


@pytest.mark.parametrize("side", ["embedded", "remote"])
def test_each_parameter_alone_gets_only_library_errors(
    side: str, tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the embedded store, and through the remote client of a real server on loopback (which converts some
    arguments before it sends them, and must refuse what JSON cannot carry)."""
    monkeypatch.chdir(tmp_path)  # file arguments land here
    # Access counts written before a search returns: a background write between two fingerprints is not the call's.
    with Engram(tmp_path / "store", embedder=embedder, access_flush_seconds=0) as mem:
        seed(mem)
        ids = [m.id for m in mem.list(agent="alice")]
        if side == "embedded":
            escapes = _walk(mem, mem, ids)
        else:
            with serving(create_app(mem)) as url, Engram(url) as remote:
                escapes = _walk(remote, mem, ids)
    # The server runs the embedded code: its learning/ escapes come back as 500s, which the client raises as
    # EngramError, so only the embedded side lists them.
    assert {k: v for k, v in escapes.items() if k not in KNOWN} == {}
