"""Issue 27: where a fresh process's first search spends its time, and how fast this machine's disk reads a store.

``--sample``: for each store of bench/tenants.py (built there; ``100000-50``, ``1000000-u1000``, ...), in this one
process and in the given order (as bench/tenants.py opens them), opens it, embeds the questions (cached: the query
embedding is excluded), asks the first five, and samples every thread's Python stack each millisecond during the
first: the threads of the open's warm-up that run beside it show there. Prints each first five's wall time, the
process's CPU and the searching thread's own CPU (ms), when the warm-up's steps ended, and the most sampled stacks.
``--evict`` drops the store's files from the page cache first (bench/_residency.py).

``--disk STORE``: the store's database evicted, then read whole in 1 MB pieces (MB/s), then 300 random 8 KiB pages
read one after another and, evicted again, asked for together first (``posix_fadvise(WILLNEED)``), in ms.

    python bench/first_search.py --sample 100000-1000,100000-u1000 --evict
    python bench/first_search.py --disk 100000-50
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from _data import load_locomo
from _residency import evict

CACHE = Path.home() / ".cache" / "engramdb-bench" / "tenants"
_PAGE = 8192


class Sampler:
    """Every other thread's innermost frames, counted, each millisecond while on."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.on = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            if self.on.is_set():
                names = {t.ident: t.name for t in threading.enumerate()}
                for ident, frame in sys._current_frames().items():
                    if ident != me:
                        stack = traceback.extract_stack(frame)[-6:]
                        where = " < ".join(f"{Path(f.filename).stem}:{f.name}:{f.lineno}" for f in reversed(stack))
                        self.counts[names.get(ident, "?"), where] += 1
            time.sleep(0.001)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def sample(stores: list[str], *, evicted: bool, top: int) -> None:
    from engramdb import Engram

    questions = [q.text for c in load_locomo() for q in c.questions][:40]
    sampler = Sampler()
    opened: list[Any] = []
    try:
        for name in stores:
            directory = CACHE / name
            spread = name.split("-")[1]
            user, n = spread.startswith("u"), int(spread.lstrip("u"))
            if evicted:
                evict(directory)
                time.sleep(1.0)
            t0 = time.monotonic()
            mem = Engram(directory, embedder="static", vectors="sync")
            opened.append(mem)
            open_s = time.monotonic() - t0
            mem.embedder.embed(questions)
            firsts = []
            at = time.monotonic() - t0
            for i in range(5):
                if i == 0:
                    sampler.counts.clear()
                    sampler.on.set()
                c0, h0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
                if user:
                    mem.search(questions[i], agent="a", user=f"u{i % n}", limit=10)
                else:
                    mem.search(questions[i], agent=f"t{i % n}", limit=10)
                w1, h1, c1 = time.perf_counter(), time.thread_time(), time.process_time()
                sampler.on.clear()
                firsts.append(f"{1000 * (w1 - w0):.1f} ms (cpu {1000 * (c1 - c0):.1f}, thread {1000 * (h1 - h0):.1f})")
            warmed = {k: round(v - t0, 2) for k, v in mem._plain_store.search.warmed.items()}
            print(f"{name}: open {open_s:.2f} s, first search at {at:.2f} s; warm-up steps done at {warmed}")
            print("   first five: " + "; ".join(firsts))
            for (thread, where), count in sampler.counts.most_common(top):
                print(f"   {count:4d} {thread}: {where}")
    finally:
        for mem in opened:
            mem.close()
        sampler.close()


def disk(store: str) -> dict[str, float]:
    directory = CACHE / store
    path = directory / "engram.db"
    pages = path.stat().st_size // _PAGE
    fd = os.open(path, os.O_RDONLY)
    out: dict[str, float] = {"size_mb": pages * _PAGE / 1e6}
    try:
        evict(directory)
        t0, n = time.perf_counter(), 0
        while chunk := os.pread(fd, 1 << 20, n):
            n += len(chunk)
        out["sequential_mb_s"] = n / (time.perf_counter() - t0) / 1e6
        for k in range(2):
            for together in (False, True):
                evict(directory)
                picked = random.Random(2 * k + together).sample(range(pages), 300)
                t0 = time.perf_counter()
                if together:
                    for p in picked:
                        os.posix_fadvise(fd, p * _PAGE, _PAGE, os.POSIX_FADV_WILLNEED)
                for p in picked:
                    os.pread(fd, _PAGE, p * _PAGE)
                out[f"random_300_{'together' if together else 'serial'}_ms_{k}"] = 1000 * (time.perf_counter() - t0)
    finally:
        os.close(fd)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", default="", help="stores to open in turn, e.g. 100000-50,100000-u1000")
    parser.add_argument("--evict", action="store_true")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--disk", default="", help="a store whose database to read")
    args = parser.parse_args()
    if args.sample:
        sample(args.sample.split(","), evicted=args.evict, top=args.top)
    if args.disk:
        print(args.disk, {k: round(v, 1) for k, v in disk(args.disk).items()})


if __name__ == "__main__":
    main()
