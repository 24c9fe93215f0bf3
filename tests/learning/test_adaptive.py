"""The adaptive execution helper, end to end on a real store with the real model."""

from __future__ import annotations

import asyncio

import pytest

from engramdb import Engram, SolutionStats, ValidationError
from engramdb.models import Recovery


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """The facade-level tests run on every backend (SQLite and PostgreSQL)."""
    return backend_mem


def _decisions(mem: Engram, agent: str) -> list[dict[str, object]]:
    return [dict(m.metadata) for m in reversed(mem.list(agent=agent, kind="decision"))]


def test_decorator_chooses_times_and_records_success(mem: Engram) -> None:
    seen: list[str] = []

    @mem.learning.adaptive("resize the product images", options=["pillow", "vips"], agent="bob", category="images")
    def resize(approach: str, n: int) -> str:
        seen.append(approach)
        return f"{n} resized with {approach}"

    assert resize(3) == f"3 resized with {seen[0]}"  # type: ignore[call-arg,arg-type]  # approach is passed
    assert seen[0] in ("pillow", "vips")
    (meta,) = _decisions(mem, "bob")
    assert meta["action"] == seen[0]
    assert meta["outcome"] == "success"
    assert isinstance(meta["duration"], float)
    assert meta["category"] == "images"
    (decision,) = mem.list(agent="bob", kind="decision")
    assert decision.content == "resize the product images"
    assert resize.__name__ == "resize"


def test_without_options_the_function_gets_no_approach(mem: Engram) -> None:
    @mem.learning.adaptive("send the newsletter", agent="bob")
    def send() -> int:
        return 7

    assert send() == 7
    assert _decisions(mem, "bob")[0]["action"] == "default"


def test_an_error_is_recorded_and_reraised_without_a_hook(mem: Engram) -> None:
    @mem.learning.adaptive("sync orders", agent="bob")
    def sync() -> None:
        raise ConnectionError("cannot reach db-3.internal:5432 after 30s")

    with pytest.raises(ConnectionError):
        sync()
    (failure,) = mem.list(agent="bob", kind="failure")
    assert failure.metadata["signature"] == "ConnectionError: cannot reach <host> after <n>"
    assert failure.metadata["context"] == "sync orders"
    assert _decisions(mem, "bob")[0]["outcome"] == "failure"


def test_recovery_records_the_fix_so_the_next_occurrence_gets_it_first(mem: Engram) -> None:
    offered: list[list[SolutionStats]] = []
    host = iter(["db-1.internal:5432", "db-9.internal:6000"])

    def recover(error: BaseException, solutions: list[SolutionStats]) -> Recovery:
        offered.append(solutions)
        return Recovery(solution="restart the VPN", result="synced after restart", failed=["retry"])

    @mem.learning.adaptive("sync orders", agent="bob", recover=recover)
    def sync() -> str:
        raise ConnectionError(f"cannot reach {next(host)} after 30s")

    assert sync() == "synced after restart"
    assert offered[0] == []  # nothing known yet
    assert sync() == "synced after restart"
    best = offered[1][0]
    assert best.solution == "restart the VPN"
    assert (best.successes, best.attempts) == (1, 1)
    assert [d["outcome"] for d in _decisions(mem, "bob")] == ["partial", "partial"]
    (pattern,) = mem.failures.patterns(agent="bob")
    assert pattern.occurrences == 2
    assert [(s.solution, s.successes, s.attempts) for s in pattern.solutions] == [
        ("restart the VPN", 2, 2),
        ("retry", 0, 2),
    ]


def test_a_hook_that_gives_up_or_breaks_lets_the_error_through(mem: Engram) -> None:
    def give_up(error: BaseException, solutions: list[SolutionStats]) -> Recovery | None:
        return Recovery(failed=["clear the cache"])

    @mem.learning.adaptive("parse feed", agent="bob", recover=give_up)
    def parse() -> None:
        raise ValueError("bad token at line 3")

    with pytest.raises(ValueError, match="bad token"):
        parse()
    (failure,) = mem.list(agent="bob", kind="failure")
    assert failure.metadata["failed_solutions"] == ["clear the cache"]
    assert failure.metadata["solution"] is None

    def broken(error: BaseException, solutions: list[SolutionStats]) -> Recovery | None:
        raise RuntimeError("hook bug")

    @mem.learning.adaptive("parse feed", agent="bob", recover=broken)
    def parse_again() -> None:
        raise ValueError("bad token at line 9")

    with pytest.raises(ValueError, match="bad token") as info:
        parse_again()
    assert any("recovery hook failed" in n for n in info.value.__notes__)

    def wrong(error: BaseException, solutions: list[SolutionStats]) -> object:
        return "fixed it"

    @mem.learning.adaptive("parse feed", agent="bob", recover=wrong)  # type: ignore[arg-type]
    def parse_wrong() -> None:
        raise ValueError("bad token at line 1")

    with pytest.raises(ValidationError, match="must return Recovery or None"):
        parse_wrong()


def test_context_manager_success_and_recovery(mem: Engram) -> None:
    with mem.learning.adaptive("export the report", options=["csv", "xlsx"], agent="bob") as run:
        assert run.approach in ("csv", "xlsx")
        run.result = "report.csv"
    assert run.outcome == "success"
    assert run.decision is not None
    assert run.duration is not None

    def recover(error: BaseException, solutions: list[SolutionStats]) -> Recovery:
        return Recovery(solution="use the csv writer", result="fallback.csv")

    with mem.learning.adaptive("export the report", options=["csv", "xlsx"], agent="bob", recover=recover) as run:
        raise OSError("cannot write /tmp/out/report.xlsx")
    assert run.outcome == "partial"
    assert run.result == "fallback.csv"
    assert run.failure is not None
    assert run.failure.metadata["solution"] == "use the csv writer"

    with pytest.raises(KeyError), mem.learning.adaptive("export the report", agent="bob"):
        raise KeyError("sheet")


def test_async_functions_and_hooks(mem: Engram) -> None:
    async def recover(error: BaseException, solutions: list[SolutionStats]) -> Recovery:
        await asyncio.sleep(0)
        return Recovery(solution="refresh the token", result="ok")

    calls = []

    @mem.learning.adaptive("call the billing api", options=["rest", "grpc"], agent="bob", recover=recover)
    async def call(approach: str) -> str:
        calls.append(approach)
        if len(calls) == 1:
            raise PermissionError("401 Unauthorized: token expired")
        return approach

    assert asyncio.run(call()) == "ok"  # type: ignore[call-arg]  # the decorator passes the approach
    assert asyncio.run(call()) in ("rest", "grpc")  # type: ignore[call-arg]
    assert [d["outcome"] for d in _decisions(mem, "bob")] == ["partial", "success"]


def test_bad_arguments(mem: Engram) -> None:
    with pytest.raises(ValidationError):
        mem.learning.adaptive("", agent="bob")
    with pytest.raises(ValidationError):
        mem.learning.adaptive("t", options="ab", agent="bob")
    with pytest.raises(ValidationError):
        mem.learning.adaptive("t", options=[], agent="bob")
    with pytest.raises(ValidationError):
        mem.learning.adaptive("t", agent="bob", recover="nope")  # type: ignore[arg-type]


def test_choices_follow_the_outcomes(mem: Engram) -> None:
    # "fast" always fails, "safe" always works: after some runs the helper prefers "safe".
    @mem.learning.adaptive("load the nightly batch", options=["fast", "safe"], agent="carol")
    def load(approach: str) -> str:
        if approach == "fast":
            raise TimeoutError("batch 12 timed out")
        return approach

    chosen = []
    for _ in range(16):
        try:
            chosen.append(load())  # type: ignore[call-arg]  # the decorator passes the approach
        except TimeoutError:
            chosen.append("fast")
    assert chosen[-6:].count("safe") >= 5
