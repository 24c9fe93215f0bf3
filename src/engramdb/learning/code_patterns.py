"""Code patterns: the functions, classes and error handlers of source code, with a complexity estimate. Pure.

:func:`extract` parses Python source with :mod:`ast` (nothing is imported or run),
JavaScript and TypeScript source with tree-sitter (:mod:`engramdb.learning.code_js`),
and returns one :class:`CodePattern` per function or method, class, and ``try``
statement with handlers. The language is the one given, else the one the file
name's extension says (:func:`detect_language`), else Python. The code service stores them as ``code_pattern`` memories
(``mem.code.remember``, :class:`~engramdb.services.code.CodeService`) and finds
them again for a task description (``mem.code.suggest``).

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
from pathlib import PurePath
from typing import Final

from engramdb.errors import ValidationError
from engramdb.models.code import CodePattern, complexity_level

__all__ = ["LANGUAGES", "PATTERN_TYPES", "complexity", "complexity_level", "detect_language", "extract"]

#: The kinds of pattern extracted.
PATTERN_TYPES: Final = ("function", "class", "error_handler")
#: The languages code patterns are extracted from.
LANGUAGES: Final = ("python", "javascript", "typescript")
#: Other names accepted for them (``language="ts"``), lower case.
_ALIASES: Final = {
    "py": "python",
    "python3": "python",
    "js": "javascript",
    "jsx": "javascript",
    "node": "javascript",
    "ecmascript": "javascript",
    "ts": "typescript",
    "tsx": "typescript",
}
#: File name extensions and their language (``.tsx`` is TypeScript with JSX).
_EXTENSIONS: Final = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescript",
}

_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda


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


def detect_language(filename: str | None = None, language: str | None = None) -> str:
    """The language of a source: ``language`` if given (a name of :data:`LANGUAGES` or an alias
    such as ``js``, ``ts``, ``tsx``, ``py``), else the one ``filename``'s extension says, else
    Python. Raises ValidationError for a language not supported."""
    if language is not None:
        if not isinstance(language, str):
            raise ValidationError(f"language must be text, not {type(language).__name__}")
        name = language.strip().lower()
        name = _ALIASES.get(name, name)
        if name not in LANGUAGES:
            raise ValidationError(f"unsupported language {language!r} (supported: {', '.join(LANGUAGES)})")
        return name
    if filename:
        suffix = PurePath(filename).suffix.lower()
        return _EXTENSIONS.get(suffix, "python")
    return "python"


def _is_tsx(filename: str | None, language: str | None) -> bool:
    if language is not None and language.strip().lower() == "tsx":
        return True
    return bool(filename) and PurePath(filename or "").suffix.lower() == ".tsx"


def extract(source: str, *, filename: str | None = None, language: str | None = None) -> list[CodePattern]:
    """The functions (and methods), classes and error handlers of ``source``, in source order.

    ``language`` ("python", "javascript", "typescript" or an alias, see :func:`detect_language`)
    defaults to the one ``filename``'s extension says, else Python. Raises
    :class:`~engramdb.errors.ValidationError` when the source does not parse.
    """
    if not isinstance(source, str):
        raise ValidationError(f"source must be text, not {type(source).__name__}")
    lang = detect_language(filename, language)
    if lang != "python":
        from engramdb.learning import code_js

        return code_js.extract(source, language=lang, filename=filename, tsx=_is_tsx(filename, language))
    try:
        tree = ast.parse(source, filename=filename or "<source>")
    except (SyntaxError, ValueError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
        msg = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise ValidationError(f"cannot parse {filename or 'the source'} as Python: {where}{msg}") from exc
    extractor = _Extractor(source.splitlines(), filename)
    extractor.visit(tree)
    return sorted(extractor.found, key=lambda p: (p.lineno, PATTERN_TYPES.index(p.pattern_type)))
