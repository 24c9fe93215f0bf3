"""Hybrid search: keyword and vector candidates from ``store.search``, fused and ranked once here."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

from engramdb.embeddings.base import Embedder
from engramdb.embeddings.profile import profile_of
from engramdb.embeddings.query import QueryCache
from engramdb.models import Hit, Memory
from engramdb.retrieval.amounts import AMOUNT_WEIGHT, asked_amount, weigh_amounts
from engramdb.retrieval.collapse import collapse
from engramdb.retrieval.context import (
    ASSISTANT_WEIGHT,
    FOLLOWS_KEY,
    NEIGHBOUR_WEIGHT,
    OTHER_SPEAKER_WEIGHT,
    ROLE_KEY,
    follows_links,
    spread_to_neighbours,
    weigh_named_speakers,
    weigh_speakers,
)
from engramdb.retrieval.diversity import SESSION_FREE, SESSION_REPEAT, diversify_sessions
from engramdb.retrieval.evidence import coverage, relevance, term_weight
from engramdb.retrieval.learned import LEARNED, fuse_learned
from engramdb.retrieval.ranking import Fused, RankingWeights, fuse, fuse_by, rank, weights_for
from engramdb.retrieval.related import RELATED_CREDIT, RELATED_GATED, RELATED_MOST, flat, related_terms
from engramdb.retrieval.sessions import (
    SESSION_BEST_ONLY,
    SESSION_GATED,
    SESSION_SHARE,
    SESSION_WEIGHT,
    asks_across_sessions,
    gathering_words,
    session_key,
    weigh_by_session,
)
from engramdb.retrieval.text import FORM_WEIGHT, form_words, query_terms
from engramdb.retrieval.timeref import (
    EVENT_WEIGHT,
    RELATIVE_WEIGHT,
    TIME_ONLY_WEIGHT,
    TIME_WEIGHT,
    counted_back,
    event_time_of,
    find_time,
    relative_words,
    weigh_by_time,
    weigh_reported_events,
)
from engramdb.storage.base import Candidate, Filter, Store

__all__ = ["HybridSearcher"]

#: Candidates fetched per channel. Independent of ``limit`` (unless it is larger), so the top
#: results of a search do not depend on how many were asked for.
_DEPTH = 50
#: Fused candidates that get boosted and ranked: boosts are gentle, so only the head can reach the top.
_HEAD = 30
#: Fused candidates whose conversation neighbours are looked at: the head's memories are read anyway,
#: the next ones let a turn just below the head rise with its neighbour. Twice the head: reading all
#: ~100 fused candidates found +0.3 recall@10 on LoCoMo dev for ~2x the memory reads.
_SPREAD = 2 * _HEAD
#: Candidates the related words' keyword query adds (:mod:`engramdb.retrieval.related`; 20 measured alike on
#: LongMemEval and the recall set, 0.1-0.3 lower on LoCoMo, and dearer).
_RELATED_DEPTH = 10
#: The longest :meth:`HybridSearcher.start_workers`'s two tasks wait for each other: a guard only, as both
#: meet as soon as the pool has started both threads.
_WORKER_START_GUARD_SECONDS = 5.0


class HybridSearcher:
    """Runs one search: candidates from both channels, fusion, boosts, access bookkeeping."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        weights: RankingWeights | None = None,
        neighbour_weight: float = NEIGHBOUR_WEIGHT,
        assistant_weight: float = ASSISTANT_WEIGHT,
        time_weight: float = TIME_WEIGHT,
    ) -> None:
        self._store = store
        self._model_id = embedder.model_id
        # Agents ask the same question again and again (a planning loop, a retry): skip the model then.
        self._queries = QueryCache(embedder)
        #: The embedder's fusion constants and relevance calibration (:mod:`engramdb.embeddings.profile`); given
        #: ``weights`` are used as they are.
        self.profile = profile_of(embedder)
        self.weights = weights if weights is not None else weights_for(self.profile)
        #: See :func:`engramdb.retrieval.context.spread_to_neighbours`; 0 turns spreading off.
        self.neighbour_weight = neighbour_weight
        #: See :func:`engramdb.retrieval.context.weigh_speakers`; 1 turns speaker weighting off.
        self.assistant_weight = assistant_weight
        #: See :func:`engramdb.retrieval.context.weigh_named_speakers`; 1 turns it off.
        self.other_speaker_weight = OTHER_SPEAKER_WEIGHT
        #: See :func:`engramdb.retrieval.timeref.weigh_by_time`; 0 ignores time named in a question.
        self.time_weight = time_weight
        #: See :func:`engramdb.retrieval.sessions.weigh_by_session`; 0 turns session evidence off.
        self.session_weight = SESSION_WEIGHT
        self.session_share = SESSION_SHARE
        self.session_best_only = SESSION_BEST_ONLY
        #: See :func:`engramdb.retrieval.diversity.diversify_sessions`; 1 turns session diversity off.
        self.session_repeat = SESSION_REPEAT
        self.session_free = SESSION_FREE
        #: Session evidence and diversity only for questions that gather facts across conversations
        #: (:func:`engramdb.retrieval.sessions.asks_across_sessions`), or for every question (False).
        self.session_gated = SESSION_GATED
        #: See :mod:`engramdb.retrieval.related`: what a related word of a question's word counts for in
        #: coverage (0: related words unused), for gathering questions only (``related_gated``) or all,
        #: how many candidates the related words' own keyword query adds, and how many related words per word.
        self.related_credit = RELATED_CREDIT
        self.related_gated = RELATED_GATED
        self.related_depth = _RELATED_DEPTH
        self.related_most = RELATED_MOST
        #: What a word of the question's form ("how many", "in total", "how long"; :func:`form_words`) counts for
        #: in evidence fusion's coverage, against 1 for a word of its topic (1: as any word). It is still searched.
        self.form_weight = FORM_WEIGHT
        #: Candidates fetched from the vector and the keyword channel (each at least ``limit``).
        self.depth = _DEPTH
        self.keyword_depth = _DEPTH
        #: Keep a question's time words ("Saturday") in its keyword query (True), or search the rest (False).
        self.time_words = True
        #: See :data:`engramdb.retrieval.timeref.RELATIVE_WEIGHT` (1: as any word) and ``EVENT_WEIGHT`` (0: off).
        self.relative_weight = RELATIVE_WEIGHT
        self.event_weight = EVENT_WEIGHT
        #: See :data:`engramdb.retrieval.amounts.AMOUNT_WEIGHT`; 0 turns it off.
        self.amount_weight = AMOUNT_WEIGHT
        #: Compare a question's window with the time a memory was said (0), the time its own words date its event to
        #: (:func:`engramdb.retrieval.timeref.told_time`; 1), or whichever lies nearer (2).
        self.told_times = 2
        #: Both only for phrases that count back ("a week ago"; True), or for any relative phrase (False).
        self.relative_counted = True
        #: The time as a bonus (True) or as a factor on relevance (False); bench/RESULTS.md measures both.
        self.time_additive = True
        #: The weights of learned fusion (``RankingWeights(fusion="learned")``); bench/fit_ranker.py fits others.
        self.scorer = LEARNED
        # The keyword query needs no embedding: it runs while the query is embedded (both release the GIL).
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="engram-keyword")
        #: Run the keyword channel on the worker thread, overlapped with the query embedding and the vector
        #: channel (True), or after them on the calling thread (False: ~0.4 ms less CPU per search, but slower
        #: at 100k under load, bench/search_path.py --whole). The hits are the same either way.
        self.overlap_keyword = True

    def start_workers(self) -> None:
        """Start the keyword worker threads now (at open, in the background) rather than in the first search."""
        # Each task holds its thread until the other runs too: the second submit then finds no idle thread and
        # starts the second (a search may use two), and both return the moment it has.
        both = threading.Barrier(2)

        def meet() -> None:
            with contextlib.suppress(threading.BrokenBarrierError):
                both.wait(timeout=_WORKER_START_GUARD_SECONDS)

        try:
            tasks = [self._pool.submit(meet) for _ in range(2)]
        except RuntimeError:
            both.abort()  # closed meanwhile: the first task must not hold up the close's wait for it
            raise
        for task in tasks:
            task.result()

    def close(self) -> None:
        """Stop the worker threads (waits for running searches)."""
        self._pool.shutdown(wait=True)

    def search(
        self,
        query: str,
        flt: Filter,
        *,
        limit: int,
        now: datetime,
        touch: bool = True,
        vector: Sequence[float] | None = None,
        fold: bool = True,
    ) -> list[Hit]:
        """The ``limit`` best memories for ``query`` under ``flt``, best first.

        Returned memories already reflect this retrieval (``access_count`` + 1,
        ``last_accessed`` = ``now``) when ``touch`` is true. With ``fold``, near-identical memories come as
        one hit (:mod:`engramdb.retrieval.collapse`); services that count memories (episode statistics)
        pass False.
        """
        depth, keyword_depth = max(self.depth, limit), max(self.keyword_depth, limit)
        # "last Saturday": counted from the moment the question is asked (``as_of``), else from now.
        window = find_time(query, reference=flt.as_of or now) if self.time_weight > 0 else None
        terms = query_terms(query if window is None or self.time_words else window.rest)
        form = form_words(query) if self.form_weight < 1 else frozenset()
        scale = {t: self.form_weight for t in terms if t in form}
        # "a week ago": resolved to a window, its words say when, not what (a turn saying "weeks ago" is no match).
        counted = bool(self.relative_counted)
        relative = (
            relative_words(window, counted=counted)
            if window is not None and self.relative_weight < 1
            else frozenset[str]()
        )
        scale |= {t: min(self.relative_weight, scale.get(t, 1.0)) for t in terms if t in relative}
        gathers = asks_across_sessions(query)
        across = not self.session_gated or gathers
        related = (
            related_terms(query, terms, skip=gathering_words(query), most=self.related_most)
            # Evidence fusion only: min-max and learned fusion read the keyword channel's own scores and ranks.
            if self.related_credit > 0
            and terms
            and self.weights.fusion == "evidence"
            and (gathers or not self.related_gated)
            else {}
        )
        overlap = bool(terms) and self.overlap_keyword
        search = self._store.search
        pending: Future[list[Candidate]] | None = (
            self._pool.submit(search.keyword_candidates, terms, flt, limit=keyword_depth) if overlap else None
        )
        # "sisters" for "siblings": candidates the question's own words do not reach. The query needs nothing of
        # the others, so it runs beside them (on PostgreSQL a round trip and a ranking each; one after the other
        # they added the second's whole time to every search).
        pending_related: Future[list[Candidate]] | None = (
            self._pool.submit(search.keyword_candidates, flat(related), flt, limit=self.related_depth)
            if overlap and related
            else None
        )
        try:
            qvec = self._queries.embed_query(query) if vector is None else vector
            vec = search.vector_candidates(np.asarray(qvec, dtype=np.float32), flt, limit=depth)
        finally:
            keyword = pending.result() if pending is not None else []
            extra = pending_related.result() if pending_related is not None else []
        if terms and pending is None:
            keyword = search.keyword_candidates(terms, flt, limit=keyword_depth)
        if related and pending_related is None:
            extra = search.keyword_candidates(flat(related), flt, limit=self.related_depth)
        if extra:
            held = {c.id for c in keyword}
            keyword = [*keyword, *(c for c in extra if c.id not in held)]
        if self.weights.fusion != "minmax":
            # Coverage needs every candidate's words: all of them are read (<= 2 x depth rows).
            ids = list(dict.fromkeys([c.id for c in vec] + [c.id for c in keyword]))
            memories = self._read(ids, flt, vec, keyword)
            texts = {i: m.content for i, m in memories.items()}
            w = self.weights
            if w.fusion == "learned":
                fused = fuse_learned(keyword, vec, texts, terms, scorer=self.scorer)
            else:
                note_first = bool(vec) and vec[0].id in memories and memories[vec[0].id].kind != "conversation"
                fused = fuse_by(
                    w,
                    keyword,
                    vec,
                    texts,
                    terms,
                    related=related,
                    related_credit=self.related_credit,
                    scale=scale,
                    note_first=note_first,
                )
            head = fused[: max(_HEAD, limit)]
        else:
            fused = fuse(keyword, vec, keyword_weight=self.weights.keyword)
            # Boosts can reorder only within reach of the top, so fetch a bounded slice.
            head = fused[: max(_HEAD, limit)]
            memories = self._read([f.id for f in head], flt, vec, keyword)
        linked = self.neighbour_weight > 0 and any(FOLLOWS_KEY in m.metadata for m in memories.values())
        spoken = (self.assistant_weight < 1 or self.other_speaker_weight < 1) and any(
            ROLE_KEY in m.metadata for m in memories.values()
        )
        grouped = (
            across
            and (self.session_weight > 0 or self.session_repeat < 1)
            and any(session_key(m) is not None for m in memories.values())
        )
        # "How many rare items do I have?": answered by "my 57 rare records", not by "a collection of rare items".
        amount = asked_amount(query) if self.amount_weight > 0 else frozenset[str]()
        if linked or spoken or grouped or window is not None or amount:
            # Conversation turns: a turn below the head may rise with its neighbour or past an assistant's
            # reply, or one of the day the question names, so read them all.
            reach = fused[: max(_SPREAD, limit)]
            unread = [f.id for f in reach if f.id not in memories]
            if unread:
                memories.update(self._read(unread, flt, vec, keyword))
            texts = {m.id: m.content for m in memories.values()}
            if window is not None:
                if self.event_weight > 0 and any(counted_back(s) if counted else s.relative for s in window.spans):
                    # "a week ago" of a past conversation: its answer was said as "today" on that day.
                    reach = weigh_reported_events(reach, texts, weight=self.event_weight)
                # "yesterday" said on the 15th: the event of the 14th (found when the memory was written); a question
                # may name either day ("what did Maria share on 16 June?" is the day it was said).
                when = {m.id: m.occurred_at for m in memories.values()}
                told = (
                    {m.id: event_time_of(m.occurred_at, m.metadata) for m in memories.values()}
                    if self.told_times
                    else {}
                )
                if self.told_times == 1:
                    when, told = told, {}
                # "what did I do last Saturday?": no other words to go by, so the time decides.
                weight = self.time_weight if query_terms(window.rest) else max(self.time_weight, TIME_ONLY_WEIGHT)
                reach = weigh_by_time(reach, when, window, weight=weight, additive=self.time_additive, told=told)
            if amount:
                topic = frozenset(terms) - form_words(query) - amount
                reach = weigh_amounts(reach, texts, amount, weight=self.amount_weight, topic=topic)
            if spoken:
                roles = {m.id: m.metadata.get(ROLE_KEY) for m in memories.values()}
                reach = weigh_speakers(reach, roles, query=query, weight=self.assistant_weight)
                reach = weigh_named_speakers(reach, roles, query=query, weight=self.other_speaker_weight)
            if linked:
                links = follows_links((m.id, m.metadata) for m in memories.values())
                lengths = {m.id: len(m.content) for m in memories.values()}
                reach = spread_to_neighbours(reach, links, lengths, weight=self.neighbour_weight)
            if grouped:
                sessions = {m.id: session_key(m) for m in memories.values()}
                reach = weigh_by_session(
                    reach,
                    sessions,
                    weight=self.session_weight,
                    share=self.session_share,
                    best_only=self.session_best_only,
                )
                reach = diversify_sessions(reach, sessions, repeat=self.session_repeat, free=self.session_free)
            head = reach[: max(_HEAD, limit)]
        ordered = rank(head, memories, now=now, weights=self.weights)
        ranked = collapse(ordered, lambda t: t[1], limit=limit) if fold else [(t, list[str]()) for t in ordered[:limit]]
        if touch and ranked:
            self._store.memories.touch([m.id for (_, m, _), _ in ranked], at=now)
        cosines = self._cosines(
            qvec, [f for (f, _, _), _ in ranked], agents=[m.agent for (_, m, _), _ in ranked], carried=keyword
        )
        weights = [term_weight(t) for t in terms]
        calibration = self.profile.calibration
        hits = []
        for (f, m, score), folded in ranked:
            shown = dataclasses.replace(m, access_count=m.access_count + 1, last_accessed=now) if touch else m
            rel = relevance(cosines[f.id], coverage(terms, m.content, weights=weights), calibration=calibration)
            hits.append(Hit(shown, score, f.keyword_score, f.vector_score, rel, tuple(folded)))
        return hits

    def _read(self, ids: Sequence[str], flt: Filter, *found: Sequence[Candidate]) -> dict[str, Memory]:
        """The memories of ``ids`` visible under ``flt``, in that order: those the channels carried, the rest read."""
        carried = {c.id: c.memory for channel in found for c in channel if c.memory is not None}
        unread = [i for i in ids if i not in carried]
        fetched = self._store.memories.get_many(unread, flt) if unread else {}
        out: dict[str, Memory] = {}
        for memory_id in ids:
            memory = carried.get(memory_id) or fetched.get(memory_id)
            if memory is not None:
                out[memory_id] = memory
        return out

    def _cosines(
        self,
        qvec: Sequence[float] | npt.NDArray[np.float32],
        fused: Sequence[Fused],
        *,
        agents: Sequence[str],
        carried: Sequence[Candidate] = (),
    ) -> dict[str, float]:
        """Each hit's raw cosine to the query: the vector channel's, else from its stored vector (0 if none): the one
        its keyword candidate carried (``carried``), else read."""
        out = {f.id: f.vector_score for f in fused if f.vector_score is not None}
        missing = [f.id for f in fused if f.vector_score is None]
        if missing:
            q = np.asarray(qvec, dtype=np.float32)
            q = q / (float(np.linalg.norm(q)) or 1.0)
            known = {c.id: c.vector for c in carried if c.vector is not None and c.vector_model == self._model_id}
            vectors = {i: known[i] for i in missing if i in known}
            unread = [i for i in missing if i not in known]
            if unread:
                vectors.update(self._store.vectors.get(unread, model_id=self._model_id, agents=agents))
            for memory_id, vec in vectors.items():
                v = np.asarray(vec, dtype=np.float32)
                out[memory_id] = float(q @ v) / (float(np.linalg.norm(v)) or 1.0)
        return {f.id: out.get(f.id, 0.0) for f in fused}
