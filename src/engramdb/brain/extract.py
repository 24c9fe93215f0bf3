"""Durable facts from what a person says: a deterministic extractor for explicit statements. Pure, no LLM.

``mem.add(messages)`` runs it over the user's turns. It finds what people state plainly about
themselves, each fact with a stable key, so a changed fact supersedes the old one through the
keyed-memory mechanism (``remember(..., key=...)``): "I moved to Berlin" replaces "I live in
Paris" because both are the key ``home``.

- preferences: "I prefer / always use / switched to X" (keyed by what X is, ``pref:editor``, when a
  word list knows it, else by X), "my favourite C is X" (``pref:C``), "I like / love / hate X"
  (``pref:X``: liking tea does not end liking coffee, but "I hate coffee now" ends liking it);
- the person: name, home ("I live in", "I moved to"), origin, employer ("I work at", "I joined",
  "I quit"), job ("I work as", "I'm a nurse"), age, birthday, family ("my wife Anna", "I have a
  daughter named Mia"), pets, diet, allergies and conditions;
- plans with a date ("I'm flying to Tokyo next Friday", "my dentist appointment moved to May 3"):
  the date phrase stays in the text and the day it names is worked out from when it was said;
- "remember that ...": the clause is read for the facts above, else kept as a note (no key).

It reads sentences that start with the person ("I ...", "my ..."), after fillers ("oh, actually,"),
and leaves out questions, conditions ("if I ...") and negations it cannot read as a change. What it
misses, the turns themselves still hold: every turn is stored as a conversation memory anyway.
Measured in ``bench/extraction.py`` on a labelled set (bench/RESULTS.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from engramdb.brain import _extract_words as words
from engramdb.brain._dates import DATE_PHRASE, resolve_date

__all__ = ["Fact", "FactKind", "extract_facts", "slug"]

FactKind = Literal["preference", "knowledge"]
#: Longest sentence read (characters): a fact is stated in a sentence, not in a pasted document.
MAX_SENTENCE: Final = 400
#: Characters of a message read (a longer one is a pasted document; its opening is read).
MAX_TEXT: Final = 20_000
#: Most facts one message yields (a pasted list of statements is not a conversation).
MAX_FACTS: Final = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """One durable fact found in a message."""

    #: Stable key (``home``, ``employer``, ``pref:editor``): a later fact with the same key supersedes this one.
    #: None for a note ("remember that ..." with nothing more specific in it).
    key: str | None
    #: The fact as a sentence about the person ("The user lives in Berlin.").
    content: str
    kind: FactKind
    #: What it is about: name, home, origin, employer, job, age, birthday, family, pet, diet, health,
    #: plan, preference, note.
    category: str
    #: The value the key holds now ("Berlin").
    value: str
    #: The day a plan is for (ISO date), when its date phrase names one.
    date: str | None = None


# -- text helpers ---------------------------------------------------------------------------------------------

_BLANKS: Final = re.compile(r"[^\S\n]+")
_NEWLINES: Final = re.compile(r"\s*\n\s*")
_SENTENCES: Final = re.compile(r"(?<=[.!?;])\s+|\n+|\s+-\s+")
_CLAUSES: Final = re.compile(
    r",?\s+(?:and|but|so|plus|also)\s+(?:now\s+|then\s+|also\s+|since\s+then\s+)?(?=(?:I|I'm|I've|I'll|my|My)\b)"
    r"|,\s+(?=(?:I|my|My)\b)"
)
_LEAD: Final = re.compile(
    r"^(?:(?:oh|ah|well|actually|btw|by the way|also|so|and|but|yeah|yep|yes|no|nope|hey|hi|hello|fyi|ok|okay|"
    r"just so you know|for the record|for context|anyway|anyways|now|honestly|personally|heads up|update|"
    r"quick update|good news|news|funny enough|as you know|i think|i guess|i believe|i'd say|you know what|"
    r"just fyi|small update|sadly|luckily|finally|guess what|note|context|these days|nowadays|lately|recently|"
    r"currently|right now|at the moment|since last \w+|as of \w+)\b[,!:.]?\s*)+",
    re.IGNORECASE,
)
#: A short label before a colon ("Big news: I moved ...", "Update: ...").
_LABEL: Final = re.compile(r"^(?:[A-Za-z]+\s+){0,2}[A-Za-z]+:\s+")
_NOT_A_STATEMENT: Final = re.compile(
    r"^(?:if|when|whenever|would|could|should|maybe|perhaps|what|how|why|where|who|which|do|does|did|can|"
    r"will|shall|is|are|am|suppose|imagine|assuming|unless|in case|let's say|i wonder|i don't know if|"
    r"i'm not sure|i am not sure|not sure)\b",
    re.IGNORECASE,
)
_STOP: Final = re.compile(
    r"\s+(?:because|since|as (?:a|an|my|the|well|of)|but|so (?:that|i|we)|which|where|who|while|though|"
    r"although|until|after|before|whenever|if|unless|and (?:i|my|we|it|that|then)|with (?:my|our|a|an|the)|"
    r"for (?:my|our|a|an|the past|the last|about|over|almost|nearly|\d)|near (?:my|our)|like (?:i|you)|"
    r"thanks|thank you|lol|haha|on (?:the )?weekends?|at weekends|in my (?:free|spare) time|"
    r"every (?:day|week|morning|evening|night|weekend))\b|[,;:()\"!?]|\s[-–—]\s|\.(?:\s|$)",
    re.IGNORECASE,
)
_TAIL: Final = re.compile(
    r"(?:\s+(?:" + "|".join(re.escape(t) for t in sorted(words.TIME_TAIL, key=len, reverse=True)) + r"))+\s*$",
    re.IGNORECASE,
)
_SLUG: Final = re.compile(r"[^a-z0-9+#]+")
_PRONOUN_START: Final = re.compile(
    r"^(?:it|that|this|them|those|these|you|him|her|when|how|what|to be|being|doing|the fact|your|its|"
    r"some of|all of|a bit|kind of|sort of|going|getting)\b",
    re.IGNORECASE,
)
_FIRST_PERSON: Final = re.compile(r"\b(?:my|mine|me|i|i'm|i've|myself)\b", re.IGNORECASE)


def slug(text: str, *, limit: int = 40) -> str:
    """``text`` as a key part: lower case, runs of other characters as one dash ("VS Code" -> "vs-code")."""
    return _SLUG.sub("-", text.lower()).strip("-")[:limit].strip("-")


def _clean(raw: str, *, max_words: int = 6, dates: bool = False) -> str | None:
    """The value in ``raw``: cut at the first clause break, time phrases trimmed off the end; None if empty,
    a filler ("it", "that"), or longer than ``max_words``. A date phrase ends the value unless ``dates``."""
    stop = _STOP.search(raw)
    text = raw[: stop.start()] if stop else raw
    when = None if dates else DATE_PHRASE.search(text)
    text = text[: when.start()] if when else text
    text = _TAIL.sub("", text.strip().rstrip(".!?")).strip()
    text = re.sub(r"^(?:with|to|the company)\s+(?=[A-Z])", "", text).strip()
    if not text or text.lower() in words.FILLER_OBJECTS or _PRONOUN_START.match(text):
        return None
    if len(text.split()) > max_words or not any(c.isalnum() for c in text):
        return None
    return text


def _people(subject: str) -> tuple[str, str]:
    """The subject and its possessive: ("The user", "The user's"), ("Caroline", "Caroline's")."""
    return subject, (subject + "'" if subject.endswith("s") else subject + "'s")


# -- the rules ------------------------------------------------------------------------------------------------
# Each rule is a pattern matched at the start of a clause and a builder of the fact (or None to pass).

Build = Callable[[re.Match[str], str, datetime], "Fact | list[Fact] | None"]
_I_AM = r"I(?:'m|\s+am)"
_I_HAVE = r"I(?:'ve|\s+have)?(?:\s+got)?"
_NAME = r"([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){0,2})"
_EVENTS = "|".join(re.escape(e) for e in sorted(words.EVENTS, key=len, reverse=True))
_EVENT = rf"(?:[\w'-]+\s+){{0,3}}?(?:{_EVENTS})\b"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _fact(
    key: str | None, content: str, *, category: str, value: str, kind: FactKind = "knowledge", day: str | None = None
) -> Fact:
    return Fact(key=key, content=content, kind=kind, category=category, value=value, date=day)


def _simple(key: str, category: str, template: str, *, max_words: int = 6, dates: bool = False) -> Build:
    """A rule whose first group is the value and whose content is ``template`` ({s}: subject, {p}: possessive)."""

    def build(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
        value = _clean(m.group(m.lastindex or 1), max_words=max_words, dates=dates)
        if value is None:
            return None
        s, p = _people(subject)
        return _fact(key, template.format(s=s, p=p, v=value), category=category, value=value)

    return build


def _name(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    value = m.group(1).strip()
    if value.lower() in {"not", "a", "an", "the", "just", "sure", "fine", "good", "here", "back", "sorry"}:
        return None
    _, p = _people(subject)
    return _fact("name", f"{p} name is {value}.", category="name", value=value)


def _home(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    if DATE_PHRASE.search(m.string[m.end() :]) and re.search(r"moving|going to move|will move", m.group(0), re.I):
        return None  # a move still to come is a plan
    value = _clean(m.group(1))
    if value is None:
        return None
    s, _ = _people(subject)
    return _fact("home", f"{s} lives in {value}.", category="home", value=value)


def _left_home(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    value = _clean(m.group(1))
    if value is None:
        return None
    s, _ = _people(subject)
    return _fact("home", f"{s} no longer lives in {value}.", category="home", value=f"not {value}")


def _employer(m: re.Match[str], subject: str, now: datetime) -> list[Fact] | None:
    value = _clean(m.group(1), max_words=5)
    if value is None or not (value[0].isupper() or re.match(r"(?:a|an|the)\s", value, re.IGNORECASE)):
        return None  # "I work at night", "I work for fun": an employer is a name, or "a bakery"
    s, _ = _people(subject)
    found = [_fact("employer", f"{s} works at {value}.", category="employer", value=value)]
    role = re.match(r"\s*(?:as|,)\s+(?:an?\s+)?([\w\s-]+)", m.string[m.start(1) + len(value) :], re.IGNORECASE)
    job = _clean(role.group(1), max_words=4) if role else None
    if job is not None and job.lower().split()[-1] in words.JOBS:
        article = "an" if job[0].lower() in "aeiou" else "a"
        found.append(_fact("job", f"{s} works as {article} {job}.", category="job", value=job))
    return found


def _left_job(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    where = _clean(m.group(1) or "", max_words=5) if m.lastindex else None
    s, _ = _people(subject)
    text = f"{s} no longer works at {where}." if where else f"{s} left their job."
    return _fact("employer", text, category="employer", value="none")


def _job(m: re.Match[str], subject: str, now: datetime) -> list[Fact] | None:
    value = _clean(m.group(1), max_words=5)
    if value is None:
        return None
    last = value.lower().split()
    if not (last[-1] in words.JOBS or " ".join(last[-2:]) in words.JOBS):
        return None
    s, _ = _people(subject)
    article = "an" if value[0].lower() in "aeiou" else "a"
    found = [_fact("job", f"{s} works as {article} {value}.", category="job", value=value)]
    rest = m.string[m.end() :]
    at = re.match(r"\s+(?:at|for)\s+(.+)", rest)
    employer = _clean(at.group(1), max_words=5) if at else None
    if employer and employer[0].isupper():
        found.append(_fact("employer", f"{s} works at {employer}.", category="employer", value=employer))
    place = re.match(r"\s+(?:based\s+)?in\s+([A-Z].*)", rest)
    home = _clean(place.group(1), max_words=3) if place else None
    if home is not None:  # "I'm a teacher in Leeds"
        found.append(_fact("home", f"{s} lives in {home}.", category="home", value=home))
    return found


def _family(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    relation, name = m.group(1).lower(), m.group(2)
    if name.lower() in {"is", "and", "was", "has", "just", "who", "the"}:
        return None
    _, p = _people(subject)
    key = f"family:{relation}" if relation in words.FAMILY_ONE else f"family:{relation}:{slug(name)}"
    return _fact(key, f"{p} {relation} is named {name}.", category="family", value=name)


def _has_relative(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    relation, name = m.group(2).lower(), m.group(3)
    s, _ = _people(subject)
    count = m.group(1).lower()
    if name:
        key = f"family:{relation}" if relation in words.FAMILY_ONE else f"family:{relation}:{slug(name)}"
        return _fact(key, f"{s} has {count} {relation} named {name}.", category="family", value=name)
    if count in {"a", "an", "one"}:
        return _fact(f"family:{relation}", f"{s} has {count} {relation}.", category="family", value=relation)
    return _fact(f"family:{relation}", f"{s} has {count} {relation}.", category="family", value=count)


def _pet(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    species, name = m.group("species").lower(), m.group("name")
    if name and name.lower() in {"is", "and", "was", "has", "just", "who", "the"}:
        name = None
    s, p = _people(subject)
    if name:
        return _fact(f"pet:{slug(species)}:{slug(name)}", f"{p} {species} is named {name}.", category="pet", value=name)
    count = (m.groupdict().get("count") or "a").lower()
    if count not in {"a", "an", "one", "1"}:
        return _fact(f"pet:{slug(species)}", f"{s} has {count} {species}s.", category="pet", value=species)
    article = "an" if species[0] in "aeiou" else "a"
    return _fact(f"pet:{slug(species)}", f"{s} has {article} {species}.", category="pet", value=species)


def _allergy(m: re.Match[str], subject: str, now: datetime) -> list[Fact]:
    value = _clean(m.group(m.lastindex or 1), max_words=8)
    s, _ = _people(subject)
    # "penicillin and latex", "nuts, eggs and soy": one fact each, so each can change on its own.
    parts = [_clean(part, max_words=4) for part in re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", value or "")]
    return [
        _fact(f"allergy:{slug(part)}", f"{s} is allergic to {part}.", category="health", value=part)
        for part in parts
        if part is not None
    ]


def _diet(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    value = m.group(1).lower()
    s, _ = _people(subject)
    if value in {"diabetic", "pregnant"}:
        return _fact(f"health:{value}", f"{s} is {value}.", category="health", value=value)
    return _fact("diet", f"{s} is {value}.", category="diet", value=value)


def _condition(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    value = _clean(m.group(1), max_words=4)
    if value is None:
        return None
    s, _ = _people(subject)
    bare = re.sub(r"^(?:a|an)\s+", "", value.lower())
    return _fact(f"health:{slug(bare)}", f"{s} has {value}.", category="health", value=value)


def _age(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    age = int(m.group(1))
    if not 1 <= age <= 120:
        return None
    s, _ = _people(subject)
    return _fact("age", f"{s} is {age} years old (as of {now.date().isoformat()}).", category="age", value=str(age))


def _pref(verb: str, *, exclusive: bool) -> Build:
    """A preference rule: ``verb`` is the content's verb; ``exclusive`` ones key by category when known."""

    def build(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
        value = _clean(m.group(1), max_words=6)
        if value is None:
            return None
        lower = value.lower()
        if lower.startswith(("to ", "not ")) and len(lower.split()) == 1:
            return None
        over = re.match(r"\s+(?:over|to|rather than|instead of)\s+(.+)", m.string[m.end(1) :], re.IGNORECASE)
        if over is not None and exclusive and " over " not in value and " to " not in value:
            other = _clean(over.group(1), max_words=4)
        else:
            other = None
        category = words.category_of(value) if exclusive else None
        key = f"pref:{category}" if category else f"pref:{slug(value)}"
        if not exclusive and words.category_of(value) is None and not slug(value):
            return None
        s, _ = _people(subject)
        text = f"{s} {verb} {value}" + (f" over {other}" if other else "") + "."
        return _fact(key, text, category="preference", value=value, kind="preference")

    return build


def _favourite(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    what = _clean(m.group(1), max_words=3)
    value = _clean(m.group(2), max_words=6)
    if what is None or value is None:
        return None
    _, p = _people(subject)
    return _fact(
        f"pref:{slug(what)}", f"{p} favorite {what} is {value}.", category="preference", value=value, kind="preference"
    )


def _plan(m: re.Match[str], subject: str, now: datetime) -> Fact | None:
    """A dated plan: the clause holds a date phrase; key from the destination or the event."""
    clause = m.string
    when = DATE_PHRASE.search(clause, m.start())
    if when is None:
        return None
    groups = m.groupdict()
    if groups.get("place"):
        place = _clean(groups["place"], max_words=4)
        if place is None:
            return None
        key = "plan:move" if re.search(r"\bmov", m.group(0), re.I) else f"plan:trip:{slug(place)}"
        what = ("moving to " if key == "plan:move" else "going to ") + place
    elif groups.get("event"):
        event = re.sub(r"^(?:a|an|my|the|our)\s+", "", groups["event"].strip(), flags=re.I)
        key, what = f"plan:{slug(event)}", event
    else:
        doing = _clean(groups.get("doing") or "", max_words=6)
        if doing is None:
            return None
        named = re.search(rf"\b(?:the|a|an|my|our)\s+({_EVENT})", doing, re.IGNORECASE) or re.search(
            rf"((?:[\w'-]+\s+)?(?:{_EVENTS}))\b", doing, re.IGNORECASE
        )
        # "running the Berlin marathon in May" and "the Berlin marathon got moved" are one plan
        key = f"plan:{slug(named.group(1))}" if named else f"plan:{slug(' '.join(doing.split()[:3]))}"
        what = doing
    day = resolve_date(when.group(0), now)
    s, p = _people(subject)
    said = when.group(0).strip()
    on = f" ({day.isoformat()})" if day is not None else ""
    text = f"{s} plans: {what}, {said}{on}." if not groups.get("event") else f"{p} {what} is {said}{on}."
    return _fact(key, text, category="plan", value=what, day=None if day is None else day.isoformat())


_RULES: Final[tuple[tuple[re.Pattern[str], Build], ...]] = (
    (_rx(rf"^(?:my\s+name\s+is|my\s+name's|(?:you\s+can\s+|please\s+)?call\s+me|I\s+go\s+by|{_I_AM}\s+called)\s+"
         rf"(?-i:{_NAME})"), _name),
    # dated plans come before home and employer: "I'm moving to Berlin next month" is not yet a home
    (_rx(rf"^(?:{_I_AM}|we(?:'re|\s+are))\s+(?:going|flying|travell?ing|driving|heading|off|moving|relocating|"
         rf"taking\s+a\s+trip)\s+(?:back\s+|over\s+|out\s+)?to\s+(?P<place>[^,.;!?]+)"), _plan),
    (_rx(r"^(?:I(?:'ll|\s+will)\s+be|I(?:'m|\s+am)\s+(?:visiting|going\s+to\s+visit|going\s+to\s+be\s+in))\s+"
         r"(?:in\s+)?(?P<place>[A-Z][^,.;!?]+)"), _plan),
    (_rx(rf"^(?:{_I_HAVE}|{_I_AM}\s+having)\s+(?P<event>(?:a|an|my|the|our)\s+{_EVENT})"), _plan),
    (_rx(rf"^(?:my|our)\s+(?P<event>{_EVENT})\s+(?:is|was|got|has\s+been|'s)\s+"
         r"(?:now\s+|been\s+)?(?:on|at|in|next|this|tomorrow|today|moved|rescheduled|postponed|pushed|changed|"
         r"set|scheduled|planned|booked|coming)"), _plan),
    (_rx(rf"^(?:I(?:'m|\s+am)\s+(?:planning|hoping|going|about)\s+to|I\s+plan\s+to|I(?:'ll|\s+will)|"
         rf"{_I_AM}(?=\s+(?:getting\s+married|starting|running|taking|attending|graduating|retiring)))\s+"
         r"(?P<doing>[^,.;!?]+)"), _plan),
    (_rx(r"^(?:(?:I|we)(?:\s+(?:now\s+|still\s+|currently\s+)?live|(?:'ve|\s+have)\s+(?:just\s+|recently\s+)?"
         r"(?:moved|relocated|lived)|\s+moved|\s+relocated|\s+just\s+moved|\s+recently\s+moved|"
         r"(?:'m|\s+am|'re|\s+are)\s+(?:now\s+)?(?:living|based|settled))|(?:just|recently)\s+(?:moved|relocated))"
         r"\s+(?:back\s+)?(?:with\s+(?:my|our)\s+[\w\s'-]{1,30}?\s+)?(?:in|to|at|out\s+to)\s+(.+)"), _home),
    # Not "I left X": a town, a job or a party, it does not say which.
    (_rx(r"^(?:I\s+(?:no\s+longer|don't|do\s+not)\s+live\s+in|I\s+moved\s+(?:out\s+of|away\s+from))"
         r"\s+(.+?)(?:\s+(?:anymore|any\s+more))?$"), _left_home),
    (_rx(rf"^(?:{_I_AM}|I\s+was)\s+(?:originally\s+)?from\s+(.+)|^I\s+grew\s+up\s+in\s+(.+)"),
     _simple("origin", "origin", "{s} is originally from {v}.")),
    (_rx(r"^I\s+(?:no\s+longer\s+work|don't\s+work|do\s+not\s+work)\s+(?:at|for)\s+(.+?)(?:\s+(?:anymore|any\s+more))?$"),
     _left_job),
    (_rx(r"^I\s+(?:just\s+)?(?:quit|left)\s+(?:my\s+job\s+at\s+|my\s+job\s+with\s+|my\s+job\b)(.*)"), _left_job),
    (_rx(rf"^(?:I\s+(?:now\s+|still\s+|currently\s+)?work|{_I_AM}\s+(?:now\s+|currently\s+)?(?:working|employed)|"
         r"I\s+(?:just\s+)?(?:got|landed|accepted)\s+(?:a|an)\s+(?:new\s+)?(?:job|position|role|offer)|"
         r"I(?:'ve|\s+have)?\s+(?:just\s+)?started\s+(?:a\s+new\s+job\s+|working\s+)?|I\s+(?:just\s+)?joined|"
         r"I(?:'ll|\s+will)?\s+start(?:\s+a\s+new\s+job|\s+working)?|I(?:'m|\s+am)\s+starting(?:\s+a\s+new\s+job)?|"
         r"I(?:'ve|\s+have)\s+(?:just\s+)?joined)\s+(?:at|for|by|with)?\s*(.+)"), _employer),
    (_rx(r"^(?:I\s+work\s+as|my\s+job\s+is|my\s+(?:job|role|position)\s+title\s+is|I\s+became|"
         rf"{_I_AM}(?:\s+now|\s+currently)?(?:\s+working\s+as)?)\s+(?:an?\s+)?([\w\s-]+?)"
         r"(?=\s+at\s|\s+for\s|\s+(?:based\s+)?in\s|[,.;!?]|$)"),
     _job),
    (_rx(r"^(?:my|our)\s+(" + "|".join(sorted(words.FAMILY_ONE | words.FAMILY_MANY, key=len, reverse=True))
         + r")(?:'s\s+name\s+is|\s+is\s+(?:named|called)|,)?\s+" + r"(?-i:([A-Z][a-z]+))"), _family),
    (_rx(r"^I\s+have\s+(a|an|one|two|three|four|five|\d)\s+(?:\w+\s+)?(" + "|".join(
         sorted({*words.FAMILY_MANY, *(f"{w}s" for w in words.FAMILY_MANY), "kids", "children"}, key=len,
                reverse=True)) + r")\b(?:\s+(?:named|called)\s+(?-i:([A-Z][a-z]+)))?"), _has_relative),
    (_rx(r"^(?:my|our)\s+(?:\w+\s+)?(?P<species>" + "|".join(sorted(words.PETS, key=len, reverse=True))
         + r")(?:'s\s+name\s+is|\s+is\s+(?:named|called)|,)?\s+(?-i:(?P<name>[A-Z][a-z]+))"), _pet),
    (_rx(r"^(?:I(?:'ve|\s+have)?\s+(?:have|got|adopted|own)|we(?:'ve|\s+have)?\s+(?:have|got|adopted))\s+"
         r"(?P<count>a|an|one|two|three|four|\d)\s+(?:new\s+|\w+\s+)?(?P<species>"
         + "|".join(sorted(words.PETS, key=len, reverse=True)) + r")(?:e?s)?\b(?:\s+(?:named|called)\s+"
         r"(?-i:(?P<name>[A-Z][a-z]+)))?"), _pet),
    (_rx(rf"^{_I_AM}\s+(?:severely\s+|very\s+|deathly\s+|mildly\s+|a\s+bit\s+)?allergic\s+to\s+(.+)|"
         r"^I\s+have\s+(?:an?\s+|a\s+severe\s+)?(.+?)\s+allergy"), _allergy),
    (_rx(rf"^(?:{_I_AM}|I\s+(?:went|became|turned)|I(?:'ve|\s+have)\s+(?:gone|been|become))\s+(?:now\s+|strictly\s+|mostly\s+|fully\s+)?(?:a\s+)?("
         + "|".join(sorted(words.DIETS | {"diabetic", "pregnant"}, key=len, reverse=True)) + r")\b"), _diet),
    (_rx(r"^I\s+(?:have|suffer\s+from|live\s+with|struggle\s+with|deal\s+with)\s+("
         + "|".join(re.escape(c) for c in sorted(words.CONDITIONS, key=len, reverse=True)) + r")\b"), _condition),
    (_rx(r"^I\s+(?:was\s+(?:just\s+|recently\s+)?|got\s+|have\s+been\s+|'ve\s+been\s+)diagnosed\s+with\s+(.+)"),
     _condition),
    (_rx(rf"^(?:{_I_AM}|I\s+just\s+turned|I\s+turned)\s+(\d{{1,3}})"
         r"(?:\s+(?:years?\s+old|yo|this\s+year))?(?=\s*(?:[,.!;]|and\b|$))"), _age),
    (_rx(r"^my\s+birthday\s+is\s+(?:on\s+)?(.+)"), _simple("birthday", "birthday", "{p} birthday is {v}.", dates=True)),
    (_rx(r"^my\s+(?:all[-\s]time\s+|absolute\s+)?favou?rite\s+([\w\s-]+?)\s+(?:is|are)\s+(.+)"), _favourite),
    (_rx(r"^I\s+(?:much\s+|really\s+|strongly\s+|definitely\s+|generally\s+|usually\s+|always\s+)?"
         r"(?:prefer|would\s+rather\s+(?:use|have))\s+(.+?)(?=\s+(?:over|to|rather\s+than|instead\s+of)\s|$|[,.;!?])"),
     _pref("prefers", exclusive=True)),
    (_rx(r"^I(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:switched|moved|changed|migrated)\s+"
         r"(?:over\s+)?(?:from\s+[\w\s.+#-]+?\s+)?to\s+(.+)"), _pref("now uses", exclusive=True)),
    (_rx(r"^I\s+(?:always|usually|mostly|only|exclusively|now|still|mainly|primarily)\s+use\s+(.+)"),
     _pref("uses", exclusive=True)),
    (_rx(r"^I\s+(?:really\s+|absolutely\s+|genuinely\s+|truly\s+)?(?:love|like|enjoy|adore)\s+(?!to\s+think)(.+)"),
     _pref("likes", exclusive=False)),
    (_rx(r"^(?:I\s+(?:really\s+|absolutely\s+|truly\s+)?(?:hate|dislike|detest|loathe|can't\s+stand|cannot\s+stand)|"
         r"I\s+(?:really\s+)?(?:don't|do\s+not)\s+(?:like|enjoy|eat|drink|want))\s+(.+)"),
     _pref("dislikes", exclusive=False)),
)  # fmt: skip

_HAVE: Final = re.compile(r"^(?:I|we)(?:'ve|\s+have)?(?:\s+got)?\s+(?:have|got|adopted|own)?", re.IGNORECASE)
_HAVE_MORE: Final = re.compile(
    r"^\s*,?\s*(?:and|plus|as\s+well\s+as)\s+(?:also\s+)?(?=(?:an?|one|two|three|four|five|\d+)\s)"
)
_ASK: Final = re.compile(
    r",\s+(?:so\s+|and\s+|but\s+)?(?:can|could|would|will|do|does|did|what|how|any|should|is|are|where|when|which|"
    r"who|got|have\s+you|ideas|thoughts|suggestions)\b",
    re.IGNORECASE,
)
_GREETING: Final = re.compile(
    r"^(?:(?i:hi|hello|hey|greetings)(?:\s+there)?[,!.]?\s+)(?i:I'm|I\s+am|this\s+is|it's)\s+([A-Z][a-z]+)(?=[\s,.!]|$)"
)
_REMEMBER: Final = _rx(
    r"^(?:please\s+|pls\s+|can\s+you\s+|could\s+you\s+)?(?:remember|note|keep\s+in\s+mind|don't\s+forget|"
    r"make\s+a\s+note)\s*(?:that\s+|:\s*)?(.+)"
)


def _statement(clause: str) -> str:
    """``clause`` without its fillers ("Oh, actually, I ..." -> "I ...")."""
    return _LEAD.sub("", _LABEL.sub("", clause.strip())).strip()


def _facts_of(clause: str, subject: str, now: datetime, *, depth: int = 0) -> list[Fact]:
    for pattern, build in _RULES:
        m = pattern.match(clause)
        if m is None:
            continue
        found = build(m, subject, now)
        out = found if isinstance(found, list) else [found] if isinstance(found, Fact) else []
        if not out:
            continue  # e.g. a travel or event phrase without a date may still be a home or an employer
        more = _HAVE_MORE.match(clause[m.end() :]) if _HAVE.match(clause) and depth < 3 else None
        if more is not None:  # "I have a daughter named Mia and a dog called Rex": the dog too
            out += _facts_of("I have " + clause[m.end() + more.end() :], subject, now, depth=depth + 1)
        return out
    return []


def extract_facts(text: str, *, now: datetime, subject: str = "The user") -> list[Fact]:
    """The durable facts ``text`` states about its speaker, in order, one per key (the last wins).

    ``now`` is when it was said (dated plans are resolved from it); ``subject`` names the speaker in
    the facts' text. Never raises on any string.
    """
    if not isinstance(text, str) or not text.strip():
        return []
    # Whitespace runs collapsed first: every pattern then sees single spaces (no run to backtrack over).
    text = _NEWLINES.sub("\n", _BLANKS.sub(" ", text[:MAX_TEXT])).replace("\u2019", "'").replace("\u2018", "'")
    out: dict[str | None, Fact] = {}
    notes: list[Fact] = []
    greeting = _GREETING.match(text.strip())
    named = _name(greeting, subject, now) if greeting is not None else None
    if named is not None:
        out["name"] = named
    for raw_sentence in _SENTENCES.split(text):
        sentence = raw_sentence.strip()
        if sentence.endswith("?"):
            # "I'm moving to Lisbon next month, can you help me find a flat?": the statement before the ask
            asks = list(_ASK.finditer(sentence))
            sentence = sentence[: asks[-1].start()] if asks else ""
        if not sentence or len(sentence) > MAX_SENTENCE:
            continue
        for raw_clause in _CLAUSES.split(sentence):
            clause = _statement(raw_clause)
            remember = _REMEMBER.match(clause)
            if remember is not None:
                inner = _statement(remember.group(1))
                found = _facts_of(inner, subject, now)
                if not found and _FIRST_PERSON.search(inner):
                    note = inner.rstrip(".!").strip()
                    found = [_fact(None, f"{subject} asked to remember: {note}.", category="note", value=note)]
                elif not found and inner:
                    note = inner.rstrip(".!").strip()
                    found = [_fact(None, f"Remember: {note}.", category="note", value=note)]
            elif _NOT_A_STATEMENT.match(clause):
                continue
            else:
                found = _facts_of(clause, subject, now)
            for fact in found:
                if fact.key is None:
                    notes.append(fact)
                else:
                    out.pop(fact.key, None)
                    out[fact.key] = fact
    return [*out.values(), *notes][:MAX_FACTS]
