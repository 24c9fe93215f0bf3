"""Short-term memory: a token-budgeted session window with promotion to long-term memory."""

from __future__ import annotations

import pytest

from engramdb import Engram, ValidationError
from engramdb.shortterm import SessionContext


def words(text: str) -> int:
    return len(text.split())


def promoter_log():
    calls = []

    def promote(content, **kw):
        calls.append((content, kw))
        return content

    return calls, promote


def test_window_trims_oldest_messages_to_the_budget():
    _calls, promote = promoter_log()
    ctx = SessionContext("a", token_budget=10, count_tokens=words, promoter=promote)
    for i in range(6):
        ctx.add(f"message number {i}")  # 3 tokens each
    assert ctx.tokens <= 10
    assert [m.content for m in ctx.messages] == ["message number 3", "message number 4", "message number 5"]


def test_variables_count_against_the_budget_but_are_never_trimmed():
    _, promote = promoter_log()
    ctx = SessionContext("a", token_budget=8, count_tokens=words, promoter=promote)
    ctx.add("one two three")
    ctx.set("goal", "ship the release today")
    assert ctx.get("goal") == "ship the release today"
    assert ctx.tokens <= 8 or len(ctx.messages) == 1
    ctx.add("four five six")
    assert ctx.variables == {"goal": "ship the release today"}
    assert [m.content for m in ctx.messages] == ["four five six"]


def test_an_oversized_message_is_still_kept_as_the_newest():
    _, promote = promoter_log()
    ctx = SessionContext("a", token_budget=2, count_tokens=words, promoter=promote)
    ctx.add("this single message is longer than the budget")
    assert len(ctx.messages) == 1


def test_bad_input_is_rejected():
    _, promote = promoter_log()
    ctx = SessionContext("a", token_budget=5, count_tokens=words, promoter=promote)
    with pytest.raises(ValidationError):
        ctx.add("   ")
    with pytest.raises(ValidationError):
        ctx.set("x", object())
    with pytest.raises(ValidationError):
        ctx.promote(3)
    with pytest.raises(ValidationError):
        ctx.promote("missing")
    with pytest.raises(ValidationError):
        SessionContext("a", token_budget=0, count_tokens=words, promoter=promote)


def test_promote_moves_items_into_long_term_memory(tmp_path):
    with Engram(tmp_path / "store") as mem:
        ctx = mem.session("alice", token_budget=200)
        assert mem.session("alice") is ctx
        ctx.add("The deploy key lives in the vault under ops/deploy", role="user")
        ctx.add("Noted.", role="assistant")
        ctx.set("preferred_region", "eu-west-1")
        m1 = ctx.promote(0)
        m2 = ctx.promote("preferred_region", kind="preference")
        assert [m.content for m in ctx.messages] == ["Noted."]
        assert "preferred_region" not in ctx.variables
        assert m1.kind == "conversation"
        assert m1.agent == "alice"
        assert m1.metadata["role"] == "user"
        assert m2.kind == "preference"
        assert m2.content == 'preferred_region: "eu-west-1"'
        hits = mem.search("where is the deploy key", agent="alice", limit=1)
        assert hits[0].memory.id == m1.id
        # The window counts real tokens of the bundled tokenizer.
        assert ctx.tokens > 0
