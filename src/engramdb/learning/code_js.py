"""Code patterns of JavaScript and TypeScript source, parsed with tree-sitter. Pure.

The same three kinds of pattern as for Python (:mod:`engramdb.learning.code_patterns`):

- ``function``: function declarations (and generators), class methods (``Cache.get``;
  getters, setters, constructors, and fields holding an arrow function or function
  expression), and functions assigned to a ``const``/``let``/``var``.
- ``class``: class declarations (``abstract`` ones too) and classes assigned to a variable,
  with their methods.
- ``error_handler``: ``try`` statements with a ``catch``. What a handler catches is the
  list of classes its ``catch`` block tests with ``instanceof``; a block that tests none
  catches anything (``any``), as every JavaScript ``catch`` does.

Complexity is McCabe's cyclomatic complexity as ESLint's ``complexity`` rule counts it:
1, plus one per ``if``, conditional (``?:``) expression, loop (``for``, ``for in``/``of``,
``while``, ``do``), ``catch`` clause, ``case`` with a test (not ``default``), and ``&&``,
``||`` and ``??`` (and their assignment forms ``&&=``, ``||=``, ``??=``). As for Python,
named functions and classes count for themselves, not for the code around them, while an
anonymous callback (an arrow function passed as an argument) counts in place: it has no
name to be found by. A class's complexity is the sum over its methods.

The signature is the declaration up to its body (``async function fetchJson(url: string):
Promise<unknown>``), the docstring the first paragraph of the JSDoc comment (``/** ... */``)
right before the declaration, without its ``@`` tags.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from functools import cache
from typing import Final

from tree_sitter import Language, Node, Parser

from engramdb.errors import ValidationError
from engramdb.models.code import CodePattern

__all__ = ["LANGUAGES", "complexity", "extract"]

#: The languages this module parses ("typescript" also covers TSX).
LANGUAGES: Final = ("javascript", "typescript")

_FUNCTIONS: Final = frozenset(
    {"function_declaration", "generator_function_declaration", "function_expression", "function", "arrow_function"}
)
_CLASSES: Final = frozenset({"class_declaration", "abstract_class_declaration", "class"})
_FIELDS: Final = frozenset({"field_definition", "public_field_definition"})
_BRANCHES: Final = frozenset(
    {
        "if_statement",
        "ternary_expression",
        "for_statement",
        "for_in_statement",
        "while_statement",
        "do_statement",
        "catch_clause",
    }
)
_LOGICAL: Final = frozenset({"&&", "||", "??", "&&=", "||=", "??="})
_BODY_FIELDS: Final = ("body",)


@cache
def _parser(grammar: str) -> Parser:
    if grammar == "javascript":
        import tree_sitter_javascript

        return Parser(Language(tree_sitter_javascript.language()))
    import tree_sitter_typescript

    if grammar == "tsx":
        return Parser(Language(tree_sitter_typescript.language_tsx()))
    return Parser(Language(tree_sitter_typescript.language_typescript()))


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def _pattern_name(node: Node) -> str | None:
    """The name of a function or class that is a pattern of its own; None for anything else."""
    if node.type in {"function_declaration", "generator_function_declaration"} or node.type in _CLASSES:
        name = node.child_by_field_name("name")
        if name is not None:
            return _text(name)
    if node.type in _FUNCTIONS | _CLASSES and node.parent is not None and node.parent.type == "export_statement":
        return "default"  # export default function () {}
    if node.type == "method_definition":
        return _text(node.child_by_field_name("name"))
    if node.type in _FUNCTIONS | _CLASSES or node.type in _FIELDS:
        holder = node if node.type in _FIELDS else node.parent
        if holder is None:
            return None
        if holder.type == "variable_declarator" and holder.child_by_field_name("value") == node:
            return _text(holder.child_by_field_name("name")) or None
        if holder.type in _FIELDS:
            value = holder.child_by_field_name("value")
            if value is not None and value.type in _FUNCTIONS:
                key = holder.child_by_field_name("property") or holder.child_by_field_name("name")
                return _text(key) or None
    return None


def _is_pattern(node: Node) -> bool:
    # A field holding a function is the pattern; the function inside it is not a second one.
    if node.type in _FUNCTIONS and node.parent is not None and node.parent.type in _FIELDS:
        return False
    return _pattern_name(node) is not None


def _count(node: Node) -> int:
    """Decision points in ``node``'s subtree, not looking into nested patterns."""
    total = 0
    stack = list(node.children)
    while stack:
        child = stack.pop()
        if _is_pattern(child):
            continue
        kind = child.type
        if kind in _BRANCHES:
            total += 1
        elif kind == "switch_case":
            total += 1  # `case x:` (``default:`` is a switch_default node)
        elif kind in {"binary_expression", "augmented_assignment_expression"}:
            operator = child.child_by_field_name("operator")
            total += _text(operator) in _LOGICAL
        stack.extend(child.children)
    return total


def _function_body(node: Node) -> Node:
    if node.type in _FIELDS:
        value = node.child_by_field_name("value")
        return value if value is not None else node
    return node


def complexity(node: Node) -> int:
    """The cyclomatic complexity of a function, method or statement; a class sums its methods."""
    if node.type in _CLASSES:
        body = node.child_by_field_name("body")
        methods = [c for c in (body.named_children if body is not None else []) if _is_pattern(c)]
        return sum(complexity(m) for m in methods) or 1
    return 1 + _count(_function_body(node))


def _decorators(node: Node) -> list[Node]:
    """Decorators of a class or method: its own ``decorator`` children, those on its ``export``
    statement, and (TypeScript methods) the ``decorator`` siblings right before it."""
    found = [c for c in node.children if c.type == "decorator"]
    parent = node.parent
    if parent is not None and parent.type == "export_statement":
        found = [c for c in parent.children if c.type == "decorator"] + found
    sibling = node.prev_named_sibling
    before: list[Node] = []
    while sibling is not None and sibling.type == "decorator":
        before.insert(0, sibling)
        sibling = sibling.prev_named_sibling
    unique: dict[tuple[int, int], Node] = {(d.start_byte, d.end_byte): d for d in before + found}
    return sorted(unique.values(), key=lambda d: d.start_byte)


def _outer(node: Node) -> Node:
    """The statement a pattern's code starts with: its ``export``/declaration statement, if any."""
    if node.type in _FUNCTIONS | _CLASSES and node.parent is not None and node.parent.type == "variable_declarator":
        declarator = node.parent
        declaration = declarator.parent
        if declaration is not None and declaration.named_child_count == 1:
            node = declaration
        else:
            return declarator
    if node.parent is not None and node.parent.type == "export_statement":
        return node.parent
    return node


_JSDOC_TAG: Final = re.compile(r"^\s*@")


def _jsdoc(node: Node) -> str | None:
    comment = _outer(node).prev_sibling
    if comment is None or comment.type != "comment":
        return None
    raw = _text(comment)
    if not raw.startswith("/**") or comment.end_point[0] < _outer(node).start_point[0] - 1:
        return None
    lines = [re.sub(r"^\s*\*\s?", "", line) for line in raw[3:-2].splitlines()]
    kept: list[str] = []
    for line in lines:
        if _JSDOC_TAG.match(line):
            break
        kept.append(line)
    first = "\n".join(kept).strip().split("\n\n", 1)[0]
    return " ".join(first.split()) or None


def _signature(node: Node) -> str:
    """The declaration up to its body, on one line."""
    target = _function_body(node)
    body = target.child_by_field_name("body")
    start = _outer(node) if node.type not in _FIELDS and node.type != "method_definition" else node
    if start.type == "export_statement":  # the signature is the declaration's, without `export`
        start = start.child_by_field_name("declaration") or start.child_by_field_name("value") or node
    first_decorator_end = max((d.end_byte for d in start.children if d.type == "decorator"), default=start.start_byte)
    source = start.text or b""
    begin = first_decorator_end - start.start_byte
    end = (body.start_byte if body is not None else target.end_byte) - start.start_byte
    text = source[begin:end].decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return text.removesuffix("=>").rstrip() if body is not None and body.type != "statement_block" else text


def _handled(node: Node) -> tuple[str, ...]:
    clause = next((c for c in node.children if c.type == "catch_clause"), None)
    found: dict[str, None] = {}
    stack = list(clause.children) if clause is not None else []
    while stack:
        child = stack.pop(0)
        if child.type == "binary_expression" and _text(child.child_by_field_name("operator")) == "instanceof":
            found[_text(child.child_by_field_name("right"))] = None
        if not _is_pattern(child):
            stack.extend(child.children)
    return tuple(found) or ("any",)


class _Extractor:
    def __init__(self, source: bytes, language: str, filename: str | None) -> None:
        self.lines = source.decode("utf-8", errors="replace").splitlines()
        self.language = language
        self.filename = filename
        self.found: list[CodePattern] = []

    def _code(self, node: Node) -> tuple[str, int, int]:
        outer = _outer(node)
        decorators = _decorators(node)
        start = min([outer.start_point[0], *(d.start_point[0] for d in decorators)]) + 1
        end = node.end_point[0] + 1 if outer.type == "variable_declarator" else outer.end_point[0] + 1
        return textwrap.dedent("\n".join(self.lines[start - 1 : end])).rstrip(), start, end

    def walk(self, node: Node, scope: tuple[str, ...]) -> None:
        for child in node.children:
            self.visit(child, scope)

    def visit(self, node: Node, scope: tuple[str, ...]) -> None:
        if node.type == "try_statement" and any(c.type == "catch_clause" for c in node.children):
            self._try(node, scope)
        elif _is_pattern(node):
            self._definition(node, scope)
            return
        self.walk(node, scope)

    def _definition(self, node: Node, scope: tuple[str, ...]) -> None:
        name = _pattern_name(node) or ""
        code, start, end = self._code(node)
        is_class = node.type in _CLASSES
        methods: tuple[str, ...] = ()
        if is_class:
            body = node.child_by_field_name("body")
            members = body.named_children if body is not None else []
            methods = tuple(_pattern_name(m) or "" for m in members if _is_pattern(m))
        target = _function_body(node)
        is_async = any(c.type == "async" for c in target.children)
        if is_class:
            heritage = next((c for c in node.children if c.type == "class_heritage"), None)
            signature = f"class {name}" + (f" {' '.join(_text(heritage).split())}" if heritage is not None else "")
        else:
            signature = _signature(node)
        self.found.append(
            CodePattern(
                pattern_type="class" if is_class else "function",
                name=".".join([*scope, name]),
                code=code,
                lineno=start,
                end_lineno=end,
                complexity=complexity(node),
                signature=signature,
                docstring=_jsdoc(node),
                is_async=is_async,
                decorators=tuple(" ".join(_text(d).removeprefix("@").split()) for d in _decorators(node)),
                methods=methods,
                filename=self.filename,
                language=self.language,
            )
        )
        self.walk(target if node.type in _FIELDS else node, (*scope, name))

    def _try(self, node: Node, scope: tuple[str, ...]) -> None:
        handled = _handled(node)
        where = ".".join(scope) or "<module>"
        start, end = node.start_point[0] + 1, node.end_point[0] + 1
        self.found.append(
            CodePattern(
                pattern_type="error_handler",
                name=f"{where}: try/catch {', '.join(handled)}",
                code=textwrap.dedent("\n".join(self.lines[start - 1 : end])).rstrip(),
                lineno=start,
                end_lineno=end,
                complexity=1 + _count(node),
                handled=handled,
                filename=self.filename,
                language=self.language,
            )
        )


def _errors(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.is_error or current.is_missing:
            yield current
        elif current.has_error:
            stack.extend(reversed(current.children))


def extract(source: str, *, language: str, filename: str | None = None, tsx: bool = False) -> list[CodePattern]:
    """The functions (and methods), classes and error handlers of JavaScript or TypeScript ``source``.

    ``language`` is "javascript" (JSX included) or "typescript"; ``tsx`` parses TypeScript
    with JSX. In source order. Raises :class:`~engramdb.errors.ValidationError` when the
    source does not parse.
    """
    if language not in LANGUAGES:
        raise ValidationError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    data = source.encode("utf-8")
    grammar = "tsx" if language == "typescript" and tsx else language
    tree = _parser(grammar).parse(data)
    if tree.root_node.has_error:
        bad = next(_errors(tree.root_node), tree.root_node)
        what = "missing " + bad.type if bad.is_missing else "unexpected " + repr(_text(bad)[:40])
        name = "TSX" if grammar == "tsx" else language.capitalize().replace("script", "Script")
        raise ValidationError(
            f"cannot parse {filename or 'the source'} as {name}: line {bad.start_point[0] + 1}: {what}"
        )
    extractor = _Extractor(data, language, filename)
    extractor.walk(tree.root_node, ())
    order = ("function", "class", "error_handler")
    return sorted(extractor.found, key=lambda p: (p.lineno, order.index(p.pattern_type)))
