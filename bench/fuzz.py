"""Fuzz the whole public API: N calls with arbitrary values, counting exceptions outside the library's tree.

Every public method of the facade and its services (see tests/fuzz/fuzz_api.py) is called
round-robin with values drawn from the same hostile strategy as the test suite; a call may
succeed or raise an :class:`~engramdb.errors.EngramError`; anything else is counted (target 0),
and so is a rejected call that changed the store. Usage::

    python bench/fuzz.py --calls 100000 [--seed 1] [--state-every 10]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fuzz"))

from fuzz_api import arguments, method_names, resolve, seed, state
from hypothesis.errors import HypothesisException

from engramdb import Engram, EngramError
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder


def _draw(strategy: Any, rnd: random.Random) -> Any:
    """One example of a Hypothesis strategy, outside a test (seeded by ``rnd``)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    out: list[Any] = []

    @hseed(rnd.getrandbits(64))
    @settings(
        max_examples=1, database=None, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate]
    )
    @given(strategy)
    def grab(value: Any) -> None:
        out.append(value)

    grab()
    return out[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--state-every", type=int, default=1, help="check 'unchanged on rejection' every Nth call")
    parser.add_argument("--fresh-every", type=int, default=2000, help="calls per store before a fresh one")
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    embedder = make_embedder(load_settings({}))
    names = method_names()
    strategies: dict[str, Any] = {}
    escaped: collections.Counter[str] = collections.Counter()
    changed: collections.Counter[str] = collections.Counter()
    rejected = ok = 0
    examples: dict[str, str] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # file arguments land here
        mem: Engram | None = None
        for i in range(args.calls):
            if i % args.fresh_every == 0:
                if mem is not None:
                    mem.close()
                mem = Engram(Path(tmp) / f"store-{i}", embedder=embedder)
                seed(mem)
            assert mem is not None
            name = names[i % len(names)]
            method = resolve(mem, name)
            if name not in strategies:
                strategies[name] = arguments(method)
            try:
                call_args, call_kwargs = _draw(strategies[name], rnd)
            except HypothesisException:
                continue
            check = i % args.state_every == 0
            before = state(mem) if check else None
            try:
                method(*call_args, **call_kwargs)
                ok += 1
            except EngramError:
                rejected += 1
                if check and state(mem) != before:
                    changed[name] += 1
            except Exception as exc:  # noqa: BLE001 - counting exactly these
                key = f"{name}: {type(exc).__name__}"
                escaped[key] += 1
                examples.setdefault(key, traceback.format_exc(limit=3).splitlines()[-1])
            if (i + 1) % 5000 == 0:
                print(f"{i + 1} calls, {sum(escaped.values())} outside EngramError", file=sys.stderr)
        if mem is not None:
            mem.close()
        os.chdir("/")
    took = time.perf_counter() - started
    total = ok + rejected + sum(escaped.values())
    print(f"{total} calls over {len(names)} methods in {took:.0f} s: {ok} returned, {rejected} EngramError")
    print(f"exceptions outside EngramError: {sum(escaped.values())} (target 0)")
    print(f"rejected calls that changed the store: {sum(changed.values())} (target 0)")
    for key, n in escaped.most_common():
        print(f"  {n:6d}  {key}  {examples[key]}")
    for key, n in changed.most_common():
        print(f"  {n:6d}  changed on rejection: {key}")


if __name__ == "__main__":
    main()
