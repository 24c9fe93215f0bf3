"""Issue 12's last rough edges for a new user: audit-action typos, mistyped store paths, unrelated hits, MCP bodies.

1. An audit action the trail never holds is an error listing the valid ones (library, CLI, REST), not an
   empty answer; the list covers every action engramdb writes.
2. A read-only command on a path that holds no store fails, naming the path, and creates nothing; a write
   creates the store as before (and so does a server: a normal first run).
3. ``min_score`` leaves the unrelated hit of the README's quick start out, alike from Python, the CLI, REST
   and MCP.
4. MCP over HTTP answers a body that is not one JSON-RPC message with a one-line error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import fails, ok, ok_json

from engramdb import Engram, NotFound, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.errors import NotAStoreError
from engramdb.services.audit import AUDIT_ACTIONS
from engramdb.storage import require_store

SRC = Path(__file__).resolve().parents[2] / "src" / "engramdb"

FAILURE = "Deploy failed with 'connection refused' on port 5432; starting the database first fixed it"
PREFERENCE = "Alice prefers short answers with code examples"
QUERY = "why did the deployment break?"


# -- 1. audit actions ------------------------------------------------------------------------------------


#: Values whose ``action=`` is not an audit entry: what ``add`` did with a fact (add, update, delete, none).
NOT_AUDIT_CALLS = frozenset({"FactChange", "_Planned"})


def _written_actions() -> set[str]:
    """Every audit action named by a literal in the source: ``action=``/``audit_action=``/``added_action=``
    keywords, the reads' ``_read("...")`` and the records built by ``write_record``/``_record``."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        if "interfaces" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in NOT_AUDIT_CALLS:
                continue
            for kw in node.keywords:
                if kw.arg in {"action", "audit_action", "added_action"} and isinstance(kw.value, ast.Constant):
                    found.add(kw.value.value)
            if name in {"_read", "write_record", "_record", "_transfer_record"} and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
    # Keyword "action" also names a decision's action in learning (records, posteriors): not audit entries.
    return {a for a in found if isinstance(a, str) and a}


def test_the_valid_actions_cover_every_action_engramdb_writes() -> None:
    not_audit = {""}  # learning's empty "untried" posterior action
    missing = _written_actions() - AUDIT_ACTIONS - not_audit
    assert not missing, f"audit actions written but rejected as filters: {sorted(missing)}"


def test_every_action_a_real_store_records_can_be_filtered_on(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        m = mem.remember("The cache TTL is 300 seconds", agent="alice", tags=["cache"])
        mem.remember("dark", agent="alice", key="theme")
        mem.remember("light", agent="alice", key="theme")  # supersede
        mem.search("cache TTL", agent="alice")
        mem.get(m.id)
        mem.list(agent="alice")
        mem.update(m.id, content="The cache TTL is 600 seconds")
        mem.sharing.share(memory_ids=[m.id], from_agent="alice", to_agent="bob")
        mem.sharing.unshare(memory_ids=[m.id], from_agent="alice", to_agent="bob")
        mem.knowledge.export_file(tmp_path / "k.json", agent="alice")
        tip = mem.remember("Refresh the token before retrying a 401", agent="alice")
        mem.learning.record("401 from orders", "refresh", "success", agent="alice", used=[tip.id])
        pending = mem.learning.record("flaky build", "rerun", None, agent="alice")
        mem.learning.resolve(pending.id, "success", agent="alice")
        episode = mem.episodes.start("deploy the api", agent="alice")
        mem.episodes.event(episode, "build", {"ok": True}, agent="alice")
        mem.episodes.end(episode, "success", agent="alice")
        mem.forget(m.id)
        recorded = _check_filters(mem)
    with Engram(tmp_path / "other", embedder=embedder) as other:
        other.knowledge.import_file(tmp_path / "k.json", agent="carol")
        recorded |= _check_filters(other)
    assert {"create", "supersede", "search", "get", "list", "update", "share", "unshare", "export"} <= recorded
    assert {"import", "feedback", "resolve", "episode-event", "episode-end", "forget"} <= recorded


def _check_filters(mem: Engram) -> set[str]:
    """The actions ``mem``'s trail holds, after checking that each is a valid filter that finds its entries."""
    recorded = {e.action for e in mem.audit.log(limit=1000)}
    assert recorded <= AUDIT_ACTIONS, recorded - AUDIT_ACTIONS
    for action in recorded:
        assert {e.action for e in mem.audit.log(action=action, limit=1000)} == {action}
    return recorded


def test_an_unknown_action_is_one_line_listing_the_valid_ones(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        mem.remember("x marks the spot", agent="alice")
        with pytest.raises(ValidationError) as caught:
            mem.audit.log(action="serch")
    message = str(caught.value)
    assert "\n" not in message
    assert "'serch'" in message
    assert all(action in message for action in AUDIT_ACTIONS)


def test_cli_audit_log_rejects_an_unknown_action(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok("memory", "record", "x marks the spot", "--store", store)
    line = fails("audit", "log", "--action", "serch", "--store", store)
    assert "unknown audit action 'serch'" in line
    assert "search" in line
    assert [e["action"] for e in ok_json("audit", "log", "--action", "create", "--store", store)] == ["create"]
    # Checked before the store is opened: a typo on a missing path names the action, and creates nothing.
    assert "serch" in fails("audit", "log", "--action", "serch", "--store", str(tmp_path / "nope"))
    assert not (tmp_path / "nope").exists()


@pytest.fixture
def api(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[httpx.Client, Engram]]:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from rest_helpers import serving

    from engramdb.interfaces.rest import create_app

    with (
        Engram(tmp_path / "store", embedder=embedder, min_score=0.2) as mem,
        serving(create_app(mem)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        yield client, mem


def test_rest_audit_rejects_an_unknown_action_with_a_422(api: tuple[httpx.Client, Engram]) -> None:
    from rest_helpers import error_of

    client, _ = api
    client.post("/memories", json={"content": "x marks the spot", "agent": "alice"})
    message = error_of(client.get("/audit", params={"action": "serch"}), 422)
    assert "unknown audit action 'serch'" in message
    assert "search" in message
    assert client.get("/audit", params={"action": "search"}).status_code == 200


# -- 2. a read on a path that holds no store ---------------------------------------------------------------

#: Commands that only read: on a missing path each must fail naming it, and create nothing.
READS: list[list[str]] = [
    ["memory", "search", "x"],
    ["memory", "retrieve", "--context", "x"],
    ["memory", "list"],
    ["memory", "show", "0" * 32],
    ["memory", "history", "0" * 32],
    ["memory", "shares"],
    ["audit", "log"],
    ["audit", "verify"],
    ["learning", "stats"],
    ["learning", "report"],
    ["learning", "suggest", "--context", "x"],
    ["failures", "solutions", "boom"],
    ["knowledge", "export", "--agent", "a"],
    ["keys", "list"],
    ["prevention", "list"],
    ["context", "--task", "x"],
    ["route", "--task", "x", "--model", "a", "--model", "b"],
    ["doctor"],
]


@pytest.mark.parametrize("command", READS, ids=lambda c: " ".join(c[:2]))
def test_a_read_on_a_missing_store_fails_naming_it_and_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "memroy"
    line = fails("--store", str(typo), *command)
    assert f"no engramdb store at {typo}" in line, line
    assert "engram memory record" in line
    assert not typo.exists()


def test_a_read_on_a_missing_default_home_fails_too(tmp_path: Path) -> None:
    # The fixture points $ENGRAM_HOME at tmp_path/home, which does not exist yet.
    assert f"no engramdb store at {tmp_path / 'home'}" in fails("memory", "list")
    assert not (tmp_path / "home").exists()


def test_a_write_creates_the_store_then_reads_work(tmp_path: Path) -> None:
    store = str(tmp_path / "new")
    ok("memory", "record", "The first memory", "--agent", "alice", "--store", store)
    assert [m["content"] for m in ok_json("memory", "list", "--agent", "alice", "--store", store)] == [
        "The first memory"
    ]
    assert ok_json("audit", "verify", "--store", store)["ok"] is True
    ok("doctor", "--store", store)


def test_engram_create_false_needs_an_existing_store(tmp_path: Path, embedder: Embedder) -> None:
    with pytest.raises(NotFound, match="no engramdb store at"):
        Engram(tmp_path / "missing", embedder=embedder, create=False)
    assert not (tmp_path / "missing").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound):
        Engram(tmp_path / "empty", embedder=embedder, create=False)
    assert list((tmp_path / "empty").iterdir()) == []
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        mem.remember("kept", agent="a")
    with Engram(tmp_path / "s", embedder=embedder, create=False) as mem:
        assert mem.count(agent="a") == 1
    with Engram(":memory:", embedder=embedder, create=False) as mem:
        assert mem.count(agent="a") == 0
    # A file is not a missing store: opening it says what is wrong with it.
    (tmp_path / "file.db").write_text("not a store")
    with pytest.raises(NotAStoreError):
        Engram(tmp_path / "file.db", embedder=embedder, create=False)
    require_store("postgresql://user:secret@db.example/engram")  # a URL: the server holds it


def test_servers_announce_the_store_without_a_password() -> None:
    from engramdb.interfaces.cli.servers import _announce

    class Fake:
        location = "postgresql://user:s3cret@db.example:5432/engram"

    import io
    import sys

    saved, sys.stderr = sys.stderr, io.StringIO()
    try:
        _announce(Fake(), new=False, what="engram serve")  # type: ignore[arg-type]
        said = sys.stderr.getvalue()
    finally:
        sys.stderr = saved
    assert said == "engram serve: serving the store at postgresql://db.example:5432/engram\n"


# -- 3. min_score: the quick start's unrelated hit, alike everywhere ---------------------------------------


def _seed_quick_start(mem: Engram) -> None:
    mem.remember(FAILURE, agent="alice", kind="failure", tags=["deploy", "postgres"])
    mem.remember(PREFERENCE, agent="alice", kind="preference")


def test_without_min_score_the_unrelated_hit_scores_zero(tmp_path: Path, embedder: Embedder) -> None:
    """Why the quick start once printed a 0.000 hit: scores are scaled within the query's candidates."""
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        _seed_quick_start(mem)
        hits = mem.search(QUERY, agent="alice", limit=3)
    assert [h.memory.kind for h in hits] == ["failure", "preference"]
    assert hits[1].score == 0.0
    assert hits[1].keyword_score is None
    assert hits[1].vector_score is not None
    assert hits[1].vector_score < 0.2 <= (hits[0].vector_score or 0.0)


def test_min_score_from_python_and_the_cli(tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "s"
    with Engram(store, embedder=embedder, min_score=0.2) as mem:
        _seed_quick_start(mem)
        assert [h.memory.kind for h in mem.search(QUERY, agent="alice", limit=3)] == ["failure"]
    args = ["memory", "search", QUERY, "--agent", "alice", "--store", str(store)]
    assert [h["memory"]["kind"] for h in ok_json(*args)] == ["failure", "preference"]
    assert [h["memory"]["kind"] for h in ok_json(*args, "--min-score", "0.2")] == ["failure"]
    retrieve = ["memory", "retrieve", "--context", QUERY, "--agent", "alice", "--store", str(store)]
    assert [h["memory"]["kind"] for h in ok_json(*retrieve, "--min-score", "0.2")] == ["failure"]
    monkeypatch.setenv("ENGRAM_MIN_SCORE", "0.2")
    assert [h["memory"]["kind"] for h in ok_json(*args)] == ["failure"]
    assert "--min-score" in fails(*args, "--min-score", "1.5")


def test_min_score_from_rest(api: tuple[httpx.Client, Engram]) -> None:
    client, mem = api
    _seed_quick_start(mem)
    found = client.post("/search", json={"query": QUERY, "agent": "alice", "limit": 3})
    assert found.status_code == 200, found.text
    assert [h["memory"]["kind"] for h in found.json()["hits"]] == ["failure"]


def test_min_score_from_mcp(tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    from test_mcp import payload, run

    store = tmp_path / "store"
    with Engram(store, embedder=embedder) as mem:
        _seed_quick_start(mem)
    monkeypatch.setenv("ENGRAM_MIN_SCORE", "0.2")  # the server's setting, as for `engram serve`
    kinds: list[str] = []

    async def scenario(session: Any) -> None:
        hits = payload(await session.call_tool("search", {"query": QUERY, "agent": "alice", "limit": 3}))["hits"]
        kinds.extend(h["memory"]["kind"] for h in hits)

    run(store, scenario)
    assert kinds == ["failure"]


# -- 4. MCP over HTTP: a body that is not one JSON-RPC message ------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"[]", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', b"42", b'"ping"', b"null", b"true", b'{"jsonrpc":"2.0"}'],
)
def test_mcp_http_answers_a_wrong_shaped_body_in_one_line(tmp_path: Path, embedder: Embedder, raw: bytes) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("uvicorn")
    from rest_helpers import serving

    from engramdb.interfaces.mcp import MCP_PATH, create_http_app

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with (
        Engram(tmp_path / "s", embedder=embedder) as mem,
        serving(create_http_app(mem)) as url,
        httpx.Client(base_url=url, timeout=60, headers=headers) as client,
    ):
        response = client.post(MCP_PATH, content=raw)
        assert response.status_code == 400, response.text
        body = response.json()
        assert body["jsonrpc"] == "2.0"
        message = body["error"]["message"]
        assert body["error"]["code"] == -32600
        assert "\n" not in message, message
        assert len(message) < 200, message
        assert "pydantic" not in response.text
        assert "input_value" not in response.text


# -- 5. the seeds' CLI examples, as a new user types them ---------------------------------------------------


def test_seed_001_suggest_takes_task_and_says_whose_outcomes_it_reads(tmp_path: Path) -> None:
    """Seed 001: ``engram learning suggest --task auth-123``; and without --agent, the hint names the agent."""
    store = str(tmp_path / "store")
    for action, outcome in (("increase-timeout", "failure"), ("retry-with-exponential-backoff", "success")):
        ok("memory", "record", "--agent", "alice", "--type", "decision", "--context", "api-auth-timeout",
           "--action", action, "--outcome", outcome, "--store", store)  # fmt: skip
    by_task = ok_json("learning", "suggest", "--task", "api-auth-timeout", "--agent", "alice", "--store", store)
    assert by_task["options"][0]["action"] == "retry-with-exponential-backoff"
    nobody = ok("learning", "suggest", "--context", "api-auth-timeout", "--store", store)
    assert "Agent 'default' has no recorded outcomes" in nobody
    assert "--agent NAME" in nobody
    assert "2 outcomes for agent alice" in ok("learning", "stats", "--agent", "alice", "--store", store)
