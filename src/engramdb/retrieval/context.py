"""Conversational context in retrieval: a turn is scored with its neighbours. Pure functions.

In a conversation the words that identify a fact are often split across turns: "What did
you adopt?" / "A greyhound, last May." A query about the adoption matches the question
turn, while the answer turn holds the fact. The remedy, chosen on the LoCoMo and LongMemEval
dev sets (``bench/retrieval.py``, "context study"), is **neighbour spreading** at query time:
a short candidate's relevance also counts, at weight :data:`NEIGHBOUR_WEIGHT`, the best
relevance of the turns right before and after it. It needs only the link from each
conversation memory to the one it follows, kept in ``metadata[FOLLOWS_KEY]``. (Indexing a
turn together with the turn it follows, "contextual keys", was measured there and rejected:
it costs 7 points of LongMemEval recall.)

Second, **who said it**. In a conversation between a user and an assistant, the facts to remember
are the user's (what they did, own, prefer); an assistant's reply restates the question and adds
general knowledge, and being long it matches many queries a little. So a turn whose
``metadata[ROLE_KEY]`` is ``"assistant"`` counts at :data:`ASSISTANT_WEIGHT` of its relevance,
unless the query asks what the assistant said ("you told me...", "remind me...", "in our previous
chat"): :func:`weigh_speakers`. Turns without a role (LoCoMo's two people, notes, facts) are untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from engramdb.models import Memory
from engramdb.retrieval.ranking import Fused

__all__ = [
    "ASSISTANT_WEIGHT",
    "FOLLOWS_KEY",
    "NEIGHBOUR_WEIGHT",
    "ROLE_KEY",
    "SHORT_TURN_CHARS",
    "asks_about_assistant",
    "follows_links",
    "link_turns",
    "named_speaker",
    "spread_to_neighbours",
    "weigh_named_speakers",
    "weigh_speakers",
]

#: Metadata key holding the id of the memory this one follows in a conversation.
FOLLOWS_KEY: Final = "follows"
#: How much a neighbour's relevance counts towards a short turn's own. Half: a turn's own match
#: stays the stronger evidence, so an isolated strong match still beats a weak pair of neighbours.
NEIGHBOUR_WEIGHT: Final = 0.5
#: A turn this long (characters; about two sentences) or shorter gets the full neighbour weight, a
#: longer one proportionally less: a long turn carries its own context (a long assistant reply
#: needs no help from the question before it), a short reply ("Yes, last May!") does.
SHORT_TURN_CHARS: Final = 200
#: Metadata key naming who said a conversation turn ("user", "assistant", a speaker's name), as
#: :meth:`engramdb.shortterm.ShortTermMemory.promote` writes it.
ROLE_KEY: Final = "role"
#: How much an assistant turn's relevance counts when the query is not about what the assistant said.
#: Half, as for neighbours: an assistant reply that is the only strong match still comes first, but it
#: no longer ties with the user's own words.
ASSISTANT_WEIGHT: Final = 0.5
_ASSISTANT_ROLES: Final = frozenset({"assistant"})
# A question about the assistant's own words: a past-tense "you <verb of saying>", "remind me", or
# a reference to an earlier conversation with it.
_ASKS_ASSISTANT: Final = re.compile(
    r"\byou (?:told|said|wrote|made|provided|gave|mentioned|suggested|recommended|listed|shared|explained"
    r"|described|showed|answered)\b|\bremind me\b|\bour (?:previous|last|earlier|past) (?:chat|conversation"
    r"|discussion|exchange|session)",
    re.IGNORECASE,
)


def follows_links(metadata: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, str]:
    """``{id: id of the memory it follows}`` from ``(id, metadata)`` pairs; other values are ignored."""
    links: dict[str, str] = {}
    for memory_id, meta in metadata:
        prev = meta.get(FOLLOWS_KEY)
        if isinstance(prev, str) and prev and prev != memory_id:
            links[memory_id] = prev
    return links


def spread_to_neighbours(
    fused: Sequence[Fused],
    follows: Mapping[str, str],
    lengths: Mapping[str, int],
    *,
    weight: float = NEIGHBOUR_WEIGHT,
    short: int = SHORT_TURN_CHARS,
) -> list[Fused]:
    """Re-score candidates by their neighbours, best first (ties by id).

    ``relevance' = (relevance + w_i * best neighbour relevance) / (1 + weight)`` with
    ``w_i = weight * min(1, short / length_i)`` (``lengths``: characters of each candidate's
    content; a candidate without one counts as short). Neighbours are the memory a candidate
    follows and those that follow it, among the candidates: a neighbour that no channel found
    adds nothing. Relevance stays within [0, 1]; with no links, or ``weight`` 0, the order is
    unchanged.
    """
    if weight < 0.0:
        raise ValueError("weight must be >= 0")
    if short <= 0:
        raise ValueError("short must be > 0")
    if weight == 0.0 or not follows:
        return list(fused)
    relevance = {f.id: f.relevance for f in fused}
    best: dict[str, float] = {}
    for later, earlier in follows.items():
        if later in relevance and earlier in relevance:
            # The link runs both ways: a question turn is helped by its answer and vice versa.
            best[later] = max(best.get(later, 0.0), relevance[earlier])
            best[earlier] = max(best.get(earlier, 0.0), relevance[later])
    out = []
    for f in fused:
        own = weight * min(1.0, short / max(lengths.get(f.id, 1), 1))
        out.append(replace(f, relevance=(f.relevance + own * best.get(f.id, 0.0)) / (1.0 + weight)))
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out


def link_turns(memories: list[Memory]) -> list[Memory]:
    """Link each conversation turn of a batch to the turn before it (same agent, user and session: the
    memory's ``session``, else ``metadata["session"]``).

    Search scores a short turn with its neighbours (:func:`spread_to_neighbours`): the
    answer "A greyhound!" is found through the question before it. A link the caller set is kept.
    """
    last: dict[tuple[str, str | None, Any], str] = {}
    out = []
    for m in memories:
        if m.kind != "conversation":
            out.append(m)
            continue
        session = m.session if m.session is not None else m.metadata.get("session")
        where = (m.agent, m.user, session if isinstance(session, str | int) else None)
        previous = last.get(where)
        last[where] = m.id
        linked = previous is not None and FOLLOWS_KEY not in m.metadata
        out.append(replace(m, metadata={**m.metadata, FOLLOWS_KEY: previous}) if linked else m)
    return out


def asks_about_assistant(query: str) -> bool:
    """Whether ``query`` asks what the assistant said ("Can you remind me what you told me about X?")."""
    return _ASKS_ASSISTANT.search(query) is not None


def weigh_speakers(
    fused: Sequence[Fused],
    roles: Mapping[str, object],
    *,
    query: str,
    weight: float = ASSISTANT_WEIGHT,
) -> list[Fused]:
    """Assistant turns at ``weight`` x their relevance unless the query asks about the assistant; best first.

    ``roles``: each candidate's ``metadata[ROLE_KEY]`` (missing: not an assistant turn). With ``weight``
    1, no assistant turn among the candidates, or a query about the assistant, the order is unchanged.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError("weight must be within [0, 1]")
    if weight == 1.0 or asks_about_assistant(query):
        return list(fused)
    if not any(roles.get(f.id) in _ASSISTANT_ROLES for f in fused):
        return list(fused)
    out = [replace(f, relevance=f.relevance * weight) if roles.get(f.id) in _ASSISTANT_ROLES else f for f in fused]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out


#: How much a turn counts when the query names one of the conversation's speakers and someone else said it.
#: (1: named speakers change nothing; bench/RESULTS.md measures the alternatives.)
OTHER_SPEAKER_WEIGHT: Final = 1.0

#: Roles that are not a person's name: a query saying "the user" names no speaker.
_GENERIC_ROLES: Final = frozenset({"user", "assistant", "system", "tool"})


def named_speaker(query: str, roles: Iterable[object]) -> str | None:
    """The one speaker among ``roles`` (the candidates' ``metadata[ROLE_KEY]``) that ``query`` names as a word,
    case-insensitively; None when it names none or several ("user" and "assistant" are not names)."""
    words = {w.lower() for w in re.findall(r"\w+", query)}
    named = {r for r in roles if isinstance(r, str) and r.lower() in words and r.lower() not in _GENERIC_ROLES}
    return next(iter(named)) if len(named) == 1 else None


def weigh_named_speakers(
    fused: Sequence[Fused], roles: Mapping[str, object], *, query: str, weight: float = OTHER_SPEAKER_WEIGHT
) -> list[Fused]:
    """When ``query`` names one speaker ("What did Caroline research?"), turns another speaker said count at
    ``weight`` x their relevance; best first. In LoCoMo four in five evidence turns of such a question are the
    named person's own words. Turns without a role, and queries naming no one or several, are unchanged."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError("weight must be within [0, 1]")
    if weight == 1.0:
        return list(fused)
    name = named_speaker(query, {roles.get(f.id) for f in fused})
    if name is None:
        return list(fused)
    others = {f.id for f in fused if isinstance(roles.get(f.id), str) and roles.get(f.id) != name}
    out = [replace(f, relevance=f.relevance * weight) if f.id in others else f for f in fused]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out
