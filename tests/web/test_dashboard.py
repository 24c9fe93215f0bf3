"""The web dashboard: every page against a real uvicorn server, read with httpx and with headless Chromium.

Each page is checked for its content; Chromium renders the main pages to screenshots
that are checked for size and content; bad query parameters give a 422 page with one
line; memory content, agent names and query text are escaped (an XSS attempt that
would change the page title shows up in the DOM Chromium leaves after loading).
"""

from __future__ import annotations

import html
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from web_helpers import Browser, check_screenshot, require, serving

require("fastapi")
require("jinja2")

from fastapi import HTTPException, Request  # noqa: E402 - after the checks: the rest extra is optional

import engramdb.pipeline  # noqa: E402
from engramdb import Engram  # noqa: E402
from engramdb.embeddings.base import Embedder  # noqa: E402
from engramdb.interfaces.web import create_dashboard  # noqa: E402
from engramdb.models import Memory  # noqa: E402

XSS = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Clock:
    """A settable clock for the write pipeline, so outcomes can be spread over days."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[tuple[Engram, dict[str, str]]]:
    """A store with alice's memories, outcomes, failures and shares; the ids the tests look for."""
    path = tmp_path_factory.mktemp("dashboard") / "store"
    clock = Clock(T0)
    patch = pytest.MonkeyPatch()
    # Backdated writes: the pipeline stamps memories with its clock (outcomes over two weeks).
    patch.setattr(engramdb.pipeline, "utcnow", clock)
    ids: dict[str, str] = {}
    with Engram(path, embedder=embedder) as mem:
        try:
            note = mem.remember("The staging database lives on db-staging port 5433", agent="alice", tags=["db"])
            mem.update(note.id, content="The staging database lives on db-staging port 6432 since the migration")
            ids["note"] = note.id
            ids["xss"] = mem.remember(XSS, agent="alice", kind="knowledge", tags=["xss"]).id
            ids["shared"] = mem.remember("Deploys freeze on Fridays after 3 pm", agent="alice", tags=["ops"]).id
            mem.sharing.share([ids["shared"]], from_agent="alice", to_agent="bob")
            # Deploys get better over two weeks; the cache warm-up stays the same.
            for day in range(14):
                clock.now = T0 + timedelta(days=day, hours=1)
                for k in range(4):
                    ok = k < day * 4 // 13  # 0 of 4 on day 0, 4 of 4 on day 13
                    mem.learning.record("deploy the web app", "blue-green", ok, agent="alice", category="deploy")
                mem.learning.record("warm the cache", "preload", day % 2 == 0, agent="alice", category="cache")
            clock.now = T0 + timedelta(days=15)
            for host in ("10.0.0.7", "10.0.0.9", "10.0.0.12"):
                mem.failures.record(
                    f"ConnectionRefusedError: connection refused to {host}:5432",
                    agent="alice",
                    solution="start the database container first",
                )
            mem.failures.record("KeyError: 'user_id' in payload", agent="alice", solution="validate the payload")
        finally:
            patch.undo()
        yield mem, ids


@pytest.fixture(scope="module")
def site(seeded: tuple[Engram, dict[str, str]]) -> Iterator[str]:
    """The dashboard of the seeded store on a real uvicorn server: its base URL."""
    mem, _ = seeded
    with serving(create_dashboard(mem)) as base:
        yield base


@pytest.fixture(scope="module")
def client(site: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site, timeout=60) as c:
        yield c


def ok_page(client: httpx.Client, url: str) -> str:
    r = client.get(url)
    assert r.status_code == 200, r.text[-500:]
    assert r.headers["content-type"].startswith("text/html")
    return r.text


def error_line(client: httpx.Client, url: str, status: int) -> str:
    """The one-line message of an error page, after checking its status."""
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code, r.text[-300:])
    assert r.headers["content-type"].startswith("text/html")
    found = re.search(r'<p class="error" id="error-message">(.*?)</p>', r.text, re.S)
    assert found, r.text[-500:]
    message = html.unescape(found.group(1))
    assert message
    assert "\n" not in message
    assert "Traceback" not in r.text
    return message


def text_of(markup: str) -> str:
    """Visible text of a page, whitespace collapsed (for asserting on what a reader sees)."""
    no_tags = re.sub(r"<[^>]+>", " ", re.sub(r"<(style|title)>.*?</\1>", " ", markup, flags=re.S))
    return " ".join(html.unescape(no_tags).split())


# -- pages ------------------------------------------------------------------------------------------------


def test_index_links_to_an_agents_pages(client: httpx.Client) -> None:
    page = ok_page(client, "/")
    assert 'action="/ui/memories"' in page
    assert 'name="agent"' in page


def test_memories_page_lists_and_filters(client: httpx.Client) -> None:
    page = text_of(ok_page(client, "/ui/memories?agent=alice"))
    assert "Memories of alice" in page
    # 3 notes, 14 * 5 outcomes, 4 failures (each failure memory records its fix inside it).
    counted = re.search(r"([\d,]+) memories", page)
    assert counted is not None
    total = int(counted.group(1).replace(",", ""))
    assert total == 3 + 70 + 4
    assert "ConnectionRefusedError" in page  # newest first: the failures came last
    assert "6432 since the migration" in text_of(ok_page(client, "/ui/memories?agent=alice&tag=db"))
    only_ops = text_of(ok_page(client, "/ui/memories?agent=alice&tag=ops"))
    assert "1 memory; showing 1–1" in only_ops
    assert "Deploys freeze on Fridays" in only_ops
    failures = text_of(ok_page(client, "/ui/memories?agent=alice&kind=failure"))
    assert "4 memories" in failures
    # Dates: the outcomes of days 3 to 5 (5 a day), and none before the store existed.
    days = text_of(ok_page(client, "/ui/memories?agent=alice&kind=decision&from=2026-03-05&to=2026-03-07"))
    assert "15 memories" in days
    assert "0 memories" in text_of(ok_page(client, "/ui/memories?agent=alice&to=2020-01-01"))


def test_memories_page_pages(client: httpx.Client) -> None:
    first = ok_page(client, "/ui/memories?agent=alice&limit=30")
    assert "showing 1–30" in text_of(first)
    assert 'id="next"' in first
    assert 'id="prev"' not in first
    nxt = re.search(r'href="([^"]+)" id="next"', first)
    assert nxt is not None
    second = ok_page(client, html.unescape(nxt.group(1)))
    assert "showing 31–60" in text_of(second)
    last = text_of(ok_page(client, "/ui/memories?agent=alice&limit=30&offset=60"))
    assert "showing 61–77" in last
    assert "Older" not in last


def test_search_finds_by_meaning_and_keeps_filters(client: httpx.Client) -> None:
    page = text_of(ok_page(client, "/ui/memories?agent=alice&q=" + quote("where is the staging database")))
    assert "Best matches 1–" in page
    assert page.index("db-staging") < page.index("Deploys freeze") if "Deploys freeze" in page else True
    none = text_of(ok_page(client, "/ui/memories?agent=alice&q=staging&kind=preference"))
    assert "No matches." in none


def test_memory_page_shows_history(client: httpx.Client, seeded: tuple[Engram, dict[str, str]]) -> None:
    _, ids = seeded
    page = ok_page(client, f"/ui/memory?agent=alice&id={ids['note']}")
    history = page[page.index('id="history"') :]
    assert "port 5433" in history
    assert "6432 since the migration" in history
    assert ">create<" in history
    assert ">update<" in history
    # bob sees the memory alice shared with him, but not its history (the owner's).
    shared = text_of(ok_page(client, f"/ui/memory?agent=bob&id={ids['shared']}"))
    assert "Deploys freeze on Fridays" in shared
    assert "shared with bob by alice" in shared
    assert "shown to its owner only" in shared
    # ... and not alice's private note at all.
    assert "no memory" in error_line(client, f"/ui/memory?agent=bob&id={ids['note']}", 404)


def test_learning_page_shows_curves_and_verdicts(client: httpx.Client) -> None:
    page = ok_page(client, "/ui/learning?agent=alice")
    text = text_of(page)
    assert "70 recorded outcomes in 2 categories" in text
    deploy = page[page.index("<h2>deploy</h2>") :]
    deploy = deploy[: deploy.index("</section>")]
    assert "improving" in text_of(deploy)
    assert "Cochran-Armitage" in deploy
    # One point per day (4 outcomes each), under a confidence band.
    assert deploy.count("<circle") == 14
    assert "Success rate per day" in deploy
    assert "<polyline" in deploy
    assert "<polygon" in deploy
    cache = page[page.index("<h2>cache</h2>") :]
    assert re.search(r"verdict-(stable|insufficient)", cache[: cache.index("</section>")])


def test_failures_page_shows_recurring_patterns_and_fixes(client: httpx.Client) -> None:
    text = text_of(ok_page(client, "/ui/failures?agent=alice"))
    assert "1 pattern seen at least twice" in text
    assert "3 occurrences" in text
    assert "start the database container first" in text
    assert "validate the payload" not in text  # seen once: not recurring
    every = text_of(ok_page(client, "/ui/failures?agent=alice&all=1"))
    assert "2 patterns" in every
    assert "validate the payload" in every


def test_shares_page_both_ways(client: httpx.Client, seeded: tuple[Engram, dict[str, str]]) -> None:
    _, ids = seeded
    alice = ok_page(client, "/ui/shares?agent=alice")
    made = alice[alice.index('id="made"') :]
    assert ids["shared"] in made
    assert "bob" in made
    bob = ok_page(client, "/ui/shares?agent=bob")
    received = bob[bob.index('id="received"') :]
    assert ids["shared"] in received
    assert "alice" in received
    assert "Shared by bob (0)" in text_of(bob)


def test_audit_page_verifies_the_trail(client: httpx.Client) -> None:
    text = text_of(ok_page(client, "/ui/audit?agent=alice&limit=5"))
    assert re.search(r"Intact: [\d,]+ entries verified", text)
    assert text.count(" UTC ") >= 5 or text.count("UTC") >= 5


def test_audit_page_shows_a_broken_trail(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        mem.remember("one", agent="alice")
        mem.remember("two", agent="alice")
        # Someone with the file edits an entry (dropping the trigger that refuses it first).
        with sqlite3.connect(tmp_path / "store" / "engram.db") as db:
            db.execute("DROP TRIGGER audit_append_only_update")
            db.execute("UPDATE audit SET agent = 'mallory' WHERE seq = 1")
        with serving(create_dashboard(mem)) as base, httpx.Client(base_url=base) as c:
            text = text_of(ok_page(c, "/ui/audit?agent=alice"))
    assert "Broken:" in text
    assert "first bad entry #1" in text


# -- input validation and escaping ------------------------------------------------------------------------

BAD = [
    ("/ui/memories?agent=alice&limit=abc", "limit must be a whole number"),
    ("/ui/memories?agent=alice&limit=0", "limit must be a whole number from 1 to 200"),
    ("/ui/memories?agent=alice&limit=201", "limit must be a whole number from 1 to 200"),
    ("/ui/memories?agent=alice&limit=99999999999999999999999", "limit must be a whole number"),
    ("/ui/memories?agent=alice&offset=-1", "offset must be a whole number"),
    ("/ui/memories?agent=alice&kind=secret", "unknown kind 'secret'"),
    ("/ui/memories?agent=alice&from=yesterday", "from must be a date like"),
    ("/ui/memories?agent=alice&to=2026-02-30", "to must be a date like"),
    ("/ui/memories?agent=alice&from=2026-03-05&to=2026-03-01", "from must not be after to"),
    ("/ui/memories?agent=alice&agent=bob", "give agent once"),
    ("/ui/memories?agent=*", "agent '*' is reserved"),
    ("/ui/memories?agent=%20alice", "agent must be a non-empty name"),
    ("/ui/memories?agent=a%00b", "agent contains a NUL character"),
    ("/ui/memories?agent=" + "a" * 300, "agent is too long"),
    ("/ui/memories?agent=alice&q=" + "x" * 2001, "q is too long"),
    ("/ui/memories?agent=alice&q=x&offset=995&limit=10", "search results go 1000 deep"),
    ("/ui/memories?agent=alice&tag=a%0Ab", "tags entry contains a control character"),
    ("/ui/memory?agent=alice", "id is required"),
    ("/ui/failures?agent=alice&all=maybe", "all must be 1 or 0"),
    ("/ui/audit?agent=alice&limit=5000", "limit must be a whole number from 1 to 1000"),
    ("/ui/memories?agent=alice&tags=db", "unknown query parameter 'tags'"),
]


@pytest.mark.parametrize(("url", "message"), BAD)
def test_bad_input_is_a_422_page_with_one_line(client: httpx.Client, url: str, message: str) -> None:
    assert message in error_line(client, url, 422)


def test_unknown_memory_is_a_404_page(client: httpx.Client) -> None:
    assert "no memory with id 'nope'" in error_line(client, "/ui/memory?agent=alice&id=nope", 404)


def test_content_agent_names_and_queries_are_escaped(
    client: httpx.Client, seeded: tuple[Engram, dict[str, str]]
) -> None:
    _, ids = seeded
    for url in (
        "/ui/memories?agent=alice&tag=xss",
        f"/ui/memory?agent=alice&id={ids['xss']}",
        "/ui/memories?agent=alice&q=" + quote(XSS),
        "/ui/memories?agent=" + quote("<b>eve</b>"),
        "/ui/memories?agent=alice&kind=" + quote("<script>x</script>"),
    ):
        r = client.get(url)
        assert r.status_code in (200, 422)
        assert "<script" not in r.text.lower(), url
        assert "<img" not in r.text.lower(), url
        assert "<b>eve" not in r.text
    page = ok_page(client, f"/ui/memory?agent=alice&id={ids['xss']}")
    assert html.escape(XSS, quote=False) in page or "&lt;script&gt;" in page


# -- authorization hook -----------------------------------------------------------------------------------


def test_authorize_hook_decides_the_agent(seeded: tuple[Engram, dict[str, str]]) -> None:
    mem, _ = seeded

    def by_header(request: Request, requested: str | None) -> str:
        caller = request.headers.get("x-agent", "")
        if requested not in (None, caller):
            raise HTTPException(403, f"this key may not read agent {requested!r}")
        return caller

    with serving(create_dashboard(mem, authorize=by_header)) as base, httpx.Client(base_url=base) as c:
        assert "Memories of alice" in ok_page_with(c, "/ui/memories", {"x-agent": "alice"})
        assert "Memories of alice" in ok_page_with(c, "/ui/memories?agent=alice", {"x-agent": "alice"})
        refused = c.get("/ui/memories?agent=bob", headers={"x-agent": "alice"})
        assert refused.status_code == 403
        assert "may not read agent &#39;bob&#39;" in refused.text
        assert "Deploys freeze" not in refused.text


def ok_page_with(client: httpx.Client, url: str, headers: dict[str, str]) -> str:
    r = client.get(url, headers=headers)
    assert r.status_code == 200, r.text[-300:]
    return r.text


def test_mounts_in_another_app_under_a_prefix(seeded: tuple[Engram, dict[str, str]]) -> None:
    from fastapi import FastAPI

    from engramdb.interfaces.web import dashboard_router

    mem, _ = seeded
    app = FastAPI()
    app.include_router(dashboard_router(lambda: mem, prefix="/dash"))
    with serving(app) as base, httpx.Client(base_url=base) as c:
        page = ok_page(c, "/dash/ui/memories?agent=alice&limit=1")
        assert 'href="/dash/ui/learning?agent=alice"' in page
        assert 'href="/dash/ui/memories?agent=alice&amp;limit=1&amp;offset=1"' in page
        assert c.get("/dash/ui/memories?agent=alice&limit=x").status_code == 422


# -- in the browser ---------------------------------------------------------------------------------------


def test_pages_render_in_chromium(site: str, browser: Browser, shots: Path) -> None:
    for name, url, expected in (
        ("memories", "/ui/memories?agent=alice", ["Memories of alice", "77 memories", "ConnectionRefusedError"]),
        ("learning", "/ui/learning?agent=alice", ["Learning curves of alice", "improving", "<svg", "<polyline"]),
        ("failures", "/ui/failures?agent=alice", ["Recurring failures", "start the database container first"]),
        ("shares", "/ui/shares?agent=bob", ["Shared with bob (1)", "alice"]),
        ("audit", "/ui/audit?agent=alice", ["Intact:", "entries verified"]),
        ("error", "/ui/memories?agent=alice&limit=abc", ["Invalid request", "limit must be a whole number"]),
    ):
        dom = browser.dom(site + url)
        for text in expected:
            assert text in (dom if text.startswith("<") else text_of(dom)), (name, text)
        shot = browser.screenshot(site + url, shots / f"{name}.png")
        check_screenshot(shot)


def test_xss_does_not_run_in_chromium(site: str, browser: Browser, seeded: tuple[Engram, dict[str, str]]) -> None:
    _, ids = seeded
    for url in (f"/ui/memory?agent=alice&id={ids['xss']}", "/ui/memories?agent=alice&q=" + quote(XSS)):
        dom = browser.dom(site + url)
        title = re.search(r"<title>(.*?)</title>", dom, re.S)
        assert title is not None
        assert "pwned" not in title.group(1)
        assert "<img" not in dom.lower()
        assert "&lt;script&gt;document.title" in dom


def test_memory_values_are_what_the_api_returns(seeded: tuple[Engram, dict[str, str]]) -> None:
    mem, ids = seeded
    note: Memory = mem.get(ids["note"])
    assert note.content.endswith("since the migration")


def test_mounted_in_the_rest_app(seeded: tuple[Engram, dict[str, str]]) -> None:
    """What ``engram serve`` does: the REST app with the dashboard's router at ``/``; each keeps its own errors."""
    from engramdb.interfaces.rest import create_app
    from engramdb.interfaces.web import dashboard_router

    mem, _ = seeded
    app = create_app(mem)
    app.include_router(dashboard_router(lambda: mem))
    with serving(app) as base, httpx.Client(base_url=base) as c:
        assert 'action="/ui/memories"' in ok_page(c, "/")
        assert "Memories of alice" in ok_page(c, "/ui/memories?agent=alice")
        assert "limit must be a whole number" in error_line(c, "/ui/memories?agent=alice&limit=x", 422)
        assert c.get("/health").json()["status"] == "ok"
        assert c.get("/memories", params={"agent": "alice", "limit": "x"}).status_code == 422


def test_api_keys_in_the_rest_app(tmp_path: Path, embedder: Embedder, browser: Browser) -> None:
    """With keys, a page needs one (Bearer, X-API-Key, or HTTP Basic as a browser sends it) and shows its agent."""
    from engramdb.interfaces.rest import create_app
    from engramdb.interfaces.web import api_key_authorizer, dashboard_router

    with Engram(tmp_path / "store", embedder=embedder) as mem:
        mem.remember("alice's own note about the release train", agent="alice")
        mem.remember("bob's secret plan", agent="bob")
        keys = mem.keys
        alice = keys.create("alice").token
        admin = keys.create("ops", admin=True).token
        app = create_app(mem, keys=keys)
        app.include_router(dashboard_router(lambda: mem, authorize=api_key_authorizer(keys)))
        with serving(app) as base, httpx.Client(base_url=base) as c:
            anonymous = c.get("/ui/memories")
            assert anonymous.status_code == 401
            assert anonymous.headers["www-authenticate"].startswith("Basic")
            assert "an API key is required" in anonymous.text
            assert c.get("/ui/memories", auth=("alice", "wrong")).status_code == 401
            # No agent named: the key's agent.
            own = ok_page_with(c, "/ui/memories", {"Authorization": f"Bearer {alice}"})
            assert "release train" in own
            assert "secret plan" not in own
            assert "release train" in ok_page_with(c, "/ui/memories?agent=alice", {"X-API-Key": alice})
            basic = c.get("/ui/memories", auth=("anyone", alice))
            assert basic.status_code == 200
            assert "release train" in basic.text
            refused = c.get("/ui/memories?agent=bob", auth=("anyone", alice))
            assert refused.status_code == 403
            assert "secret plan" not in refused.text
            assert "secret plan" in ok_page_with(c, "/ui/memories?agent=bob", {"X-API-Key": admin})
            # A browser with the key as Basic credentials in the URL.
            authority = base.replace("http://", f"http://key:{alice}@")
            dom = browser.dom(authority + "/ui/memories")
            assert "release train" in text_of(dom)
