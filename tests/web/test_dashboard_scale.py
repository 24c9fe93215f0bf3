"""The memories page at 100,000 memories: exact counts, date ranges and deep pages stay fast.

The memories go in through ``store.memories.add`` with synthetic unit vectors, as the
retrieval benchmark's scale run does (embedding 100k texts would take minutes and
changes nothing here). They are one minute apart, every 4th a ``success``, every 7th
tagged ``seven``, so each filter's count is known exactly.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
from web_helpers import Browser, check_screenshot, require, serving

require("fastapi")
require("jinja2")

from engramdb import Engram  # noqa: E402 - after the checks: the rest extra is optional
from engramdb._util import new_id  # noqa: E402
from engramdb.embeddings.base import Embedder  # noqa: E402
from engramdb.interfaces.web import create_dashboard  # noqa: E402
from engramdb.models import Memory  # noqa: E402

N = 100_000
T0 = datetime(2025, 1, 1, tzinfo=UTC)
#: A page must take less than this many seconds of CPU (about 0.2-0.8 s on an idle laptop).
SLOW = 10.0


def _memory(i: int) -> Memory:
    at = T0 + timedelta(minutes=i)
    return Memory(
        id=new_id(),
        agent="bulk",
        kind="success" if i % 4 == 0 else "knowledge",
        content=f"bulk memory {i}: a note about topic {i % 97}",
        tags=("seven",) if i % 7 == 0 else (),
        created_at=at,
        updated_at=at,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[str]:
    path = tmp_path_factory.mktemp("scale") / "store"
    rng = np.random.default_rng(7)
    with Engram(path, embedder=embedder) as mem:
        for start in range(0, N, 5000):
            batch = [_memory(i) for i in range(start, start + 5000)]
            vectors = rng.standard_normal((len(batch), embedder.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            mem.store.memories.add(batch, vectors, model_id=embedder.model_id, actor="bulk")
        with serving(create_dashboard(mem)) as base:
            yield base


@pytest.fixture(scope="module")
def client(site: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site, timeout=120) as c:
        yield c


def timed(client: httpx.Client, url: str) -> str:
    started, cpu = time.perf_counter(), time.process_time()
    r = client.get(url)
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    print(f"{elapsed * 1000:7.1f} ms ({used * 1000:7.1f} ms of CPU)  {url}")
    assert r.status_code == 200, r.text[-300:]
    # The work a page does (the server runs in this process), not the wall clock: what this guards against is a
    # scan per page, and a busy machine (other test runs beside this one) stretched the wall time towards SLOW.
    assert used < SLOW, f"{url} took {used:.2f} s of CPU"
    return r.text


def summary(page: str) -> str:
    found = re.search(r'<p id="summary">(.*?)</p>', page, re.S)
    assert found
    return " ".join(re.sub(r"<[^>]+>", "", found.group(1)).split())


def minutes(day: int) -> int:
    """Index of the first memory of day ``day`` (0-based) since T0."""
    return day * 24 * 60


def test_counts_and_pages_at_100k(client: httpx.Client) -> None:
    first = timed(client, "/ui/memories?agent=bulk")
    assert summary(first) == "100,000 memories; showing 1–50, newest first."
    assert "bulk memory 99999:" in first
    assert "bulk memory 99950:" in first
    assert "bulk memory 99949:" not in first
    last = timed(client, "/ui/memories?agent=bulk&offset=99950")
    assert summary(last) == "100,000 memories; showing 99,951–100,000, newest first."
    assert "bulk memory 0:" in last
    assert 'id="next"' not in last
    assert summary(timed(client, "/ui/memories?agent=bulk&kind=success")).startswith("25,000 memories")
    assert summary(timed(client, "/ui/memories?agent=bulk&tag=seven")).startswith("14,286 memories")


def test_date_ranges_at_100k(client: httpx.Client) -> None:
    # Days 9 to 11 (2025-01-10 .. 2025-01-12, inclusive): 3 days of one memory a minute.
    page = timed(client, "/ui/memories?agent=bulk&from=2025-01-10&to=2025-01-12")
    assert summary(page) == "4,320 memories; showing 1–50, newest first."
    newest, oldest = minutes(12) - 1, minutes(9)
    assert f"bulk memory {newest}:" in page
    deep = timed(client, "/ui/memories?agent=bulk&from=2025-01-10&to=2025-01-12&offset=4300")
    assert summary(deep) == "4,320 memories; showing 4,301–4,320, newest first."
    assert f"bulk memory {oldest}:" in deep
    assert f"bulk memory {oldest - 1}:" not in deep
    both = timed(client, "/ui/memories?agent=bulk&kind=success&from=2025-01-10&to=2025-01-12")
    assert summary(both).startswith("1,080 memories")
    tagged = timed(client, "/ui/memories?agent=bulk&tag=seven&from=2025-01-10T00:00:00&to=2025-01-10T00:06:59")
    assert summary(tagged).startswith("1 memory")  # minutes 12960..12966: only 12964 is a multiple of 7
    since = timed(client, "/ui/memories?agent=bulk&from=2025-03-01")
    assert summary(since).startswith(f"{N - minutes(59):,} memories")
    until = timed(client, "/ui/memories?agent=bulk&to=2024-12-31")
    assert summary(until) == "0 memories."


def test_search_at_100k(client: httpx.Client) -> None:
    assert client.get("/ui/memories?agent=bulk&q=warm+up").status_code == 200  # loads the vector index: untimed
    page = timed(client, "/ui/memories?agent=bulk&q=" + "bulk+memory+4242")
    assert "Best matches 1–" in summary(page)
    assert "bulk memory 4242:" in page


def test_100k_page_in_chromium(site: str, browser: Browser, shots: Path) -> None:
    url = site + "/ui/memories?agent=bulk&kind=success&offset=50"
    dom = browser.dom(url)
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    assert "25,000 memories; showing 51–100, newest first." in text
    assert "bulk memory 99796:" in text  # the 51st newest success: 99996 - 50 * 4
    check_screenshot(browser.screenshot(url, shots / "memories-100k.png"))
