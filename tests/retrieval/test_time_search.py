"""A question that names a time finds what happened then: event times (``at=``) against the question's
reference time (``as_of``, else now), with the real model on each backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engramdb import Engram

#: Saturday 22 April 2023, mid-morning: when the questions are asked.
ASKED = datetime(2023, 4, 22, 10, 0, tzinfo=UTC)

#: What the user did, each on its day; no memory says which day it was in words.
DIARY = {
    "market": ("I went to the farmers market and bought strawberries and fresh bread.", (2023, 4, 8, 11)),
    "hike": ("I went hiking up Mount Tamalpais with Priya, a long trail walk.", (2023, 4, 15, 9)),
    "garage": ("I cleaned out the garage and fixed the chain on my bike.", (2023, 4, 20, 18)),
    "pottery": ("I went to a pottery class and made a blue bowl.", (2023, 3, 4, 15)),
}


#: The rest of an assistant's memory: facts and preferences, stored today (no event time of their own).
OTHER = [
    "The user's editor is Neovim with the LazyVim distribution.",
    "The staging database runs PostgreSQL 15 on port 5433.",
    "The user prefers short answers with code examples.",
    "Deploys are frozen on Friday afternoons.",
    "The user's cat is called Miso.",
    "The team's stand-up is at 9:30 every weekday.",
    "The user is allergic to peanuts.",
    "The project's CI runs on GitHub Actions with a 90 minute limit.",
]


def _remember_diary(mem: Engram) -> dict[str, str]:
    for fact in OTHER:
        mem.remember(fact, agent="me", kind="knowledge")
    return {
        name: mem.remember(content, agent="me", kind="episode", at=datetime(*when, tzinfo=UTC)).id
        for name, (content, when) in DIARY.items()
    }


def test_the_day_a_question_names_comes_first(backend_mem: Engram) -> None:
    ids = _remember_diary(backend_mem)
    asked = {
        "What did I do last Saturday?": "hike",
        "what did I do two weeks ago": "market",
        "What did I do on Thursday?": "garage",
        "what did I do in March?": "pottery",
    }
    for question, key in asked.items():
        hits = backend_mem.search(question, agent="me", as_of=ASKED, limit=4)
        assert hits[0].memory.id == ids[key], (question, [h.memory.content for h in hits])


def test_a_time_the_store_holds_nothing_of_changes_nothing(mem: Engram) -> None:
    ids = _remember_diary(mem)
    plain = mem.search("What did I buy at the farmers market?", agent="me", as_of=ASKED, limit=4)
    dated = mem.search("What did I buy at the farmers market in 2019?", agent="me", as_of=ASKED, limit=4)
    assert plain[0].memory.id == dated[0].memory.id == ids["market"]


def test_without_a_reference_time_now_is_the_reference(mem: Engram) -> None:
    for fact in OTHER:
        mem.remember(fact, agent="me", kind="knowledge")
    now = datetime.now(UTC)
    yesterday = now - timedelta(days=1)
    older = now - timedelta(days=9)
    mem.remember("I reviewed the quarterly budget with Sam.", agent="me", kind="episode", at=older)
    recent = mem.remember("I reviewed the hiring plan with Sam.", agent="me", kind="episode", at=yesterday)
    hits = mem.search("what did I review with Sam yesterday", agent="me", limit=2)
    assert hits[0].memory.id == recent.id
