"""Code patterns: ``mem.code``, the functions, classes and error handlers of source code, remembered.

Python, JavaScript and TypeScript: the language is the one given, else the one the
file name says, else Python (:func:`~engramdb.learning.code_patterns.detect_language`).

Extraction is pure (:mod:`engramdb.learning.code_patterns`); this service stores the
patterns as ``code_pattern`` memories through the write pipeline and finds them
again through the recall.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.learning import code_patterns as code
from engramdb.models import Hit, Memory, Visibility
from engramdb.services._base import Service, ServiceContext
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    pass

__all__ = ["NAMED", "CodeService"]

_CODE: Final = ("code_pattern",)
#: The pattern type (and tag) of a pattern stored whole under a name (seed 003's ``store_code_pattern``).
NAMED: Final = "named"


class CodeService(Service):
    """Code patterns: remember those of Python, JavaScript or TypeScript source, suggest stored ones for a task."""

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)

    def remember(
        self,
        source: str,
        *,
        agent: str | None = None,
        filename: str | None = None,
        language: str | None = None,
        tags: Iterable[str] = (),
        min_lines: int = 3,
        visibility: Visibility = "private",
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        context: str | None = None,
        success_metrics: Mapping[str, Any] | None = None,
    ) -> list[Memory]:
        """Extract the functions, classes and error handlers of ``source`` and store them.

        ``language`` is "python", "javascript" or "typescript" (or ``py``, ``js``, ``jsx``,
        ``ts``, ``tsx``); without it, the extension of ``filename`` decides (``.js``,
        ``.mjs``, ``.jsx``, ``.ts``, ``.tsx``, ...), else Python. Each pattern becomes a
        ``code_pattern`` memory (tagged with its language and its pattern type) written
        in one batch; patterns shorter than ``min_lines`` are skipped. Returns the stored
        memories (a pattern already stored merges into it). Raises ValidationError if the
        source does not parse or the language is not supported.

        ``metadata`` (a JSON object: ``{"framework": "fastapi"}``) is added to every stored
        pattern's (the extracted facts win on a clash). Seed 003's ``store_code_pattern(
        pattern_name, code, language, context, success_metrics)``: with ``name``, the whole
        source is stored as one pattern of that name (``pattern_type`` ``named``), with
        ``context`` (when it applies) and ``success_metrics`` (a JSON object such as
        ``{"success_rate": 1.0}``) in its metadata, and nothing else is extracted.
        """
        agent = check.agent_or_default(agent, self._settings)
        if not isinstance(source, str):
            raise ValidationError(f"source must be text, not {type(source).__name__}")
        if not source.strip():
            # An empty file is a mistake (a wrong path, an unread stream), not code without patterns.
            raise ValidationError("source must not be empty")
        if filename is not None and not isinstance(filename, str):
            raise ValidationError(f"filename must be text, not {type(filename).__name__}")
        agent = check.agent_name(agent)
        user_tags = list(check.tags(tags if not isinstance(tags, str) else [tags]))
        extra = dict(check.metadata(metadata))
        if name is not None:
            return [
                self._named(
                    source,
                    name=name,
                    context=context,
                    success_metrics=success_metrics,
                    agent=agent,
                    language=code.detect_language(filename=filename, language=language),
                    tags=user_tags,
                    extra=extra,
                    visibility=visibility,
                )
            ]
        if context is not None or success_metrics is not None:
            raise ValidationError(
                "a context or success metrics describe a named pattern: give its name too (--name on the command line)"
            )
        found = code.extract(source, filename=filename, language=language)
        patterns = [p for p in found if p.lines >= min_lines]
        items = [
            {
                "content": p.content(),
                "agent": agent,
                "kind": "code_pattern",
                "tags": [*user_tags, p.language, p.pattern_type],
                "metadata": {**extra, **p.metadata()},
                "visibility": visibility,
            }
            for p in patterns
        ]
        if not items:
            return []
        # Near-duplicate merging would fold a nested function into its parent (a decorator's ``wrapper`` reads
        # much like the decorator): a pattern merges only into a stored pattern of its own name; others are new.
        known = self._stored_names(agent)
        again = [i for i, p in enumerate(patterns) if (p.language, p.pattern_type, p.name) in known]
        fresh = [i for i in range(len(patterns)) if i not in set(again)]
        out: dict[int, Memory] = {}
        if again:
            out |= dict(zip(again, self._pipeline.remember_many([items[i] for i in again]), strict=True))
        if fresh:
            out |= dict(zip(fresh, self._pipeline.remember_many([items[i] for i in fresh], force=True), strict=True))
        return [out[i] for i in range(len(patterns))]

    def _stored_names(self, agent: str) -> set[tuple[str, str, str]]:
        """(language, pattern type, name) of the agent's stored code patterns."""
        stored = self._store.memories.list(Filter(agent=agent, kinds=_CODE), limit=check.MAX_LIMIT, offset=0)
        return {
            (str(m.metadata.get("language")), str(m.metadata.get("pattern_type")), str(m.metadata.get("name")))
            for m in stored
            if m.agent == agent
        }

    def _named(
        self,
        source: str,
        *,
        name: str,
        context: str | None,
        success_metrics: Mapping[str, Any] | None,
        agent: str,
        language: str,
        tags: list[str],
        extra: dict[str, Any],
        visibility: Visibility,
    ) -> Memory:
        title = check.name(name, what="name")
        where = check.content(context, what="context") if context is not None else None
        metrics = dict(check.metadata(success_metrics)) if success_metrics is not None else {}
        head = f"{language} pattern {title}" + (f": {where}" if where else "")
        meta = {
            **extra,
            "language": language,
            "pattern_type": NAMED,
            "name": title,
            "context": where,
            "success_metrics": metrics,
            "lines": len(source.strip().splitlines()),
        }
        return self._pipeline.remember(
            f"{head}\n{source.strip()}",
            agent=agent,
            kind="code_pattern",
            tags=[*tags, language, NAMED],
            metadata=check.metadata(meta),
            visibility=visibility,
        )

    def suggest(
        self,
        task: str,
        *,
        agent: str | None = None,
        pattern_type: str | None = None,
        language: str | None = None,
        limit: int = 5,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Stored code patterns most relevant to a task description, best first.

        ``pattern_type`` ("function", "class", "error_handler", "named") restricts the kind of
        pattern, ``language`` ("python", "javascript", "typescript" or an alias) the language,
        ``metadata`` (seed 003's "metadata filtering": ``{"framework": "fastapi"}``) to patterns
        whose metadata holds every one of those key/value pairs.
        """
        agent = check.agent_or_default(agent, self._settings)
        types = (*code.PATTERN_TYPES, NAMED)
        if pattern_type is not None and pattern_type not in types:
            raise ValidationError(f"pattern_type must be one of {', '.join(types)}, not {check.shown(pattern_type)}")
        wanted = dict(check.metadata(metadata)) if metadata is not None else {}
        tags = [pattern_type] if pattern_type else []
        if language is not None:
            tags.append(code.detect_language(language=language))
        if not wanted:
            return self._recall.search(task, agent=agent, kind="code_pattern", tags=tags or None, limit=limit)
        limit = check.limit(limit)
        # Metadata is not indexed: read a wider page of the best matches, keep those that hold every pair.
        hits = self._recall.search(
            task,
            agent=agent,
            kind="code_pattern",
            tags=tags or None,
            limit=min(check.MAX_LIMIT, limit * 20),
            fold=False,  # a folded duplicate may be the one holding the metadata asked for
        )
        return [h for h in hits if all(h.memory.metadata.get(k) == v for k, v in wanted.items())][:limit]
