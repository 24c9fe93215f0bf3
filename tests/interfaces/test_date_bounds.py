"""Listing and searching memories created within dates.

The API (``list``/``search`` with ``since``/``until``), ``engram memory list|search|retrieve --since/--until``,
``GET /memories?since=`` and the ``search`` operation of REST and MCP (``POST /search``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cli_helpers import fails, ok_json
from hypothesis import given
from hypothesis import strategies as st
from rest_helpers import error_of, serving

from engramdb import Engram
from engramdb import _validate as check
from engramdb._util import utcnow
from engramdb.embeddings.base import Embedder
from engramdb.errors import ValidationError


def _three(mem: Engram) -> tuple[list[str], datetime, datetime]:
    """Three memories with instants between them: (ids oldest first, after the first, after the second)."""
    first = mem.remember("the first deploy used blue-green", kind="decision")
    time.sleep(0.01)
    after_first = utcnow()
    time.sleep(0.01)
    second = mem.remember("the second deploy used canaries", kind="decision")
    time.sleep(0.01)
    after_second = utcnow()
    time.sleep(0.01)
    third = mem.remember("the third deploy was rolled back", kind="decision")
    return [first.id, second.id, third.id], after_first, after_second


def test_the_api_lists_within_bounds_both_inclusive(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        ids, t1, t2 = _three(mem)
        assert [m.id for m in mem.list(since=t1)] == [ids[2], ids[1]]
        assert [m.id for m in mem.list(until=t2)] == [ids[1], ids[0]]
        assert [m.id for m in mem.list(since=t1, until=t2)] == [ids[1]]
        second = mem.get(ids[1])
        assert [m.id for m in mem.list(since=second.created_at, until=second.created_at)] == [ids[1]]
        # Strings: a date alone is its whole day; a time without an offset is UTC.
        today = t1.date().isoformat()
        assert len(mem.list(since=today, until=today)) == 3
        assert mem.list(until=(t1 - timedelta(days=1)).date().isoformat()) == []
        assert [m.id for m in mem.list(since=t2.replace(tzinfo=None).isoformat())] == [ids[2]]
        assert [m.id for m in mem.list(since=t2.astimezone(UTC).isoformat())] == [ids[2]]


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        (datetime(2026, 1, 1), None, "timezone-aware"),  # noqa: DTZ001 - the naive datetime is the point
        ("yesterday", None, "ISO 8601"),
        (12, None, "ISO 8601"),
        ("2026-13-01", None, "ISO 8601"),
        ("0001-01-01T00:00:00+05:00", None, "ISO 8601"),
        (None, "9999-12-31T23:59:59-05:00", "ISO 8601"),
        ("2026-11-24", "2026-11-01", r"since \(2026-11-24T00:00:00\+00:00\) is later than until"),
    ],
)
def test_bad_bounds_get_a_clear_error(
    tmp_path: Path, embedder: Embedder, since: object, until: object, message: str
) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        mem.remember("one memory")
        with pytest.raises(ValidationError, match=message):
            mem.list(since=since, until=until)  # type: ignore[arg-type]


def test_the_cli_lists_within_bounds(store: str, embedder: Embedder) -> None:
    with Engram(store, embedder=embedder) as mem:
        ids, t1, t2 = _three(mem)
    listed = ok_json("memory", "list", "--store", store, "--since", t1.isoformat(), "--until", t2.isoformat())
    assert [m["id"] for m in listed] == [ids[1]]
    assert "since must be an ISO 8601 date" in fails("memory", "list", "--store", store, "--since", "last tuesday")
    assert "until must be an ISO 8601 date" in fails("memory", "list", "--store", store, "--until", "2026-02-30")


def test_rest_lists_within_bounds(tmp_path: Path, embedder: Embedder) -> None:
    from engramdb.interfaces.rest import create_app  # the REST extra is installed with dev

    with Engram(tmp_path / "store", embedder=embedder) as mem:
        ids, t1, _ = _three(mem)
        with serving(create_app(mem)) as url, httpx.Client(base_url=url, timeout=60) as client:
            response = client.get("/memories", params={"since": t1.isoformat()})
            assert response.status_code == 200, response.text
            assert [m["id"] for m in response.json()["memories"]] == [ids[2], ids[1]]
            assert "since" in error_of(client.get("/memories", params={"since": "soon"}), 422)


def test_the_api_searches_within_bounds(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        ids, t1, t2 = _three(mem)
        assert {h.memory.id for h in mem.search("deploy", limit=10)} == set(ids)
        assert [h.memory.id for h in mem.search("deploy", since=t1, until=t2)] == [ids[1]]
        assert {h.memory.id for h in mem.search("deploy", since=t1)} == {ids[1], ids[2]}
        # Found by meaning alone (no keyword in common) obeys the bounds as well.
        by_meaning = mem.search("releasing software to production", until=t1, limit=10)
        assert [h.memory.id for h in by_meaning] == [ids[0]]
        assert mem.search("deploy", until=(t1 - timedelta(days=1)).date().isoformat()) == []
        # Only the memories a search returned count as accessed: 2, 3 and 2 of its 4 searches.
        assert [mem.get(i).access_count for i in ids] == [2, 3, 2]
        with pytest.raises(ValidationError, match="later than"):
            mem.search("deploy", since=t2, until=t1)
        with pytest.raises(ValidationError, match="ISO 8601"):
            mem.search("deploy", since="next week")


def test_the_cli_searches_within_bounds(store: str, embedder: Embedder) -> None:
    with Engram(store, embedder=embedder) as mem:
        ids, t1, t2 = _three(mem)
    for command in (["memory", "search", "deploy"], ["memory", "retrieve", "--context", "deploy"]):
        hits = ok_json(*command, "--store", store, "--since", t1.isoformat(), "--until", t2.isoformat())
        assert [h["memory"]["id"] for h in hits] == [ids[1]]
    assert "since must be an ISO 8601 date" in fails("memory", "search", "deploy", "--store", store, "--since", "soon")


def test_rest_searches_within_bounds(tmp_path: Path, embedder: Embedder) -> None:
    from engramdb.interfaces.rest import create_app

    with Engram(tmp_path / "store", embedder=embedder) as mem:
        ids, _, t2 = _three(mem)
        with serving(create_app(mem)) as url, httpx.Client(base_url=url, timeout=60) as client:
            response = client.post("/search", json={"query": "deploy", "since": t2.isoformat()})
            assert response.status_code == 200, response.text
            assert [h["memory"]["id"] for h in response.json()["hits"]] == [ids[2]]
            assert "since" in error_of(client.post("/search", json={"query": "deploy", "since": "soon"}), 422)
            too_long = client.post("/search", json={"query": "deploy", "until": "2026-01-01" + "0" * 40})
            assert "until" in error_of(too_long, 422)


@given(st.one_of(st.text(max_size=45), st.datetimes(timezones=st.timezones()), st.dates(), st.integers()))
def test_any_bound_is_a_utc_instant_or_a_validation_error(value: object) -> None:
    for end in (False, True):
        try:
            moment = check.moment(value, what="since", end=end)
        except ValidationError:
            continue
        assert moment is not None
        assert moment.utcoffset() == timedelta(0)
