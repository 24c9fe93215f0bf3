"""Code patterns: ``mem.code``, the functions, classes and error handlers of source code, remembered.

Python, JavaScript and TypeScript: the language is the one given, else the one the
file name says, else Python (:func:`~engramdb.learning.code_patterns.detect_language`).

Extraction is pure (:mod:`engramdb.learning.code_patterns`); this service stores the
patterns as ``code_pattern`` memories through the write pipeline and finds them
again through the recall.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.learning import code_patterns as code
from engramdb.models import Hit, Memory, Visibility

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.embeddings.base import Embedder
    from engramdb.pipeline import WritePipeline
    from engramdb.recall import Recall
    from engramdb.storage.base import Store

__all__ = ["CodeService"]


class CodeService:
    """Code patterns: remember those of Python, JavaScript or TypeScript source, suggest stored ones for a task."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        *,
        pipeline: WritePipeline,
        recall: Recall,
    ) -> None:
        self._settings = settings
        self._pipeline = pipeline
        self._recall = recall

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
    ) -> list[Memory]:
        """Extract the functions, classes and error handlers of ``source`` and store them.

        ``language`` is "python", "javascript" or "typescript" (or ``py``, ``js``, ``jsx``,
        ``ts``, ``tsx``); without it, the extension of ``filename`` decides (``.js``,
        ``.mjs``, ``.jsx``, ``.ts``, ``.tsx``, ...), else Python. Each pattern becomes a
        ``code_pattern`` memory (tagged with its language and its pattern type) written
        in one batch; patterns shorter than ``min_lines`` are skipped. Returns the stored
        memories (a pattern already stored merges into it). Raises ValidationError if the
        source does not parse or the language is not supported.
        """
        agent = self._settings.agent if agent is None else agent
        if not isinstance(source, str):
            raise ValidationError(f"source must be text, not {type(source).__name__}")
        if not source.strip():
            # An empty file is a mistake (a wrong path, an unread stream), not code without patterns.
            raise ValidationError("source must not be empty")
        agent = check.agent_name(agent)
        user_tags = list(check.tags(tags if not isinstance(tags, str) else [tags]))
        found = code.extract(source, filename=filename, language=language)
        patterns = [p for p in found if p.lines >= min_lines]
        items = [
            {
                "content": p.content(),
                "agent": agent,
                "kind": "code_pattern",
                "tags": [*user_tags, p.language, p.pattern_type],
                "metadata": p.metadata(),
                "visibility": visibility,
            }
            for p in patterns
        ]
        return self._pipeline.remember_many(items) if items else []

    def suggest(
        self,
        task: str,
        *,
        agent: str | None = None,
        pattern_type: str | None = None,
        language: str | None = None,
        limit: int = 5,
    ) -> list[Hit]:
        """Stored code patterns most relevant to a task description, best first.

        ``pattern_type`` ("function", "class", "error_handler") restricts the kind of pattern,
        ``language`` ("python", "javascript", "typescript" or an alias) the language.
        """
        agent = self._settings.agent if agent is None else agent
        if pattern_type is not None and pattern_type not in code.PATTERN_TYPES:
            raise ValidationError(f"pattern_type must be one of {', '.join(code.PATTERN_TYPES)}, not {pattern_type!r}")
        tags = [pattern_type] if pattern_type else []
        if language is not None:
            tags.append(code.detect_language(language=language))
        return self._recall.search(task, agent=agent, kind="code_pattern", tags=tags or None, limit=limit)
