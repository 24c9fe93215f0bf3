"""Values of code learning: a reusable piece of code found in Python, JavaScript or TypeScript source.

See :mod:`engramdb.learning.code_patterns` (Python, and the dispatch by language) and
:mod:`engramdb.learning.code_js` (JavaScript and TypeScript).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CodePattern"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CodePattern:
    """A reusable piece of code found in source."""

    #: "function", "class" or "error_handler".
    pattern_type: str
    #: Qualified name (``Client.fetch``); for an error handler, where it is and what it catches.
    #: A JavaScript/TypeScript function is named after the variable or field holding it
    #: (``const debounce = () => ...`` is ``debounce``); ``export default function`` is ``default``.
    name: str
    code: str
    lineno: int
    end_lineno: int
    complexity: int
    #: The declaration without its body: ``def f(x) -> int``, ``async function f(url: string): Promise<T>``,
    #: ``class Cache(Base)``, ``class Cache extends Map`` (None for error handlers).
    signature: str | None = None
    #: The first paragraph of the docstring (Python) or of the JSDoc comment (``/** ... */``), if any.
    docstring: str | None = None
    is_async: bool = False
    decorators: tuple[str, ...] = ()
    #: A class's methods.
    methods: tuple[str, ...] = ()
    #: The exception types an error handler catches ("BaseException" for a bare ``except:``; in
    #: JavaScript/TypeScript the classes its ``catch`` tests with ``instanceof``, else "any").
    handled: tuple[str, ...] = ()
    filename: str | None = None
    #: "python", "javascript" or "typescript".
    language: str = "python"

    @property
    def lines(self) -> int:
        """Source lines the pattern spans."""
        return self.end_lineno - self.lineno + 1

    @property
    def level(self) -> str:
        """low, medium or high (see :func:`complexity_level`)."""
        return complexity_level(self.complexity)

    def header(self) -> list[str]:
        """The description lines stored before the code: kind and name, signature, docstring, what it handles."""
        head = f"{self.pattern_type.replace('_', ' ')} {self.name}"
        if self.signature:
            head += f": {self.signature}"
        parts = [head]
        if self.docstring:
            parts.append(self.docstring)
        if self.handled:
            parts.append(f"handles {', '.join(self.handled)}")
        if self.methods:
            parts.append(f"methods: {', '.join(self.methods)}")
        return parts

    def content(self) -> str:
        """The text stored (and embedded) for this pattern: the description first (it carries the meaning
        a task description is matched against), then the code."""
        return "\n".join([*self.header(), self.code])

    def metadata(self) -> dict[str, Any]:
        """JSON-ready facts about the pattern (stored as the memory's metadata)."""
        return {
            "language": self.language,
            "pattern_type": self.pattern_type,
            "name": self.name,
            "signature": self.signature,
            "docstring": self.docstring,
            "lineno": self.lineno,
            "end_lineno": self.end_lineno,
            "lines": self.lines,
            "complexity": self.complexity,
            "complexity_level": self.level,
            "is_async": self.is_async,
            "decorators": list(self.decorators),
            "methods": list(self.methods),
            "handled": list(self.handled),
            "filename": self.filename,
            # The stored content is header() then the code: this many lines precede the code.
            "header_lines": len(self.header()),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (metadata plus the code)."""
        return {**self.metadata(), "code": self.code}


def complexity_level(value: int) -> str:
    """low (1-5), medium (6-10) or high (11 and up)."""
    if value <= 5:
        return "low"
    if value <= 10:
        return "medium"
    return "high"
