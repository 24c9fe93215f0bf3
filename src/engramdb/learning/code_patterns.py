"""Code patterns: the functions, classes and error handlers of Python source, with a complexity estimate. Pure.

:func:`extract` parses source with :mod:`ast` (nothing is imported or run) and
returns one :class:`CodePattern` per function or method, class, and ``try``
statement with handlers. The facade stores them as ``code_pattern`` memories
(:meth:`~engramdb.Engram.remember_code`) and finds them again for a task
description (:meth:`~engramdb.Engram.suggest_patterns`).

Complexity is McCabe's cyclomatic complexity as radon and flake8's mccabe count
it: 1, plus one per ``if``/``elif``, conditional expression, loop (and loop
``else``), ``except`` clause, ``match`` case, comprehension ``for`` and ``if``,
and each extra operand of ``and``/``or``. Nested functions and classes count for
themselves, not for the code around them. A class's complexity is the sum over
its methods. Levels: low (1-5), medium (6-10), high (11 and up), radon's A, B and C+.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Any, Final

from engramdb.errors import ValidationError

__all__ = ["PATTERN_TYPES", "CodePattern", "complexity", "complexity_level", "extract"]

#: The kinds of pattern extracted.
PATTERN_TYPES: Final = ("function", "class", "error_handler")

_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda


@dataclass(frozen=True, slots=True, kw_only=True)
class CodePattern:
    """A reusable piece of code found in source."""

    #: "function", "class" or "error_handler".
    pattern_type: str
    #: Qualified name (``Client.fetch``); for an error handler, where it is and what it catches.
    name: str
    code: str
    lineno: int
    end_lineno: int
    complexity: int
    #: The ``def``/``class`` line without its body (None for error handlers).
    signature: str | None = None
    #: The first paragraph of the docstring, if any.
    docstring: str | None = None
    is_async: bool = False
    decorators: tuple[str, ...] = ()
    #: A class's methods.
    methods: tuple[str, ...] = ()
    #: The exception types an error handler catches ("BaseException" for a bare ``except:``).
    handled: tuple[str, ...] = ()
    filename: str | None = None
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


class _Complexity(ast.NodeVisitor):
    def __init__(self) -> None:
        self.count = 1

    def _branch(self, node: ast.AST) -> None:
        self.count += 1
        self.generic_visit(node)

    visit_If = visit_IfExp = visit_ExceptHandler = _branch  # noqa: N815 - ast.NodeVisitor naming
    visit_match_case = _branch

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        self.count += 1 + bool(node.orelse)
        self.generic_visit(node)

    visit_For = visit_AsyncFor = visit_While = _loop  # noqa: N815

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.count += 1 + len(node.ifs)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.count += len(node.values) - 1
        self.generic_visit(node)

    # Nested scopes are patterns of their own (a lambda counts in place: it has no name to find it by).
    def _skip(self, node: ast.AST) -> None:
        return None

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _skip  # noqa: N815


def complexity(node: ast.AST) -> int:
    """The cyclomatic complexity of a function (or any statement); a class sums its methods."""
    if isinstance(node, ast.ClassDef):
        methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        return sum(complexity(m) for m in methods) or 1
    visitor = _Complexity()
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        # Only the body runs when the function is called (defaults and decorators run at definition).
        for stmt in node.body:
            visitor.visit(stmt)
    else:
        visitor.visit(node)
    return visitor.count


def _first_paragraph(doc: str | None) -> str | None:
    if not doc:
        return None
    return " ".join(doc.strip().split("\n\n", 1)[0].split()) or None


def _handled(node: ast.Try | ast.TryStar) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for handler in node.handlers:
        if handler.type is None:
            out["BaseException"] = None
        elif isinstance(handler.type, ast.Tuple):
            for elt in handler.type.elts:
                out[ast.unparse(elt)] = None
        else:
            out[ast.unparse(handler.type)] = None
    return tuple(out)


class _Extractor(ast.NodeVisitor):
    def __init__(self, lines: list[str], filename: str | None) -> None:
        self.lines = lines
        self.filename = filename
        self.scope: list[str] = []
        self.found: list[CodePattern] = []

    def _code(self, node: ast.stmt) -> tuple[str, int, int]:
        start = node.lineno
        decorators = getattr(node, "decorator_list", [])
        if decorators:
            start = min(start, *(d.lineno for d in decorators))
        end = node.end_lineno or node.lineno
        return textwrap.dedent("\n".join(self.lines[start - 1 : end])).rstrip(), start, end

    def _qualname(self, name: str) -> str:
        return ".".join([*self.scope, name])

    def _definition(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
        *,
        pattern_type: str,
        signature: str,
        is_async: bool = False,
        methods: tuple[str, ...] = (),
    ) -> None:
        """Record a ``def`` or ``class``, then look inside it (with its name added to the scope)."""
        code, start, end = self._code(node)
        self.found.append(
            CodePattern(
                pattern_type=pattern_type,
                name=self._qualname(node.name),
                code=code,
                lineno=start,
                end_lineno=end,
                complexity=complexity(node),
                signature=signature,
                docstring=_first_paragraph(ast.get_docstring(node)),
                decorators=tuple(ast.unparse(d) for d in node.decorator_list),
                is_async=is_async,
                methods=methods,
                filename=self.filename,
            )
        )
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        is_async = isinstance(node, ast.AsyncFunctionDef)
        signature = f"{'async ' if is_async else ''}def {node.name}({ast.unparse(node.args)})"
        if node.returns is not None:
            signature += f" -> {ast.unparse(node.returns)}"
        self._definition(node, pattern_type="function", signature=signature, is_async=is_async)

    visit_FunctionDef = visit_AsyncFunctionDef = _function  # noqa: N815

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        signature = f"class {node.name}" + (f"({', '.join(bases)})" if bases else "")
        methods = tuple(n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        self._definition(node, pattern_type="class", signature=signature, methods=methods)

    def _try(self, node: ast.Try | ast.TryStar) -> None:
        if node.handlers:
            code, start, end = self._code(node)
            handled = _handled(node)
            where = ".".join(self.scope) or "<module>"
            self.found.append(
                CodePattern(
                    pattern_type="error_handler",
                    name=f"{where}: try/except {', '.join(handled)}",
                    code=code,
                    lineno=start,
                    end_lineno=end,
                    complexity=complexity(node),
                    handled=handled,
                    filename=self.filename,
                )
            )
        self.generic_visit(node)

    visit_Try = visit_TryStar = _try  # noqa: N815


def extract(source: str, *, filename: str | None = None) -> list[CodePattern]:
    """The functions (and methods), classes and error handlers of Python ``source``, in source order.

    Raises :class:`~engramdb.errors.ValidationError` when the source does not parse.
    """
    if not isinstance(source, str):
        raise ValidationError(f"source must be text, not {type(source).__name__}")
    try:
        tree = ast.parse(source, filename=filename or "<source>")
    except (SyntaxError, ValueError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
        msg = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise ValidationError(f"cannot parse {filename or 'the source'} as Python: {where}{msg}") from exc
    extractor = _Extractor(source.splitlines(), filename)
    extractor.visit(tree)
    return sorted(extractor.found, key=lambda p: (p.lineno, PATTERN_TYPES.index(p.pattern_type)))
