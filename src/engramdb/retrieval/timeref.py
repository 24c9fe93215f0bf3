"""Time named in a question ("last Saturday", "two weeks ago", "in May"), resolved to an interval. Pure.

A question is asked at a reference moment (``now``, or the moment the caller says it was asked). The
expressions are found by a small set of patterns (so a question without any costs one regex scan and never
loads the date library), then each found phrase is resolved by ``dateparser`` against the reference, which
also says the phrase's granularity (day, week, month, year). Only seasons and weekends, which the library
does not read, are resolved here. An expression that names an event instead of a date ("two weeks before
the trip") is not resolved: it needs the event's own date first.

The interval of a phrase follows its granularity: "last Saturday" and "yesterday" are that day, "last
week" and "in May" the calendar week or month, "two weeks ago" the week around the day fourteen days back
(people round: it is rarely exactly 14 days). Days begin at midnight in the reference's time zone.

A phrase that counts back ("a week ago", "10 days ago"; :func:`counted_back`) says when, not what: its words
count for little as evidence (:data:`RELATIVE_WEIGHT`), and a memory that tells an event on the day it was said
("today", "yesterday"; :func:`reports_event`) is the likelier answer (:data:`EVENT_WEIGHT`).

A memory's own words date its event too: "yesterday" said on the 15th happened on the 14th (:func:`told_time`). That
time is found once, when the memory is written, and kept in its metadata (:data:`TOLD_KEY`, :func:`with_told_time`);
a question's window is compared with it instead of the day the memory was said (:func:`event_time_of`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final, Literal

from engramdb.retrieval.ranking import Fused

__all__ = [
    "EVENT_WEIGHT",
    "RELATIVE_WEIGHT",
    "TIME_ONLY_WEIGHT",
    "TIME_WEIGHT",
    "TOLD_KEY",
    "TimeSpan",
    "TimeWindow",
    "counted_back",
    "event_time_of",
    "find_time",
    "nearness",
    "relative_words",
    "reports_event",
    "told_time",
    "weigh_by_time",
    "weigh_reported_events",
    "with_told_time",
]

#: What a candidate inside the question's time gains, against fused relevance in [0, 1] (bench/RESULTS.md,
#: "time in questions").
TIME_WEIGHT = 0.3
#: The weight when the question has no other words to go by ("what did I do last Saturday?"): above any
#: fused relevance (at most 1), so the time decides and relevance orders what lies equally near it.
TIME_ONLY_WEIGHT = 2.0
#: What a word of a phrase that counts back from the question ("a week ago", "10 days ago": "week", "days",
#: "ago", "10") counts for in evidence fusion's coverage, against 1 for a word of its topic (it is still
#: searched). Resolved, the phrase says *when*; a turn saying "three weeks ago" of something else is no
#: evidence, and the turn that tells the event, said on its day, says "today" instead (bench/RESULTS.md, issue
#: 21 eighth round: 0, 0.25 and 0.5 measured alike with the event weight, 0 best without). Not "last weekend" or
#: "last year": speakers say those of the very event asked about (LoCoMo lost R@5 when they counted less).
RELATIVE_WEIGHT = 0.0
#: What a candidate gains whose text reports an event dated from the day it was said ("today", "yesterday",
#: "last week", "3 days ago"), for a question whose time phrase counts back: "which book did I finish a week
#: ago?" was answered by "I just finished it today" a week earlier (issue 21, eighth round: 0.05 / 0.1 / 0.2
#: measured; 0.1 the smallest with the whole gain). Against fused relevance in [0, 1].
EVENT_WEIGHT = 0.1

Unit = Literal["day", "week", "weekend", "month", "season", "year"]

#: The metadata key of the time a memory's own words date its event to (:func:`told_time`; ISO 8601), set when
#: it is written. ``occurred_at`` stays the time it was said: ``as_of`` filters by that, so a turn said on the 15th
#: about the 14th is not seen as of the 14th.
TOLD_KEY: Final = "told_at"
#: The units a memory's phrase may date its event by. A month, season or year is no date of an event: its middle
#: would be further from the event than the day it was told, often.
_TOLD_UNITS: frozenset[Unit] = frozenset({"day", "weekend", "week"})

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}  # first month (northern hemisphere)
_COUNT_WORDS = {"a couple of": "2", "couple of": "2", "a few": "3", "few": "3", "several": "3"}

_WD = "|".join(_WEEKDAYS)
_MO = "|".join(_MONTHS)
_NUM = (
    r"(?:\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|(?:a\s+)?couple\s+of|(?:a\s+)?few|several)"
)
_REL = r"(?:last|this\s+past|this|past|previous|next|earlier\s+this)"
_DAY_NUM = r"\d{1,2}(?:st|nd|rd|th)?"
# One alternation, longest forms first; ``\b`` on both sides so "may" in "mayor" or "sat" never match.
_PATTERNS = [
    rf"{_NUM}\s+(?:day|week|month|year)s?\s+(?:ago|back|earlier)",
    r"(?:the\s+day\s+before\s+)?yesterday|today|tonight|tomorrow|last\s+night",
    r"this\s+(?:morning|afternoon|evening)",
    # Not a name: "the Spring Fling Market".
    rf"(?:{_REL}|in|during|over)\s+(?:the\s+)?(?:weekend|spring|summer|fall|autumn|winter)"
    r"(?:(?:\s+of)?\s+(?:19|20)\d\d)?(?!\s+(?-i:[A-Z]))",
    rf"{_REL}\s+(?:week|month|year|{_WD})",
    rf"(?:on\s+)?(?:{_MO})\s+{_DAY_NUM}(?:,?\s*(?:19|20)\d\d)?",
    rf"(?:on\s+)?(?:the\s+)?{_DAY_NUM}\s+(?:of\s+)?(?:{_MO})(?:,?\s*(?:19|20)\d\d)?",
    rf"(?:{_MO})\s+(?:19|20)\d\d",
    rf"(?:in|during|since|of|for|early|late|mid-?|last|this)\s+(?:{_MO})\b(?:\s+(?:19|20)\d\d)?",
    rf"on\s+(?:{_WD})",
    r"(?:in|during|since|back\s+in)\s+(?:19|20)\d\d",
    r"(?:on\s+)?(?:(?:19|20)\d\d-\d\d-\d\d|\d{1,2}/\d{1,2}/(?:19|20)\d\d)",
]
_FIND = re.compile(r"\b(?:" + "|".join(f"(?:{p})" for p in _PATTERNS) + r")\b", re.IGNORECASE)
# Words that make a question look forward ("what is planned for May?"): then a bare month or weekday is
# the next one, not the last.
_FUTURE = re.compile(
    r"\b(?:will|going\s+to|gonna|plan(?:s|ned|ning)?|upcoming|next|tomorrow|schedule[ds]?|can\s+(?:i|we)|should|shall)\b",
    re.IGNORECASE,
)
_LEAD = re.compile(r"^(?:on|in|during|over|back\s+in|early|late|mid-?|of|for|the)\s+", re.I)
_SEASONAL = re.compile(
    r"(last|this|next)?\s*(?:the )?(weekend|spring|summer|fall|autumn|winter)(?:(?: of)? ((?:19|20)\d\d))?"
)
#: A phrase that names a date of the calendar (a year, or a month and a day), not one relative to the question.
_ABSOLUTE = re.compile(
    rf"(?:19|20)\d\d|\b{_DAY_NUM}\s+(?:of\s+)?(?:{_MO})\b|\b(?:{_MO})\s+{_DAY_NUM}\b|\d/\d", re.IGNORECASE
)
#: "two weeks before" / "the week after", just ahead of a date of the calendar.
_OFFSET = re.compile(
    rf"\b(?:({_NUM})\s+(day|week|month|year)s?|the\s+(day|week|weekend|month))\s+(before|after)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
#: A phrase counted from the moment the question is asked (with no calendar date in it).
_RELATIVE = re.compile(
    r"\b(?:ago|back|earlier|last|past|previous|this|next|yesterday|today|tonight|tomorrow)\b", re.IGNORECASE
)
#: A turn that dates what it tells from the day it was said (the sixth round's list; bench/RESULTS.md), on
#: lowercased text. Two patterns, each tried only if a substring it needs is there: scanning every turn with a long
#: alternation was a measurable cost on the questions that count back (bench/RESULTS.md, issue 21 eighth round).
_REPORTS = re.compile(
    rf"(?<!\w)(?:today|yesterday|tonight|last\s+(?:night|week|weekend|month|{_WD})|this\s+(?:morning|afternoon|evening))\b"
)
#: Substrings one of which a phrase naming another day than the one said needs (lowercased text); else a month's
#: name with a day's number (:data:`_MONTH_DAY`).
_TOLD_HINTS = ("yesterday", "tomorrow", " ago", " back", "earlier", "last ", "past ", "previous", "next ", "weekend",
               *_WEEKDAYS, "/19", "/20", "-19", "-20")  # fmt: skip
_MONTH_DAY = re.compile(rf"\b(?:{_MO})\s+\d|\d(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MO})\b")
_HINT = re.compile("|".join(re.escape(h) for h in _TOLD_HINTS) + "|" + _MONTH_DAY.pattern)
#: The found phrases that may name a day, weekend or week (the rest, "today", "last month", "in 2020", are not
#: resolved at all).
_TOLD_PHRASE = re.compile(
    rf"yesterday|tomorrow|night|\b(?:days?|weeks?)\s+(?:ago|back|earlier)|\bweek(?:end)?\b|{_WD}|\d[/-]\d"
    rf"|\d.*\b(?:{_MO})\b|\b(?:{_MO})\b.*\d",
    re.IGNORECASE,
)
_BARE_WEEKDAY = re.compile(rf"(?:on\s+)?(?:{_WD})", re.IGNORECASE)
_DAYS_AGO = re.compile(rf"(?<!\w){_NUM}\s+days?\s+ago\b")
_REPORT_HINTS = ("today", "yesterday", "tonight", "last", "this morning", "this afternoon", "this evening")
_AGO = re.compile(r"\b(?:ago|back|earlier)$", re.IGNORECASE)
_CALENDAR_WORDS = frozenset(_WEEKDAYS) | frozenset(_MONTHS)
_WORDS = re.compile(r"\w+")
_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_NUMBER_WORDS = {w: i for i, w in enumerate(_NUMBERS)} | {"a": 1, "an": 1}
_MAX_CHARS = 4000  # a question longer than this is scanned only up to here (a pasted document is no question)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeSpan:
    """One time expression of a question and the interval it names: ``start <= t < end``."""

    text: str
    start: datetime
    end: datetime
    unit: Unit
    #: Counted from the question's reference ("a week ago", "last Saturday"), not a date of the calendar ("in
    #: May", "on 3 August 2023", "two weeks before August 3").
    relative: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeWindow:
    """The time a question names: the hull of its expressions, and the question without them."""

    spans: tuple[TimeSpan, ...]
    start: datetime
    end: datetime
    #: The question with the time words taken out (for a keyword channel that should not look for "Saturday").
    rest: str

    @property
    def unit(self) -> Unit:
        """The coarsest unit among the expressions: how much slack "near" the window allows."""
        order: tuple[Unit, ...] = ("day", "weekend", "week", "month", "season", "year")
        return max((s.unit for s in self.spans), key=order.index)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "unit": self.unit,
            "expressions": [s.text for s in self.spans],
            "relative": [s.text for s in self.spans if s.relative],
            "rest": self.rest,
        }


def find_time(question: str, *, reference: datetime) -> TimeWindow | None:
    """The time ``question`` names, resolved against ``reference`` (naive: UTC); None if it names none.

    Never raises on any text: a phrase the library cannot read is skipped.
    """
    ref = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
    text = question[:_MAX_CHARS]
    future = _FUTURE.search(text) is not None
    found = list(_FIND.finditer(text))
    spans: list[TimeSpan] = []
    cuts: list[tuple[int, int]] = []
    # A date of the calendar first: "last Friday, on 23 January 2022" counts "last Friday" from that day.
    anchor: datetime | None = None
    for match in sorted(found, key=lambda m: _ABSOLUTE.search(m.group(0)) is None):
        start = match.start()
        absolute = _ABSOLUTE.search(match.group(0)) is not None
        span = _resolve(match.group(0), ref if absolute or anchor is None else anchor, future=future)
        if span is None:
            continue
        if not absolute and anchor is None and _RELATIVE.search(match.group(0)) is not None:
            span = dataclasses.replace(span, relative=True)
        if absolute and anchor is None:
            anchor = span.start
        offset = _OFFSET.search(text, 0, start) if absolute else None
        if offset is not None:
            # "two weeks before August 11, 2023": that time too, besides the day named (which a conversation
            # turn may carry as its date: the day it was said).
            shifted = _shift(span, offset)
            if shifted is not None:
                spans.append(shifted)
                start = offset.start()
        spans.append(span)
        cuts.append((start, match.end()))
    cuts.sort()
    if not spans:
        return None
    rest = "".join(text[a:b] for a, b in _gaps(cuts, len(text)))
    rest = re.sub(r"\s+([?.!,])", r"\1", re.sub(r"\s{2,}", " ", rest)).strip()
    return TimeWindow(
        spans=tuple(spans),
        start=min(s.start for s in spans),
        end=max(s.end for s in spans),
        rest=rest + question[_MAX_CHARS:],
    )


#: How far outside a window a moment still counts as near it, fading linearly (people round: "two weeks
#: ago" said of 12 days, "in May" of May 31st's evening in another time zone).
_SLACK: dict[Unit, timedelta] = {
    "day": timedelta(days=1),
    "weekend": timedelta(days=1),
    "week": timedelta(days=3),
    "month": timedelta(days=7),
    "season": timedelta(days=15),
    "year": timedelta(days=30),
}


def nearness(when: datetime, window: TimeWindow) -> float:
    """1 inside ``window``, fading linearly to 0 at one slack (the window's unit's) outside it."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if window.start <= when < window.end:
        return 1.0
    gap = window.start - when if when < window.start else when - window.end
    return max(0.0, 1.0 - gap / _SLACK[window.unit])


def weigh_by_time(
    fused: Sequence[Fused],
    when: Mapping[str, datetime],
    window: TimeWindow,
    *,
    weight: float = TIME_WEIGHT,
    additive: bool = True,
    told: Mapping[str, datetime] | None = None,
) -> list[Fused]:
    """Candidates re-weighed by how near their event time (``when``, by id) lies to the question's window.

    Additive (the default): time is a channel of its own, a candidate gains ``weight`` times its nearness
    (a question like "what did I do last Saturday" has no other words to go by). Multiplicative: a candidate
    keeps ``1 - weight * (1 - nearness)`` of its relevance. Either way, a candidate of unknown time counts as
    far, and if no candidate is near the window nothing changes: the question names a time the store holds
    nothing of, and its words alone should decide. ``told``: a second time of some candidates (when their words
    date the event they tell, :func:`told_time`); the nearer of the two counts.
    """
    near = {f.id: nearness(when[f.id], window) for f in fused if f.id in when}
    for memory_id, at in (told or {}).items():
        if memory_id in near:
            near[memory_id] = max(near[memory_id], nearness(at, window))
    if not any(v > 0.0 for v in near.values()):
        return list(fused)
    if additive:
        out = [dataclasses.replace(f, relevance=f.relevance + weight * near.get(f.id, 0.0)) for f in fused]
    else:
        out = [
            dataclasses.replace(f, relevance=f.relevance * (1.0 - weight * (1.0 - near.get(f.id, 0.0)))) for f in fused
        ]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out


def counted_back(span: TimeSpan) -> bool:
    """Whether ``span`` counts back from the question ("a week ago", "10 days back"), unlike "last weekend", which
    a speaker says of the same event too."""
    return span.relative and _AGO.search(span.text) is not None


def relative_words(window: TimeWindow, *, counted: bool = False) -> frozenset[str]:
    """The lowercase words of ``window``'s phrases counted from the question's reference ("a", "week", "ago",
    "last"; with ``counted``, only of those that count back: :func:`counted_back`), without weekday and month
    names ("Saturday" in "last Saturday" may be a turn's own word)."""
    return frozenset(
        w
        for s in window.spans
        if (counted_back(s) if counted else s.relative)
        for w in _WORDS.findall(s.text.lower())
        if w not in _CALENDAR_WORDS
    )


def reports_event(text: str) -> bool:
    """Whether ``text`` dates something from the day it was said ("I finished it today", "3 days ago")."""
    low = text[:_MAX_CHARS].lower()
    if " ago" in low and _DAYS_AGO.search(low) is not None:
        return True
    return any(h in low for h in _REPORT_HINTS) and _REPORTS.search(low) is not None


def told_time(text: str, *, said: datetime) -> datetime | None:
    """When the event ``text`` tells happened, by its own words counted from ``said`` (naive: UTC): "yesterday" said on
    the 15th is the 14th, "last Saturday" that Saturday, "two weeks ago" the day 14 days back (the middle of each
    phrase's interval). None when its words name no day, weekend or week other than the one it was said in ("today",
    "this week"): the time it was said stands. The first such phrase decides; it is after ``said`` only when the
    words look forward ("tomorrow", "next Friday"). Never raises on any text.

    Run on every memory written, so it is kept cheap (bench/RESULTS.md, issue 21 ninth round): a few substring
    tests first, then the phrases only of the kinds that can name another day, and the library only until one does.
    """
    ref = said if said.tzinfo is not None else said.replace(tzinfo=UTC)
    head = text[:_MAX_CHARS]
    low = head.lower()
    if not any(h in low for h in _TOLD_HINTS) and not (
        any(m in low for m in _MONTHS) and _MONTH_DAY.search(low) is not None
    ):
        return None
    future = _FUTURE.search(head) is not None
    for phrase in _phrases_near(head, low):
        if _TOLD_PHRASE.search(phrase) is None:
            continue
        span = _resolve(phrase, ref, future=future)
        if span is None or span.unit not in _TOLD_UNITS or span.start <= ref < span.end:
            continue
        if _BARE_WEEKDAY.fullmatch(phrase) is not None and span.start.weekday() == ref.weekday():
            # "I went for a jog on Saturday" said on a Saturday: that day, not the one a week before.
            continue
        return span.start + (span.end - span.start) / 2
    return None


def _phrases_near(head: str, low: str) -> Iterator[str]:
    """The time phrases of ``head`` (``low``: it lowercased) near a hint, in order: the full scan only of stretches
    around them (scanning a whole turn with the phrases' long alternation was most of the cost)."""
    reach = 48  # longer than any phrase's part before or after its hint
    stretches: list[list[int]] = []
    for hint in _HINT.finditer(low):
        start, end = max(0, hint.start() - reach), hint.end() + reach
        if stretches and start <= stretches[-1][1]:
            stretches[-1][1] = end
        else:
            stretches.append([start, end])
    seen = -1
    for start, end in stretches:
        for match in _FIND.finditer(head, start, end):
            if match.start() > seen:
                seen = match.end()
                yield match.group(0)


def with_told_time(metadata: Mapping[str, Any], text: str, *, said: datetime) -> dict[str, Any]:
    """``metadata`` with the time ``text``'s words date its event to (:data:`TOLD_KEY`), if they do and the caller
    did not set the key."""
    out = dict(metadata)
    if TOLD_KEY not in out:
        told = told_time(text, said=said)
        if told is not None:
            out[TOLD_KEY] = told.isoformat()
    return out


def event_time_of(occurred_at: datetime, metadata: Mapping[str, Any]) -> datetime:
    """When a memory's event happened: the time its words date it to (:data:`TOLD_KEY`), else ``occurred_at``. A
    value that is no ISO 8601 time (a caller's own key) is ignored."""
    told = metadata.get(TOLD_KEY)
    if isinstance(told, str):
        try:
            when = datetime.fromisoformat(told)
        except ValueError:
            return occurred_at
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return occurred_at


def weigh_reported_events(fused: Sequence[Fused], texts: Mapping[str, str], *, weight: float) -> list[Fused]:
    """Candidates whose text (``texts``, by id) reports a dated event gain ``weight``; the rest keep theirs."""
    out = [
        dataclasses.replace(f, relevance=f.relevance + weight) if reports_event(texts.get(f.id, "")) else f
        for f in fused
    ]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out


def _shift(span: TimeSpan, offset: re.Match[str]) -> TimeSpan | None:
    """``span`` moved by an offset phrase ("two weeks before", "the week after")."""
    count, unit, the_unit, way = offset.groups()
    sign = -1 if way.lower() == "before" else 1
    if the_unit is not None:
        length = {"day": 1, "week": 7, "weekend": 2, "month": 30}[the_unit.lower()]
        first = span.start - timedelta(days=length) if sign < 0 else span.end
        return TimeSpan(text=offset.group(0) + span.text, start=first, end=first + timedelta(days=length), unit="week")
    number = _COUNT_WORDS.get(re.sub(r"\s+", " ", count.lower()), count.lower())
    n = int(number) if number.isdigit() else _NUMBER_WORDS.get(number)
    if n is None:
        return None
    days = n * {"day": 1, "week": 7, "month": 30, "year": 365}[unit.lower()]
    half = {"day": 0, "week": 3, "month": 15, "year": 182}[unit.lower()]
    try:
        centre = span.start + timedelta(days=sign * days)
        return TimeSpan(
            text=offset.group(0) + span.text,
            start=centre - timedelta(days=half),
            end=centre + timedelta(days=half + 1),
            unit="day" if half == 0 else "week" if half == 3 else "month" if half == 15 else "year",
        )
    except OverflowError:
        return None


def _gaps(cuts: list[tuple[int, int]], length: int) -> Iterator[tuple[int, int]]:
    at = 0
    for a, b in cuts:
        yield at, a
        at = b
    yield at, length


def _resolve(phrase: str, ref: datetime, *, future: bool) -> TimeSpan | None:
    words = re.sub(r"\s+", " ", phrase.lower()).strip()
    since = words.startswith("since ")
    core = _LEAD.sub("", words.removeprefix("since ")).replace("this past ", "last ").replace("earlier this ", "this ")
    span = _own(core, phrase, ref) or _library(core, phrase, ref, future=future)
    if span is not None and since:
        # "since March": from then until the question.
        end = max(ref, span.start + timedelta(seconds=1))
        span = TimeSpan(text=span.text, start=span.start, end=end, unit=span.unit)
    return span


def _own(core: str, phrase: str, ref: datetime) -> TimeSpan | None:
    """Seasons and weekends (the library reads neither)."""
    m = _SEASONAL.fullmatch(core)
    if m is None:
        return None
    rel, what, year = m.group(1) or "", m.group(2), m.group(3)
    today = ref.date()
    if what == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)  # the latest Saturday up to today
        if rel == "next" or (rel == "this" and today.weekday() < 5):
            saturday += timedelta(days=7)
        elif rel == "last" and today.weekday() >= 5:
            saturday -= timedelta(days=7)
        return _span(phrase, saturday, saturday + timedelta(days=2), "weekend", ref)
    first = _SEASONS[what]
    if year is not None:
        start = date(int(year), first, 1)
    else:
        # The latest such season begun by the reference; "last" while it lasts: the one before; "next": after.
        start = date(today.year, first, 1)
        if start > today:
            start = date(today.year - 1, first, 1)
        if rel == "last" and _add_months(start, 3) > today:
            start = date(start.year - 1, first, 1)
        elif rel == "next":
            start = date(start.year + 1, first, 1)
    return _span(phrase, start, _add_months(start, 3), "season", ref)


def _library(core: str, phrase: str, ref: datetime, *, future: bool) -> TimeSpan | None:
    for word, number in _COUNT_WORDS.items():
        core = core.replace(word, number)
    core = re.sub(r"\s(?:back|earlier)$", " ago", core)
    if core.startswith("last ") and core[5:] in _MONTHS:
        core = core[5:]  # "last June": the library reads only "June", which the past preference places
    parsed = _parse(core, ref.replace(tzinfo=None), "future" if future and "ago" not in core else "past")
    if parsed is None:
        return None
    when, period = parsed
    day = when.date()
    if core.endswith(" ago") and period in ("week", "month", "year"):
        unit: Unit = "week" if period == "week" else "month" if period == "month" else "year"
        half = {"week": 3, "month": 15, "year": 182}[unit]
        return _span(phrase, day - timedelta(days=half), day + timedelta(days=half + 1), unit, ref)
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        return _span(phrase, monday, monday + timedelta(days=7), "week", ref)
    if period == "month":
        first = day.replace(day=1)
        return _span(phrase, first, _add_months(first, 1), "month", ref)
    if period == "year":
        return _span(phrase, date(day.year, 1, 1), date(day.year + 1, 1, 1), "year", ref)
    return _span(phrase, day, day + timedelta(days=1), "day", ref)


def _parse(core: str, base: datetime, prefer: str) -> tuple[datetime, str] | None:
    from dateparser.date import DateDataParser  # ~0.2 s on first use: only for questions that name a time

    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "RETURN_TIME_AS_PERIOD": True}
    try:
        data = DateDataParser(languages=["en"], settings=settings).get_date_data(core)
    except (ValueError, OverflowError):  # "9999 years ago" and the like: past the calendar
        return None
    if data.date_obj is None:
        return None
    return data.date_obj, str(data.period or "day")


def _span(phrase: str, first: date, stop: date, unit: Unit, ref: datetime) -> TimeSpan | None:
    if stop <= first:
        return None
    tz = ref.tzinfo
    return TimeSpan(
        text=phrase,
        start=datetime.combine(first, time(), tzinfo=tz),
        end=datetime.combine(stop, time(), tzinfo=tz),
        unit=unit,
    )


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)
