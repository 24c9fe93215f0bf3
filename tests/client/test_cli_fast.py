"""The short way (``engramdb.interfaces.cli._fast``): the same request and answer as the full command line.

Two checks. In-process, Hypothesis: for command lines built from the options of ``memory search`` and
``memory record`` (and others the short way does not take), whenever the short way accepts one, typer reads
it too and the remote client sends exactly the same request. Against a real ``engram serve``: the same
answers as the full command line, errors in its words, and none of typer, httpx or the models loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.client._transport import Call
from engramdb.client.remote import RemoteEngram
from engramdb.errors import EngramError
from engramdb.interfaces.cli._fast import FastCall, parse, run
from engramdb.interfaces.cli._options import check_kinds
from engramdb.interfaces.cli.app import app
from engramdb.models import KINDS

_ROOT = typer.main.get_command(app)

_OPTIONS = ["--agent", "-a", "--type", "--kind", "-t", "--tag", "--user", "-u", "--session", "--limit", "-n"]
_OTHERS = ["--meta", "--store", "--min-score", "--visibility", "--since", "--key", "--", "-n5", "--limit=3", "-x"]
_VALUES = ["alice", "bob", "decision", "knowledge", "failure", "3", "0", "-1", "12", "x y", " ", "-", "--json", "ünï"]


def _full_request(command: str, args: list[str]) -> FastCall | str | None:
    """The request the full command line sends for ``engram memory COMMAND ARGS`` (None: it sends none;
    ``"refused"``: the library refused the arguments before sending)."""
    group = _ROOT.get_command(None, "memory")  # type: ignore[attr-defined,arg-type]
    click_command = group.get_command(None, command)
    try:
        params = click_command.make_context(command, list(args)).params
    except (typer.Exit, Exception):  # noqa: BLE001 - click's usage errors: no request
        return None
    sent: list[Call[Any]] = []
    client = RemoteEngram("http://127.0.0.1:9", send=sent.append)  # type: ignore[arg-type]
    text = params.get("query") if command == "search" else params.get("content")
    if not params.get("as_json") or text is None or not text.strip() or text == "-":
        return None
    try:
        if command == "search":
            assert all(not params[name] for name in ("since", "until", "meta", "min_score", "as_of", "store"))
            client.search(
                text,
                agent=params["agent"],
                kind=check_kinds(params["kinds"]),
                tags=params["tags"] or None,
                limit=params["limit"],
                user=params["user"],
                session=params["session"],
            )
        else:
            unused = ("meta", "visibility", "confidence", "context", "action", "outcome", "key", "at", "store")
            assert all(not params[name] for name in unused)
            client.remember(
                text,
                agent=params["agent"],
                kind=params["kind"] or "knowledge",
                tags=tuple(params["tags"] or ()),
                user=params["user"],
                session=params["session"],
            )
    except EngramError:  # the full command line refuses it before sending
        return "refused"
    (call,) = sent
    return FastCall("/v1" + call.path, call.body)


_PART = st.one_of(
    st.tuples(st.sampled_from(_OPTIONS), st.sampled_from(_VALUES)).map(list),
    st.sampled_from(_OTHERS).map(lambda o: [o]),
    st.sampled_from(_VALUES).map(lambda v: [v]),
)
#: What an agent's call has (the text, --json, an agent): mostly there, so that many lines are accepted.
_USUAL = (["deploy key"], ["--json"], ["--agent", "alice"])


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[str, list[str]]:
    usual = [part for part in _USUAL if draw(st.integers(0, 5))]
    parts = draw(st.lists(_PART, max_size=3)) + usual
    ordered = draw(st.permutations(parts))
    return draw(st.sampled_from(["search", "record"])), [token for part in ordered for token in part]


@settings(max_examples=400, deadline=None)
@given(command_lines(), st.booleans())
def test_what_the_short_way_accepts_typer_reads_the_same(line: tuple[str, list[str]], with_env_agent: bool) -> None:
    command, args = line
    environ = {"ENGRAM_AGENT": "carol"} if with_env_agent else {}
    fast = parse(["memory", command, *args], environ)
    if fast is None:
        return
    old = os.environ.get("ENGRAM_AGENT")
    os.environ.pop("ENGRAM_AGENT", None)
    os.environ.update(environ)
    try:
        full = _full_request(command, args)
        if full == "refused":
            # Refused before sending, for a kind it does not know: the server refuses that kind too (422), and
            # the short way then hands over to the full command line (test_a_refused_request_...).
            kinds = fast.body["kind"] if isinstance(fast.body["kind"], list) else [fast.body["kind"]]
            assert set(kinds) - set(KINDS), args
        else:
            assert fast == full, args
    finally:
        os.environ.pop("ENGRAM_AGENT", None)
        if old is not None:
            os.environ["ENGRAM_AGENT"] = old


def test_the_short_way_takes_the_usual_agent_calls() -> None:
    search = parse(["memory", "search", "auth failure", "--agent", "a1", "-t", "decision", "-n", "3", "--json"], {})
    assert search == FastCall("/v1/search", {"query": "auth failure", "agent": "a1", "limit": 3, "kind": ["decision"]})
    record = parse(["memory", "record", "Retry with backoff", "--user", "bob", "--json"], {"ENGRAM_AGENT": "a1"})
    assert record is not None
    assert record.body["agent"] == "a1"
    assert record.body["user"] == "bob"
    # Text output, stdin, the outcome trio and an agent from the config file all go the full way.
    for argv in (
        ["memory", "search", "auth", "--agent", "a1"],
        ["memory", "record", "-", "--agent", "a1", "--json"],
        ["memory", "record", "--context", "c", "--action", "a", "--outcome", "success", "--agent", "a1", "--json"],
        ["memory", "search", "auth", "--json"],
        ["--store", "x", "memory", "search", "auth", "--agent", "a1", "--json"],
    ):
        assert parse(argv, {}) is None, argv


_RUN = """
import sys
entry = sys.argv[1]
if entry == "full":
    from engramdb.interfaces.cli.app import main
else:
    from engramdb.interfaces.cli import main
sys.argv = ["engram", *sys.argv[2:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = ("typer", "httpx", "rich", "engramdb.models", "engramdb.client", "numpy")
print("LOADED=" + ",".join(m for m in heavy if m in sys.modules), file=sys.stderr)
sys.exit(code)
"""


def engram(url: str, *args: str, full: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_URL"] = url
    return subprocess.run(
        [sys.executable, "-c", _RUN, "full" if full else "short", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def loaded(result: subprocess.CompletedProcess[str]) -> str:
    return next(line for line in result.stderr.splitlines() if line.startswith("LOADED=")).removeprefix("LOADED=")


def _stable(memory: dict[str, Any]) -> dict[str, Any]:
    # What a read changes (access statistics) and the ranking's float noise aside.
    return {k: v for k, v in memory.items() if k not in ("last_accessed", "access_count")}


def test_the_short_way_answers_as_the_full_command_line(server: Any, agent: str) -> None:
    record = engram(server.url, "memory", "record", "Rotate the deploy key every Monday", "--agent", agent, "--json")
    assert record.returncode == 0, record.stderr
    assert loaded(record) == ""  # no typer, no httpx, no models: the standard library only
    stored = json.loads(record.stdout)
    full_record = engram(
        server.url, "memory", "record", "Cache entries expire after 300 s", "--agent", agent, "--json", full=True
    )
    assert sorted(json.loads(full_record.stdout)) == sorted(stored)

    args = ("memory", "search", "deploy key rotation", "--agent", agent, "--limit", "5", "--json")
    short, full = engram(server.url, *args), engram(server.url, *args, full=True)
    assert short.returncode == full.returncode == 0, short.stderr + full.stderr
    assert loaded(short) == ""
    assert "typer" in loaded(full)  # the comparison is with the full command line indeed
    short_hits, full_hits = json.loads(short.stdout), json.loads(full.stdout)
    assert [h["memory"]["id"] for h in short_hits] == [h["memory"]["id"] for h in full_hits]
    assert short_hits[0]["memory"]["id"] == stored["id"]
    assert [_stable(h["memory"]) for h in short_hits] == [_stable(h["memory"]) for h in full_hits]
    assert [sorted(h) for h in short_hits] == [sorted(h) for h in full_hits]


def test_a_refused_request_is_reported_by_the_full_command_line(server: Any, agent: str) -> None:
    args = ("memory", "record", "A note", "--agent", agent, "--type", "bogus", "--json")
    short, full = engram(server.url, *args), engram(server.url, *args, full=True)
    assert short.returncode == full.returncode == 1
    assert short.stderr.splitlines()[0] == full.stderr.splitlines()[0]
    assert "unknown kind 'bogus'" in short.stderr
    assert short.stdout == ""
    count = engram(server.url, "memory", "search", "A note", "--agent", agent, "--json")
    assert json.loads(count.stdout) == []  # nothing was written


def test_an_unreachable_server_is_the_full_command_lines_line(agent: str) -> None:
    result = engram("http://127.0.0.1:9", "memory", "search", "auth", "--agent", agent, "--json")
    assert result.returncode == 1
    assert "cannot reach the engram server" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_a_server_url_the_full_command_line_runs() -> None:
    argv = ["memory", "search", "auth", "--agent", "a", "--json"]
    assert run(argv, {}) is None
    assert run(argv, {"ENGRAM_URL": "postgresql://db/engram"}) is None
    assert run(argv, {"ENGRAM_URL": "http://127.0.0.1:9", "ENGRAM_API_KEY": " "}) is None
