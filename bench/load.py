"""Under load: several ``engram serve`` workers over one PostgreSQL and one Redis, 50 simulated agents at once.

What runs (all real processes on loopback, started here the way the tests start them:
``tests/storage/pg_server.py``, ``tests/sessions/redis_server.py``):

* one throwaway PostgreSQL (pgvector) database, one Redis (``ENGRAM_SESSIONS``) for the session windows;
* ``--workers`` ``engram serve`` processes on that one store, with API keys required (one key per agent);
* ``--agents`` simulated agents, each an :class:`~engramdb.AsyncEngram` client with its own key, pinned to a
  worker round robin, running ``--ops`` operations in a bounded loop: writes (``remember`` for one of its
  ``--users`` users), searches and listings for a user, reads by id, session messages (Redis), counts.

Then it checks, through a *different* worker than the one that acknowledged each write:

* **errors**: every call that raised (must be 0);
* **acknowledged writes lost**: every id a write returned is read back with its content, and each agent's
  count per user equals what it wrote (must be 0);
* **isolation**: no search or listing ever returned another agent's memory or another user's, and every agent
  asking for one of another agent's ids gets ``NotFound`` (must be 0 violations).

    python bench/load.py                   # 3 workers, 50 agents x 40 operations -> bench/results/load.json
    python bench/load.py --quick           # 2 workers, 20 agents x 10 operations (smoke run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "storage"))
sys.path.insert(0, str(ROOT / "tests" / "sessions"))

import pg_server  # noqa: E402
import redis_server  # noqa: E402

import server_helpers  # noqa: E402
from _report import pct  # noqa: E402
from engramdb import AsyncEngram, Engram, NotFound  # noqa: E402

_MAIN = "from engramdb.interfaces.cli import main; main()"
TOPICS = ("deploy rollback", "flaky test retry", "schema migration", "cache invalidation", "auth token refresh")
#: The operation mix of one agent step (weights): half writes, the rest reads of several kinds.
MIX = {"remember": 40, "search": 25, "list": 10, "get": 10, "session": 10, "count": 5}


@dataclass
class Agent:
    """One simulated agent: its key, its worker, what it wrote (id -> (user, content)), what went wrong."""

    name: str
    token: str
    url: str
    users: tuple[str, ...]
    written: dict[str, tuple[str, str]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)


def _serve(store: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = server_helpers.free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "serve", "--store", store, "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc, f"http://127.0.0.1:{port}"


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"engram serve exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"engram serve at {url} did not answer within 180 s")


def _check_hits(agent: Agent, user: str, memories: list[Any], where: str) -> None:
    for memory in memories:
        if memory.agent != agent.name or memory.user not in (user, None):
            agent.leaks.append(f"{where}: {agent.name}/{user} got {memory.agent}/{memory.user} {memory.id}")


async def _step(agent: Agent, mem: AsyncEngram, rng: random.Random, step: int) -> None:
    op = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    user = rng.choice(agent.users)
    own = [i for i, (u, _) in agent.written.items() if u == user]
    if op in ("get",) and not own:
        op = "remember"
    start = time.perf_counter()
    if op == "remember":
        content = f"{rng.choice(TOPICS)}: {agent.name} for {user}, step {step}, note {rng.randrange(10**9)}"
        memory = await mem.remember(content, user=user, tags=["load"])
        agent.written[memory.id] = (user, content)
    elif op == "search":
        hits = await mem.search(rng.choice(TOPICS), user=user, limit=10)
        _check_hits(agent, user, [h.memory for h in hits], "search")
    elif op == "list":
        _check_hits(agent, user, await mem.list(user=user, limit=50), "list")
    elif op == "get":
        memory_id = rng.choice(own)
        got = await mem.get(memory_id, user=user)
        if got.content != agent.written[memory_id][1]:
            agent.errors.append(f"get {memory_id}: content differs")
    elif op == "session":
        await _session_message(mem, agent, user, step)
    else:
        await mem.count(user=user)
    agent.latencies[op].append((time.perf_counter() - start) * 1000)


async def _session_message(mem: AsyncEngram, agent: Agent, user: str, step: int) -> None:
    # The short-term window lives in Redis (ENGRAM_SESSIONS): the REST route, as an agent in another language uses it.
    async with httpx.AsyncClient(base_url=agent.url, headers={"X-API-Key": agent.token}, timeout=60) as http:
        posted = await http.post("/v1/session/messages", json={"content": f"step {step} for {user}", "user": user})
        if posted.status_code != 201:
            raise RuntimeError(f"session message: HTTP {posted.status_code} {posted.text[:200]}")


async def _run_agent(agent: Agent, ops: int, seed: int) -> None:
    rng = random.Random(seed)
    async with AsyncEngram(agent.url, api_key=agent.token) as mem:
        for step in range(ops):
            try:
                await _step(agent, mem, rng, step)
            except Exception as exc:  # noqa: BLE001 - every failure is counted, whatever it is
                agent.errors.append(f"{type(exc).__name__}: {exc}")


async def _verify(agents: list[Agent], urls: list[str]) -> dict[str, int]:
    """Read every acknowledged write back through another worker; try other agents' ids; compare counts."""
    lost = wrong = foreign_visible = count_mismatch = 0
    for index, agent in enumerate(agents):
        other = urls[(urls.index(agent.url) + 1) % len(urls)]
        async with AsyncEngram(other, api_key=agent.token) as mem:
            for memory_id, (user, content) in agent.written.items():
                try:
                    got = await mem.get(memory_id, user=user)
                except NotFound:
                    lost += 1
                    continue
                wrong += got.content != content
            for user in agent.users:
                expected = sum(1 for u, _ in agent.written.values() if u == user)
                count_mismatch += await mem.count(user=user) != expected
            # Another agent's ids (several of them) must not exist for this key.
            victim = agents[(index + 1) % len(agents)]
            for memory_id in list(victim.written)[:5]:
                try:
                    await mem.get(memory_id)
                except NotFound:
                    continue
                foreign_visible += 1
    return {
        "lost": lost,
        "content_differs": wrong,
        "foreign_ids_visible": foreign_visible,
        "count_mismatch": count_mismatch,
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": round(statistics.median(values), 1), "p99": round(pct(values, 0.99), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--users", type=int, default=3, help="users per agent")
    parser.add_argument("--ops", type=int, default=40, help="operations per agent")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "load.json"))
    args = parser.parse_args()
    if args.quick:
        args.workers, args.agents, args.ops = 2, 20, 10

    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="cli-load-") as tmp:
        pg = pg_server.PgServer.start()
        stack.callback(pg.stop)
        redis = redis_server.RedisServer.start()
        stack.callback(redis.stop)
        store = pg.new_database()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update({"ENGRAM_HOME": f"{tmp}/home", "ENGRAM_SESSIONS": redis.url()})

        names = [f"agent{i:02d}" for i in range(args.agents)]
        with Engram(store) as admin:  # the keys, as `engram keys create` makes them (one per agent)
            tokens = {name: admin.keys.create(agent=name).token for name in names}

        procs: list[tuple[subprocess.Popen[bytes], str, Path]] = []
        for w in range(args.workers):
            log = Path(tmp) / f"worker{w}.log"
            proc, url = _serve(store, env, log)
            stack.callback(_stop, proc)
            procs.append((proc, url, log))
        for proc, url, log in procs:
            _wait_ready(proc, url, log)
        urls = [url for _, url, _ in procs]
        agents = [
            Agent(name, tokens[name], urls[i % len(urls)], tuple(f"{name}-u{u}" for u in range(args.users)))
            for i, name in enumerate(names)
        ]
        load_before = os.getloadavg()[0]
        start = time.perf_counter()

        async def run_all() -> None:
            await asyncio.gather(*(_run_agent(a, args.ops, seed=i) for i, a in enumerate(agents)))

        asyncio.run(run_all())
        elapsed = time.perf_counter() - start
        load_after = os.getloadavg()[0]
        checks = asyncio.run(_verify(agents, urls))

    latencies: dict[str, list[float]] = defaultdict(list)
    for agent in agents:
        for op, values in agent.latencies.items():
            latencies[op].extend(values)
    every = [v for values in latencies.values() for v in values]
    errors = [e for a in agents for e in a.errors]
    leaks = [e for a in agents for e in a.leaks]
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": [load_before, load_after]},
        "setup": {"workers": args.workers, "agents": args.agents, "users_per_agent": args.users, "ops": args.ops},
        "seconds": round(elapsed, 2),
        "calls": len(every) + len(errors),
        "throughput_per_s": round(len(every) / elapsed, 1),
        "all": _percentiles(every),
        "by_op": {op: _percentiles(values) for op, values in sorted(latencies.items())},
        "writes_acknowledged": sum(len(a.written) for a in agents),
        "errors": len(errors),
        "error_kinds": dict(Counter(e.split(":")[0] for e in errors)),
        "error_samples": errors[:5],
        "isolation_violations": len(leaks) + checks["foreign_ids_visible"],
        "leak_samples": leaks[:5],
        "acknowledged_writes_lost": checks["lost"],
        "content_differs": checks["content_differs"],
        "count_mismatch": checks["count_mismatch"],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    _print(result)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _print(r: dict[str, Any]) -> None:
    s = r["setup"]
    print(
        f"{s['workers']} workers, {s['agents']} agents x {s['ops']} ops ({s['users_per_agent']} users each): "
        f"{r['calls']} calls in {r['seconds']} s = {r['throughput_per_s']} calls/s "
        f"(load {r['machine']['load'][0]:.1f} -> {r['machine']['load'][1]:.1f})"
    )
    print(f"{'operation':<10} {'n':>6} {'p50 ms':>8} {'p99 ms':>8}")
    for op, p in [*r["by_op"].items(), ("all", r["all"])]:
        print(f"{op:<10} {p['n']:>6} {p.get('p50', '-'):>8} {p.get('p99', '-'):>8}")
    print(
        f"writes acknowledged {r['writes_acknowledged']}, lost {r['acknowledged_writes_lost']}, "
        f"content differs {r['content_differs']}, count mismatches {r['count_mismatch']}; "
        f"errors {r['errors']} {r['error_kinds'] or ''}; isolation violations {r['isolation_violations']}"
    )
    for sample in r["error_samples"] + r["leak_samples"]:
        print("  ", sample)


if __name__ == "__main__":
    main()
