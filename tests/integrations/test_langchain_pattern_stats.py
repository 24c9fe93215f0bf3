"""``get_pattern_stats``: the same answer as totals over every pattern, computed in the store.

The expected text is computed here the way the tool used to compute it (every pattern listed, then
summed in Python), over patterns with different success rates and usage, some shared with the agent,
and beside memories that are not patterns.
"""

from __future__ import annotations

from typing import Any

from integration_extras import require

require("langchain_core", "langchain")

from langchain_core.tools import BaseTool  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.integrations.langchain import PATTERN_KIND, PATTERN_TAG, memory_tools  # noqa: E402
from engramdb.models import Memory  # noqa: E402


def stats_of(mem: Engram, agent: str) -> str:
    tool: BaseTool = {t.name: t for t in memory_tools(mem, agent=agent)}["get_pattern_stats"]
    out = tool.invoke({"type": "tool_call", "name": tool.name, "args": {}, "id": "c1"})
    assert isinstance(out.content, str)
    return out.content


def expected(patterns: list[Memory]) -> str:
    """The statistics as totals over every pattern in Python (the reference)."""
    if not patterns:
        return "Pattern statistics:\n- Total patterns: 0"
    rates = [m.confidence for m in patterns]
    most_used = max(patterns, key=lambda m: (m.attempts, m.created_at))
    usage = sum(m.attempts for m in patterns)
    return "\n".join(
        [
            "Pattern statistics:",
            f"- Total patterns: {len(patterns)}",
            f"- Average success rate: {sum(rates) / len(rates):.0%}",
            f"- Best success rate: {max(rates):.0%}",
            f"- Total usage: {int(usage) if float(usage).is_integer() else f'{usage:.1f}'}",
            f"- Most used pattern: {most_used.id if most_used.attempts > 0 else 'none used yet'}",
        ]
    )


def visible_patterns(mem: Engram, agent: str) -> list[Memory]:
    return mem.list(agent=agent, kind=PATTERN_KIND, tags=[PATTERN_TAG], limit=1000)


def save(mem: Engram, agent: str, task: str, rate: float) -> str:
    tool = {t.name: t for t in memory_tools(mem, agent=agent)}["save_pattern"]
    args: dict[str, Any] = {"task": task, "actions": [{"click": task}], "success_rate": rate}
    out = tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "s"})
    return str(out.content).split()[2]


def test_stats_match_totals_over_every_pattern(mem: Engram) -> None:
    assert stats_of(mem, "surfer") == expected([])
    ids = [
        save(mem, "surfer", task, rate)
        for task, rate in [
            ("Log in to the bank website", 0.9),
            ("Download the monthly statement as PDF", 0.6),
            ("Book a table for two at an Italian restaurant", 0.35),
        ]
    ]
    # Not patterns: another kind, and a success memory without the pattern tag.
    mem.remember("The bank closes at five on Fridays", agent="surfer", kind="knowledge", tags=[PATTERN_TAG])
    mem.remember("Paid the electricity bill online", agent="surfer", kind=PATTERN_KIND)
    # Unused so far.
    assert stats_of(mem, "surfer") == expected(visible_patterns(mem, "surfer"))
    assert "none used yet" in stats_of(mem, "surfer")
    # Outcomes move confidence and attempts.
    mem.learning.feedback([ids[1]], "success", agent="surfer")
    mem.learning.feedback([ids[1]], "failure", agent="surfer")
    mem.learning.feedback([ids[2]], "success", agent="surfer")
    # A pattern of another agent, shared with this one, counts too.
    other = save(mem, "helper", "Renew a library book online", 0.8)
    mem.sharing.share([other], from_agent="helper", to_agent="surfer")
    patterns = visible_patterns(mem, "surfer")
    assert len(patterns) == 4
    got = stats_of(mem, "surfer")
    assert got == expected(patterns)
    assert f"Most used pattern: {ids[1]}" in got
    assert "Total usage: 3" in got
    # The other agent sees only its own pattern.
    assert stats_of(mem, "helper") == expected(visible_patterns(mem, "helper"))
