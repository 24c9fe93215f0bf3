"""Property tests of issue 12's new input paths: the audit action filter, the store-exists check, MCP bodies.

Each, fed arbitrary input, either accepts it or refuses it with the library's error (or a JSON-RPC error) on one
line; none raises anything else, and the store check never creates anything. Bounded by
``ENGRAM_FUZZ_EXAMPLES`` (default 25) like the other fuzz tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engramdb import NotFound, ValidationError
from engramdb.services.audit import AUDIT_ACTIONS, check_action
from engramdb.storage import require_store

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "25"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Text near the valid actions (typos, case, spaces) as well as anything at all.
ACTION_TEXT = st.one_of(
    st.sampled_from(sorted(AUDIT_ACTIONS)),
    st.sampled_from(sorted(AUDIT_ACTIONS)).map(lambda a: a.upper()),
    st.sampled_from(sorted(AUDIT_ACTIONS)).map(lambda a: a[:-1]),
    st.sampled_from(sorted(AUDIT_ACTIONS)).map(lambda a: f" {a}"),
    st.text(max_size=80),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
#: JSON-RPC-shaped objects with arbitrary field values, so the fuzz reaches past the "is it an object" check.
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | JSON_VALUES,
        "id": st.integers() | st.text(max_size=8) | JSON_VALUES,
        "method": st.sampled_from(["ping", "tools/call", "initialize"]) | JSON_VALUES,
        "params": JSON_VALUES,
        "result": JSON_VALUES,
    },
)


@SETTINGS
@given(ACTION_TEXT | JSON_VALUES)
def test_check_action_accepts_exactly_the_valid_actions(value: Any) -> None:
    accepted: str | None = None
    error: ValidationError | None = None
    try:
        accepted = check_action(value)
    except ValidationError as exc:
        error = exc
    if error is not None:
        assert "\n" not in str(error)
        assert not (isinstance(value, str) and value in AUDIT_ACTIONS)
    else:
        assert accepted == value
        assert accepted in AUDIT_ACTIONS


@SETTINGS
@example(name="w" * 300)  # a name the file system refuses (over 255 bytes): NotFound, not a raw OSError
@given(
    name=st.one_of(st.text(min_size=1, max_size=40), st.text(min_size=250, max_size=300)).filter(
        lambda t: "\x00" not in t
    )
)
def test_require_store_never_creates_anything(tmp_path: Path, name: str) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    location = str(tmp_path / name)
    error: NotFound | None = None
    try:
        require_store(location)
    except NotFound as exc:
        error = exc
    if error is not None:
        assert "\n" not in str(error)
        assert "no engramdb store at" in str(error)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@SETTINGS
@given(st.one_of(JSON_VALUES.map(json.dumps), MESSAGES.map(json.dumps), st.text(max_size=200)))
def test_check_message_answers_in_one_line_or_lets_through(line: str) -> None:
    pytest.importorskip("mcp")
    from engramdb.interfaces.mcp import check_message

    problem = check_message(line)
    if problem is None:
        return
    msg_id, code, message = problem
    assert code in (-32700, -32600, -32602)
    assert "\n" not in message
    assert len(message) < 200
    assert msg_id is None or isinstance(msg_id, str | int)
    json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})  # sendable


def test_cli_audit_action_filter_fuzz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from engramdb.interfaces.cli import app

    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    store = str(tmp_path / "store")
    assert runner.invoke(app, ["memory", "record", "x marks the spot", "--store", store]).exit_code == 0

    @SETTINGS
    @given(ACTION_TEXT.filter(lambda t: "\x00" not in t and not t.startswith("-")))
    def run(action: str) -> None:
        result = runner.invoke(app, ["audit", "log", "--action", action, "--store", store, "--json"])
        assert "Traceback" not in result.output
        if action in AUDIT_ACTIONS:
            assert result.exit_code == 0, result.output
            assert {e["action"] for e in json.loads(result.stdout)} <= {action}
        else:
            assert result.exit_code == 1, result.output
            assert len(result.stderr.strip().splitlines()) == 1

    run()
