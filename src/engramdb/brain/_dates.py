"""Date phrases in what people say ("next Friday", "on March 3rd", "in two weeks"), found and resolved. Pure.

Used by the fact extractor for plans: the phrase is kept in the fact's text and, when it names
a day, that day is worked out from the time the message was said (``now``), so "next Friday"
said on a Monday becomes a date that stays true when read a month later.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Final

__all__ = ["DATE_PHRASE", "find_date", "resolve_date"]

_MONTHS: Final = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
)  # fmt: skip
_MONTH_ABBR: Final = {m[:3]: i + 1 for i, m in enumerate(_MONTHS)} | {"sept": 9}
_DAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "a couple of": 2, "a few": 3, "couple of": 2, "few": 3,
}  # fmt: skip
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_ORD = r"\d{1,2}(?:st|nd|rd|th)?"
_COUNT = r"(?:\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_PART = r"(?:\s+(?:morning|afternoon|evening|night))?"

#: A date phrase, with its leading preposition when there is one.
DATE_PHRASE: Final = re.compile(
    rf"""\b(?:(?:on|by|this|next|coming|until|till|from|for)\s+)?(?:
        the\s+day\s+after\s+tomorrow | today | tonight | tomorrow{_PART} |
        (?:this|next|coming)\s+(?:week(?:end)?|month|year|{_DAY}{_PART}|spring|summer|fall|autumn|winter) |
        (?:the\s+)?{_ORD}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+\d{{4}})? |
        {_MONTH}\s+{_ORD}\b(?:,?\s+\d{{4}})? |
        {_DAY}{_PART} |
        in\s+{_COUNT}\s+(?:days?|weeks?|months?|years?) |
        in\s+{_MONTH}\b(?:\s+\d{{4}})? |
        \d{{4}}-\d{{2}}-\d{{2}} |
        (?:at\s+the\s+end\s+of|later\s+this|early\s+next|later\s+next)\s+(?:the\s+)?(?:week|month|year|{_MONTH})
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)


def find_date(text: str) -> re.Match[str] | None:
    """The first date phrase in ``text``, or None."""
    return DATE_PHRASE.search(text)


def _month(word: str) -> int | None:
    return _MONTH_ABBR.get(word.lower()[:4] if word.lower().startswith("sept") else word.lower()[:3])


def _safe(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _ahead(found: date | None, today: date, *, has_year: bool) -> date | None:
    """A month and day said without a year is the next one to come."""
    if found is None or has_year or found >= today:
        return found
    return _safe(found.year + 1, found.month, found.day)


def resolve_date(phrase: str, now: datetime) -> date | None:
    """The day ``phrase`` names, said at ``now``; None for a vague phrase ("next month") or an impossible date."""
    text = " ".join(phrase.lower().split())
    text = re.sub(r"^(?:on|by|until|till|from|for)\s+|^(?:this|next|coming)\s+(?=(?:the\s+)?\d)", "", text)
    today = now.date()
    try:
        return _resolve(text, today)
    except (OverflowError, ValueError):
        return None


def _resolve(text: str, today: date) -> date | None:
    if "day after tomorrow" in text:
        return today + timedelta(days=2)
    if re.fullmatch(r"(?:on\s+|by\s+)?(?:today|tonight)", text):
        return today
    if re.fullmatch(rf"(?:on\s+|by\s+)?tomorrow{_PART}", text):
        return today + timedelta(days=1)
    if m := re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text):
        return _safe(int(m[1]), int(m[2]), int(m[3]))
    if m := re.fullmatch(rf"(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})(?:,?\s+(\d{{4}}))?", text):
        month = _month(m[2])
        year = int(m[3]) if m[3] else today.year
        return None if month is None else _ahead(_safe(year, month, int(m[1])), today, has_year=bool(m[3]))
    if m := re.fullmatch(rf"(?:on\s+|by\s+)?({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?", text):
        month = _month(m[1])
        year = int(m[3]) if m[3] else today.year
        return None if month is None else _ahead(_safe(year, month, int(m[2])), today, has_year=bool(m[3]))
    if m := re.fullmatch(rf"(?:(on|this|next|coming|by)\s+)?({_DAY}){_PART}", text):
        target = _DAYS.index(m[2])
        days = (target - today.weekday()) % 7
        if m[1] == "next" and days == 0:
            days = 7
        return today + timedelta(days=days or (7 if m[1] in (None, "on", "by", "coming") else 0))
    if m := re.fullmatch(rf"in\s+({_COUNT})\s+(day|week)s?", text):
        count = int(m[1]) if m[1].isdigit() else _NUMBERS.get(m[1], 0)
        return today + timedelta(days=count * (7 if m[2] == "week" else 1))
    return None
